// Package volumegroup decides how the Snapshots of one firing share a CSI
// VolumeGroupSnapshot (named by fanout.GroupName): which volumes a group is
// cut over, and which member VolumeSnapshot of a cut group holds a given
// volume. It reads objects handed to it and owns no client, so the same
// rules serve the snapshot function and its tests.
package volumegroup

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group is the API group of VolumeGroupSnapshot and its content; the
// version is whichever the cluster prefers (v1beta1, v1beta2 or v1).
const Group = "groupsnapshot.storage.k8s.io"

// Kinds, resolved to a served version through the REST mapper.
var (
	KindGroupSnapshot = schema.GroupKind{Group: Group, Kind: "VolumeGroupSnapshot"}
	KindGroupContent  = schema.GroupKind{Group: Group, Kind: "VolumeGroupSnapshotContent"}
	// VolumeSnapshotContent is GA, so its version is fixed.
	SnapshotContentGVK = schema.GroupVersionKind{Group: "snapshot.storage.k8s.io", Version: "v1", Kind: "VolumeSnapshotContent"}
	SnapshotListGVK    = schema.GroupVersionKind{Group: "snapshot.storage.k8s.io", Version: "v1", Kind: "VolumeSnapshotList"}
)

// Members picks the PVCs a group is cut over: those of selected (the
// source's selection) that the firing minted a member for (not contested
// by another source), that are bound, and whose volume is a CSI volume of
// driver, the driver of the member that cuts the group. The snapshot
// controller refuses a whole group over an unbound or foreign volume, so
// such a PVC is left out and its own member fails saying why.
func Members(selected []string, contested map[string]bool, volumes map[string]Volume, driver string) []string {
	var out []string
	for _, name := range selected {
		v, ok := volumes[name]
		if contested[name] || !ok || !v.Bound || v.Driver == "" || v.Driver != driver {
			continue
		}
		out = append(out, name)
	}
	return out
}

// Volume is what Members needs to know of one PVC.
type Volume struct {
	Bound  bool
	Driver string // the CSI driver of its PV ("" when not CSI)
}

// SnapshotHandles maps each volume handle of a cut group to the handle of
// its snapshot, from a VolumeGroupSnapshotContent's status. v1beta2 and v1
// call the list volumeSnapshotInfoList, v1beta1 volumeSnapshotHandlePairList.
func SnapshotHandles(content *unstructured.Unstructured) map[string]string {
	out := map[string]string{}
	for _, field := range []string{"volumeSnapshotInfoList", "volumeSnapshotHandlePairList"} {
		items, _, _ := unstructured.NestedSlice(content.Object, "status", field)
		for _, it := range items {
			m, ok := it.(map[string]any)
			if !ok {
				continue
			}
			vh, _ := m["volumeHandle"].(string)
			sh, _ := m["snapshotHandle"].(string)
			if vh != "" && sh != "" {
				out[vh] = sh
			}
		}
	}
	return out
}

// ErrPending means the group covers the volume but the snapshot
// controller has not yet made (or bound) its member VolumeSnapshot: wait.
var ErrPending = errors.New("member VolumeSnapshot not bound yet")

// Member is one VolumeSnapshot the snapshot controller made for a group,
// with the snapshot handle of the content it is bound to.
type Member struct {
	Name           string
	SnapshotHandle string
	Ready          bool
	RestoreSize    string
}

// Find picks the member holding the volume with handle volumeHandle. It
// fails, naming what is missing, when the group does not cover the volume
// (a run must never back up another volume's snapshot under this one's
// name), and with ErrPending while the member is still being made.
func Find(group string, handles map[string]string, volumeHandle string, members []Member) (Member, error) {
	if volumeHandle == "" {
		return Member{}, fmt.Errorf("the PVC's PersistentVolume has no CSI volume handle, so it cannot be part of VolumeGroupSnapshot %s (group snapshots need CSI volumes); set groupBy: None", group)
	}
	want, ok := handles[volumeHandle]
	if !ok {
		return Member{}, fmt.Errorf("VolumeGroupSnapshot %s does not cover this PVC's volume: the PVC was not a bound CSI volume of the group's driver, selected by the policy, when the group was cut (its labels changed, it was created or bound later, or its driver differs: group only volumes of one CSI driver, or set groupBy: None)", group)
	}
	var found []Member
	for _, m := range members {
		if m.SnapshotHandle == want {
			found = append(found, m)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return Member{}, fmt.Errorf("VolumeGroupSnapshot %s covers this PVC's volume: %w", group, ErrPending)
	default:
		return Member{}, fmt.Errorf("VolumeGroupSnapshot %s has %d member VolumeSnapshots bound to this PVC's snapshot; refusing to guess which one to back up", group, len(found))
	}
}
