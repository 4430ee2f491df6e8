package snapshot

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/functions/host"
)

var volumeSnapshotGVK = schema.GroupVersionKind{Group: "snapshot.storage.k8s.io", Version: "v1", Kind: "VolumeSnapshot"}

// DefaultStagingTimeout bounds how long a run waits for its staged volume.
const DefaultStagingTimeout = 10 * time.Minute

func stagedName(s *snapv1.Snapshot) string { return s.Name + "-src" }

// stage prepares the volume the mover reads: nothing for Direct; a
// VolumeSnapshot and a PVC restored from it for Snapshot; a cloned PVC for
// Clone. It reports ready once the mover can be created.
func (f *Function) stage(ctx context.Context, s *snapv1.Snapshot, p *runPlan) (bool, error) {
	if p.copyMethod == snapv1.CopyDirect {
		return true, nil
	}
	var src corev1.PersistentVolumeClaim
	if err := f.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: p.pvc}, &src); err != nil {
		return false, err
	}
	name := stagedName(s)
	staging := p.policy.Spec.Staging
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.Namespace, OwnerReferences: []metav1.OwnerReference{ownerRef(s)},
			Labels: map[string]string{wellknown.LabelManagedBy: wellknown.ManagedByValue, wellknown.LabelSnapshot: s.Name}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      src.Spec.AccessModes,
			StorageClassName: src.Spec.StorageClassName,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: storageOf(&src)}},
			VolumeMode:       src.Spec.VolumeMode,
		},
	}
	if staging != nil {
		if staging.StorageClassName != nil {
			pvc.Spec.StorageClassName = staging.StorageClassName
		}
		if len(staging.AccessModes) > 0 {
			pvc.Spec.AccessModes = nil
			for _, m := range staging.AccessModes {
				pvc.Spec.AccessModes = append(pvc.Spec.AccessModes, corev1.PersistentVolumeAccessMode(m))
			}
		}
	}
	staged := &snapv1.Staged{CopyMethod: p.copyMethod, PVCName: name}
	switch p.copyMethod {
	case snapv1.CopyClone:
		pvc.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: p.pvc}
	case snapv1.CopySnapshot:
		var from snapshotFrom
		var err error
		if g := grouped(s, p); g != nil {
			staged.VolumeGroupSnapshotName = g.VolumeGroupSnapshotName
			from, err = f.memberOf(ctx, s, p, g, &src)
		} else {
			from, err = f.ownSnapshot(ctx, s, p, name)
		}
		staged.VolumeSnapshotName = from.snapshot
		switch {
		case err != nil:
			return false, err
		case from.refused != nil:
			return false, f.hold(ctx, s, *from.refused)
		case from.waiting != "":
			if f.stagingExpired(s, staging) {
				return false, f.hold(ctx, s, gate{cond: wellknown.ConditionReady, reason: "StagingTimeout", fatal: true, message: from.waiting + "; gave up after the staging timeout"})
			}
			return false, f.setStaging(ctx, s, staged, from.waiting)
		}
		// The instant is taken: resume the workload now, before anything
		// that may fail (the staged PVC's creation) can keep it quiesced.
		if waiting, err := f.afterHooks(ctx, s, p.policy, true); err != nil || waiting {
			return false, err
		}
		growTo(pvc, from.restoreSize)
		group := volumeSnapshotGVK.Group
		pvc.Spec.DataSource = &corev1.TypedLocalObjectReference{APIGroup: &group, Kind: "VolumeSnapshot", Name: from.snapshot}
	}
	if err := f.Client.Create(ctx, pvc); apierrors.IsAlreadyExists(err) {
		// Back up only a copy this run made, never a PVC someone put under its name.
		var live corev1.PersistentVolumeClaim
		if err := f.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: name}, &live); err != nil {
			return false, err
		}
		if !host.Owned(&live, s) {
			return false, f.hold(ctx, s, foreignStaged("PVC", name))
		}
	} else if err != nil {
		return false, fmt.Errorf("create staged PVC %s: %w", name, err)
	}
	staged.Ready = true
	// The staged PVC may bind only when the mover pod is scheduled
	// (WaitForFirstConsumer), so the mover starts now.
	return true, f.setStaging(ctx, s, staged, "")
}

// snapshotFrom is the VolumeSnapshot a run stages from: its name and
// restore size once ready, else why it waits or is refused.
type snapshotFrom struct {
	snapshot, restoreSize string
	waiting               string
	refused               *gate
}

func refusedFrom(format string, a ...any) snapshotFrom {
	return snapshotFrom{refused: &gate{cond: wellknown.ConditionReady, reason: ReasonInvalidSpec, fatal: true, message: fmt.Sprintf(format, a...)}}
}

