package localnode

import (
	"context"
	"fmt"
	"hash/fnv"
	"os"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The group snapshot API as the snapshot controller serves it; the test
// node speaks v1, which every served version converts to and from.
var (
	groupSnapshotGVK   = schema.GroupVersionKind{Group: "groupsnapshot.storage.k8s.io", Version: "v1", Kind: "VolumeGroupSnapshot"}
	groupContentGVK    = schema.GroupVersionKind{Group: "groupsnapshot.storage.k8s.io", Version: "v1", Kind: "VolumeGroupSnapshotContent"}
	volumeSnapshotGVK  = schema.GroupVersionKind{Group: "snapshot.storage.k8s.io", Version: "v1", Kind: "VolumeSnapshot"}
	snapshotContentGVK = schema.GroupVersionKind{Group: "snapshot.storage.k8s.io", Version: "v1", Kind: "VolumeSnapshotContent"}
)

func list(gvk schema.GroupVersionKind) *unstructured.UnstructuredList {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	return l
}

func object(gvk schema.GroupVersionKind, ns, name string) *unstructured.Unstructured {
	o := &unstructured.Unstructured{}
	o.SetGroupVersionKind(gvk)
	o.SetNamespace(ns)
	o.SetName(name)
	return o
}

func shortHash(parts ...string) string {
	h := fnv.New64a()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return fmt.Sprintf("%016x", h.Sum64())
}

// syncGroups plays the snapshot controller and a CSI driver with the
// group controller capability: it cuts every volume a VolumeGroupSnapshot
// selects in one pass, and publishes the objects a real controller makes
// (the group content, one VolumeSnapshot and content per member, bound
// both ways), so consumers read exactly what a cluster shows them.
func (n *Node) syncGroups(ctx context.Context) {
	groups := list(groupSnapshotGVK)
	if err := n.o.Client.List(ctx, groups); err != nil {
		return // the group snapshot API is not installed
	}
	live := map[string]bool{}
	for i := range groups.Items {
		g := &groups.Items[i]
		live[string(g.GetUID())] = true
		if err := n.cutGroup(ctx, g); err != nil && ctx.Err() == nil {
			n.o.Log.Error(err, "volume group snapshot", "name", g.GetNamespace()+"/"+g.GetName())
		}
	}
	n.freeGroupMembers(ctx, live)
}

func (n *Node) cutGroup(ctx context.Context, g *unstructured.Unstructured) error {
	if ready, _, _ := unstructured.NestedBool(g.Object, "status", "readyToUse"); ready || g.GetDeletionTimestamp() != nil {
		return nil
	}
	if _, ok, _ := unstructured.NestedMap(g.Object, "spec", "source", "selector"); !ok {
		return nil // pre-provisioned group content is not supported here
	}
	// As the snapshot controller does: only matchLabels selects members.
	ml, _, _ := unstructured.NestedStringMap(g.Object, "spec", "source", "selector", "matchLabels")
	sel := labels.SelectorFromSet(ml)
	var pvcs corev1.PersistentVolumeClaimList
	if err := n.o.Client.List(ctx, &pvcs, client.InNamespace(g.GetNamespace()), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return err
	}
	if len(pvcs.Items) == 0 {
		return n.groupError(ctx, g, "the selector matches no PersistentVolumeClaim")
	}
	type member struct {
		pvc, volumeHandle, name, snapshotHandle string
		size                                    int64
	}
	var members []member
	for _, p := range pvcs.Items {
		if p.Status.Phase != corev1.ClaimBound {
			// As the snapshot controller does: a group waits for every member.
			return n.groupError(ctx, g, fmt.Sprintf("the PVC %s is not yet bound to a PV, will not attempt to take a group snapshot", p.Name))
		}
		var pv corev1.PersistentVolume
		if err := n.o.Client.Get(ctx, client.ObjectKey{Name: p.Spec.VolumeName}, &pv); err != nil {
			return err
		}
		if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != Driver {
			return n.groupError(ctx, g, "the PVC "+p.Name+" is not a volume of this driver")
		}
		h := shortHash(string(g.GetUID()), pv.Spec.CSI.VolumeHandle)
		members = append(members, member{pvc: p.Name, volumeHandle: pv.Spec.CSI.VolumeHandle, name: "snapshot-" + h, snapshotHandle: "snap-" + h})
	}
	// One pass over every member: the test node's stand-in for one instant.
	for i := range members {
		m := &members[i]
		dst := n.snapshotDir(g.GetNamespace(), m.name)
		_ = os.RemoveAll(dst)
		size, err := copyTree(n.PVCDir(g.GetNamespace(), m.pvc), dst)
		if err != nil {
			return err
		}
		m.size = max(size, 1<<20)
	}
	now := metav1.Now().UTC().Format("2006-01-02T15:04:05Z")
	groupHandle := "group-" + shortHash(string(g.GetUID()))
	contentName := "groupsnapcontent-" + string(g.GetUID())
	var volumeHandles, infos []any
	for _, m := range members {
		volumeHandles = append(volumeHandles, m.volumeHandle)
		infos = append(infos, map[string]any{"volumeHandle": m.volumeHandle, "snapshotHandle": m.snapshotHandle, "readyToUse": true, "restoreSize": m.size})
	}
	content := object(groupContentGVK, "", contentName)
	content.Object["spec"] = map[string]any{
		"deletionPolicy":         "Delete",
		"driver":                 Driver,
		"source":                 map[string]any{"volumeHandles": volumeHandles},
		"volumeGroupSnapshotRef": map[string]any{"name": g.GetName(), "namespace": g.GetNamespace(), "uid": string(g.GetUID())},
	}
	// The class the group names is the content's, as the controller binds it.
	if class, ok, _ := unstructured.NestedString(g.Object, "spec", "volumeGroupSnapshotClassName"); ok && class != "" {
		content.Object["spec"].(map[string]any)["volumeGroupSnapshotClassName"] = class
	}
	if err := n.createWithStatus(ctx, content, map[string]any{"readyToUse": true, "volumeGroupSnapshotHandle": groupHandle, "volumeSnapshotInfoList": infos}); err != nil {
		return err
	}
	ctl := true
	for _, m := range members {
		vscName := "snapcontent-" + shortHash(string(g.GetUID()), m.volumeHandle)
		vsc := object(snapshotContentGVK, "", vscName)
		vsc.Object["spec"] = map[string]any{
			"deletionPolicy":    "Delete",
			"driver":            Driver,
			"source":            map[string]any{"snapshotHandle": m.snapshotHandle},
			"sourceVolumeMode":  "Filesystem",
			"volumeSnapshotRef": map[string]any{"name": m.name, "namespace": g.GetNamespace()},
		}
		if err := n.createWithStatus(ctx, vsc, map[string]any{"readyToUse": true, "snapshotHandle": m.snapshotHandle, "restoreSize": m.size, "volumeGroupSnapshotHandle": groupHandle}); err != nil {
			return err
		}
		vs := object(volumeSnapshotGVK, g.GetNamespace(), m.name)
		vs.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: g.GetAPIVersion(), Kind: g.GetKind(), Name: g.GetName(), UID: g.GetUID(), Controller: &ctl}})
		vs.Object["spec"] = map[string]any{"source": map[string]any{"volumeSnapshotContentName": vscName}}
		if err := n.createWithStatus(ctx, vs, map[string]any{
			"readyToUse": true, "creationTime": now, "boundVolumeSnapshotContentName": vscName,
			"restoreSize": resource.NewQuantity(m.size, resource.BinarySI).String(), "volumeGroupSnapshotName": g.GetName(),
		}); err != nil {
			return err
		}
	}
	status := map[string]any{"readyToUse": true, "creationTime": now, "boundVolumeGroupSnapshotContentName": contentName}
	if err := unstructured.SetNestedField(g.Object, status, "status"); err != nil {
		return err
	}
	return n.o.Client.Status().Update(ctx, g)
}

// createWithStatus creates obj (or finds it from an earlier pass) and
// writes its status, as a controller does in two calls.
func (n *Node) createWithStatus(ctx context.Context, obj *unstructured.Unstructured, status map[string]any) error {
	if err := n.o.Client.Create(ctx, obj); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
		if err := n.o.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
	}
	if err := unstructured.SetNestedField(obj.Object, status, "status"); err != nil {
		return err
	}
	return n.o.Client.Status().Update(ctx, obj)
}

func (n *Node) groupError(ctx context.Context, g *unstructured.Unstructured, msg string) error {
	if old, _, _ := unstructured.NestedString(g.Object, "status", "error", "message"); old == msg {
		return nil
	}
	status := map[string]any{"readyToUse": false, "error": map[string]any{"message": msg, "time": metav1.Now().UTC().Format("2006-01-02T15:04:05Z")}}
	if err := unstructured.SetNestedField(g.Object, status, "status"); err != nil {
		return err
	}
	return client.IgnoreNotFound(n.o.Client.Status().Update(ctx, g))
}

// freeGroupMembers deletes what a deleted group leaves (deletionPolicy
// Delete): its member VolumeSnapshots, their contents and the group
// content. No garbage collector runs here, so the test node does it.
func (n *Node) freeGroupMembers(ctx context.Context, live map[string]bool) {
	snaps := list(volumeSnapshotGVK)
	if err := n.o.Client.List(ctx, snaps); err == nil {
		for i := range snaps.Items {
			vs := &snaps.Items[i]
			for _, o := range vs.GetOwnerReferences() {
				if o.Kind == groupSnapshotGVK.Kind && !live[string(o.UID)] {
					_ = client.IgnoreNotFound(n.o.Client.Delete(ctx, vs))
				}
			}
		}
	}
	contents := list(snapshotContentGVK)
	if err := n.o.Client.List(ctx, contents); err == nil {
		for i := range contents.Items {
			c := &contents.Items[i]
			if _, grouped, _ := unstructured.NestedString(c.Object, "status", "volumeGroupSnapshotHandle"); !grouped {
				continue
			}
			name, _, _ := unstructured.NestedString(c.Object, "spec", "volumeSnapshotRef", "name")
			ns, _, _ := unstructured.NestedString(c.Object, "spec", "volumeSnapshotRef", "namespace")
			if err := n.o.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, object(volumeSnapshotGVK, ns, name)); apierrors.IsNotFound(err) {
				_ = client.IgnoreNotFound(n.o.Client.Delete(ctx, c))
			}
		}
	}
	gcs := list(groupContentGVK)
	if err := n.o.Client.List(ctx, gcs); err == nil {
		for i := range gcs.Items {
			c := &gcs.Items[i]
			uid, _, _ := unstructured.NestedString(c.Object, "spec", "volumeGroupSnapshotRef", "uid")
			if !live[uid] {
				_ = client.IgnoreNotFound(n.o.Client.Delete(ctx, c))
			}
		}
	}
}