// ownSnapshot creates (or finds) the run's own VolumeSnapshot of its PVC,
// named name, and reports it ready or why it waits.
func (f *Function) ownSnapshot(ctx context.Context, s *snapv1.Snapshot, p *runPlan, name string) (snapshotFrom, error) {
	from := snapshotFrom{snapshot: name}
	vs := &unstructured.Unstructured{}
	vs.SetGroupVersionKind(volumeSnapshotGVK)
	vs.SetNamespace(s.Namespace)
	vs.SetName(name)
	vs.SetOwnerReferences([]metav1.OwnerReference{ownerRef(s)})
	vs.SetLabels(map[string]string{wellknown.LabelManagedBy: wellknown.ManagedByValue, wellknown.LabelSnapshot: s.Name})
	spec := map[string]any{"source": map[string]any{"persistentVolumeClaimName": p.pvc}}
	if c := p.snapshotClass; c != nil {
		spec["volumeSnapshotClassName"] = *c
	}
	vs.Object["spec"] = spec
	if err := f.Client.Create(ctx, vs); err != nil && !apierrors.IsAlreadyExists(err) {
		if meta.IsNoMatchError(err) {
			return refusedFrom("copyMethod Snapshot needs the snapshot.storage.k8s.io API (CSI external-snapshotter), which this cluster does not serve; install it or use copyMethod Clone or Direct"), nil
		}
		return from, fmt.Errorf("create VolumeSnapshot %s: %w", name, err)
	}
	if err := f.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: name}, vs); err != nil {
		return from, err
	}
	if !host.Owned(vs, s) {
		g := foreignStaged("VolumeSnapshot", name)
		return snapshotFrom{refused: &g}, nil
	}
	if ready, _, _ := unstructured.NestedBool(vs.Object, "status", "readyToUse"); !ready {
		from.waiting = fmt.Sprintf("waiting for VolumeSnapshot %s of PVC %s to be ready", name, p.pvc)
		if e, ok, _ := unstructured.NestedString(vs.Object, "status", "error", "message"); ok && e != "" {
			from.waiting += " (the driver reports: " + e + ")"
		}
		return from, nil
	}
	from.restoreSize, _, _ = unstructured.NestedString(vs.Object, "status", "restoreSize")
	return from, nil
}

func (f *Function) stagingExpired(s *snapv1.Snapshot, st *snapv1.Staging) bool {
	timeout := DefaultStagingTimeout
	if st != nil && st.Timeout != "" {
		if st.Timeout == "0" {
			return false
		}
		if d, err := time.ParseDuration(st.Timeout); err == nil {
			timeout = d
		}
	}
	return f.now().Sub(s.CreationTimestamp.Time) > timeout
}

func (f *Function) setStaging(ctx context.Context, s *snapv1.Snapshot, staged *snapv1.Staged, waiting string) error {
	return f.updateStatus(ctx, s, func(st *snapv1.SnapshotStatus, gen int64) {
		pending(st, s)
		st.Staged = staged
		if waiting != "" {
			meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: wellknown.ConditionReady, Status: metav1.ConditionFalse, Reason: ReasonStaging, Message: waiting, ObservedGeneration: gen})
		}
	})
}

// foreignStaged fails a run whose staging name is taken by an object it did
// not make: backing that up would store someone else's data as this one's.
func foreignStaged(kind, name string) gate {
	return gate{cond: wellknown.ConditionReady, reason: ReasonInvalidSpec, fatal: true,
		message: fmt.Sprintf("%s %s exists and was not made by this Snapshot, so it is not backed up; delete or rename it and create a new Snapshot", kind, name)}
}

// unstage deletes the staged PVC and VolumeSnapshot of a finished run. The
// names are derived from the Snapshot, never read from status (a mover can
// write status), and only objects this Snapshot controls are deleted.
func (f *Function) unstage(ctx context.Context, s *snapv1.Snapshot) error {
	st := s.Status.Staged
	if st == nil {
		return nil
	}
	name := stagedName(s)
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: name}}
	if err := deleteIfOwned(ctx, f.Client, pvc, s, "staged PVC"); err != nil {
		return err
	}
	if st.CopyMethod == snapv1.CopySnapshot || st.VolumeSnapshotName != "" {
		vs := &unstructured.Unstructured{}
		vs.SetGroupVersionKind(volumeSnapshotGVK)
		vs.SetNamespace(s.Namespace)
		vs.SetName(name)
		if err := deleteIfOwned(ctx, f.Client, vs, s, "VolumeSnapshot"); err != nil {
			return err
		}
	}
	return nil
}

// deleteIfOwned deletes what s made under obj's name, and leaves (and logs)
// an object of that name that s does not own.
func deleteIfOwned(ctx context.Context, c client.Client, obj client.Object, s *snapv1.Snapshot, what string) error {
	_, err := host.DeleteOwned(ctx, c, obj, s)
	if errors.Is(err, host.ErrNotOwned) {
		host.Log(ctx).Info(what+" left in place: this Snapshot does not own it", "snapshot", s.Namespace+"/"+s.Name, "name", obj.GetName())
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete %s %s: %w", what, obj.GetName(), err)
	}
	return nil
}

// growTo raises the staged PVC's request to a snapshot's restore size: a
// volume restored from a snapshot cannot be smaller than it.
func growTo(pvc *corev1.PersistentVolumeClaim, size string) {
	if q, err := resource.ParseQuantity(size); err == nil && size != "" && q.Cmp(pvc.Spec.Resources.Requests[corev1.ResourceStorage]) > 0 {
		pvc.Spec.Resources.Requests[corev1.ResourceStorage] = q
	}
}

func storageOf(p *corev1.PersistentVolumeClaim) resource.Quantity {
	if q, ok := p.Status.Capacity[corev1.ResourceStorage]; ok {
		return q
	}
	if q, ok := p.Spec.Resources.Requests[corev1.ResourceStorage]; ok {
		return q
	}
	return resource.MustParse("1Gi")
}
