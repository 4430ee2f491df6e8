package snapshot

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/scheme"
)

var testVGS = schema.GroupVersionKind{Group: "groupsnapshot.storage.k8s.io", Version: "v1", Kind: "VolumeGroupSnapshot"}

// groupFixture is one grouped member of a selector firing: a Snapshot
// pinned to PVC data and to group g1.
func groupFixture(ns string) []client.Object {
	objs := oneRunFixture(ns, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data", UID: "uid-data", Labels: map[string]string{"app": "pg"}},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-data"}, Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}})
	objs = append(objs, &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-data"}, Spec: corev1.PersistentVolumeSpec{
		ClaimRef:               &corev1.ObjectReference{Namespace: ns, Name: "data", UID: "uid-data"},
		PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "ebs.csi.aws.com", VolumeHandle: "vol-1"}}}})
	for _, o := range objs {
		switch o := o.(type) {
		case *snapv1.SnapshotPolicy:
			o.Spec.CopyMethod = snapv1.CopySnapshot
			o.Spec.Staging = &snapv1.Staging{Timeout: "0"} // the fixture has no creation time
			o.Spec.Sources = []snapv1.Source{{PVCSelector: &snapv1.PVCSelector{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "pg"}}}}}
		case *snapv1.Snapshot:
			o.Labels = map[string]string{wellknown.LabelVolumeGroup: "g1"}
			o.Spec.Source = &snapv1.SnapshotSource{Target: snapv1.SnapshotTarget{PVC: snapv1.PVCTarget{Name: "data"}},
				Group: &snapv1.SnapshotGroup{VolumeGroupSnapshotName: "g1"}}
		}
	}
	return objs
}

func TestGroupedRunNeverFallsBackOrBorrowsAGroup(t *testing.T) {
	const ns = "app"
	served := meta.NewDefaultRESTMapper([]schema.GroupVersion{testVGS.GroupVersion()})
	served.Add(testVGS, meta.RESTScopeNamespace)
	foreign := &unstructured.Unstructured{}
	foreign.SetGroupVersionKind(testVGS)
	foreign.SetNamespace(ns)
	foreign.SetName("g1")
	foreign.Object["spec"] = map[string]any{"source": map[string]any{"selector": map[string]any{}}}
	cases := []struct {
		name   string
		mapper meta.RESTMapper
		extra  []client.Object
		phase  snapv1.SnapshotPhase
		msg    string
	}{
		{name: "no group snapshot API: fail with the fix, no per-PVC snapshot", phase: snapv1.SnapshotFailed, msg: "set groupBy: None"},
		{name: "a group of that name someone else made: not backed up", mapper: served, extra: []client.Object{foreign}, phase: snapv1.SnapshotFailed, msg: "was not cut by snapflow for this firing"},
		{name: "the first member cuts the group and waits for it", mapper: served, phase: snapv1.SnapshotPending, msg: "waiting for VolumeGroupSnapshot g1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			b := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(groupFixture(ns)...).WithObjects(tc.extra...).
				WithStatusSubresource(&snapv1.Snapshot{}, &snapv1.Repository{})
			if tc.mapper != nil {
				b = b.WithRESTMapper(tc.mapper)
			}
			c := b.Build()
			f := &Function{Client: c, Namespace: "snapflow-system", MoverImage: "img"}
			if err := f.ReconcileSnapshot(ctx, ns, "s1"); err != nil {
				t.Fatal(err)
			}
			var s snapv1.Snapshot
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "s1"}, &s); err != nil {
				t.Fatal(err)
			}
			ready := meta.FindStatusCondition(s.Status.Conditions, wellknown.ConditionReady)
			if s.Status.Phase != tc.phase || ready == nil || !strings.Contains(ready.Message, tc.msg) {
				t.Fatalf("phase %s, Ready %+v; want %s with %q", s.Status.Phase, ready, tc.phase, tc.msg)
			}
			vs := &unstructured.UnstructuredList{}
			vs.SetGroupVersionKind(volumeSnapshotGVK.GroupVersion().WithKind("VolumeSnapshotList"))
			if err := c.List(ctx, vs, client.InNamespace(ns)); err == nil && len(vs.Items) > 0 {
				t.Fatalf("a grouped member made its own VolumeSnapshot %s", vs.Items[0].GetName())
			}
			if tc.phase != snapv1.SnapshotPending {
				return
			}
			g := &unstructured.Unstructured{}
			g.SetGroupVersionKind(testVGS)
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "g1"}, g); err != nil {
				t.Fatal(err)
			}
			// The group selects, by a label the snapshot controller can read,
			// exactly the PVCs the policy selected and that are bound.
			sel, _, _ := unstructured.NestedMap(g.Object, "spec", "source", "selector")
			if !ownedByUID(g, s.UID) || g.GetLabels()[wellknown.LabelVolumeGroup] != "g1" ||
				len(sel) != 1 || fmt.Sprint(sel["matchLabels"]) != "map["+wellknown.MemberPrefix+"g1:member]" {
				t.Fatalf("group %v: want it held by s1 and selecting the firing's label only", g.Object)
			}
			var pvc corev1.PersistentVolumeClaim
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "data"}, &pvc); err != nil || pvc.Labels[wellknown.MemberPrefix+"g1"] != wellknown.MemberValue || pvc.Labels["app"] != "pg" {
				t.Fatalf("the member PVC's labels %v (%v): want the group's label added", pvc.Labels, err)
			}
		})
	}
}

// The group outlives each member's run until the last unfinished member of
// the firing is done, including one that has not staged (held it) yet.
func TestTheLastMemberReleasesTheGroup(t *testing.T) {
	ctx := context.Background()
	const ns = "app"
	served := meta.NewDefaultRESTMapper([]schema.GroupVersion{testVGS.GroupVersion()})
	served.Add(testVGS, meta.RESTScopeNamespace)
	member := func(name string, phase snapv1.SnapshotPhase) *snapv1.Snapshot {
		return &snapv1.Snapshot{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: "uid-" + types.UID(name),
			Labels: map[string]string{wellknown.LabelVolumeGroup: "g1"}},
			Spec:   snapv1.SnapshotSpec{PolicyRef: &snapv1.PolicyRef{Name: "pg"}, Source: &snapv1.SnapshotSource{Group: &snapv1.SnapshotGroup{VolumeGroupSnapshotName: "g1"}}},
			Status: snapv1.SnapshotStatus{Phase: phase}}
	}
	a, b, late := member("a", snapv1.SnapshotSucceeded), member("b", snapv1.SnapshotRunning), member("late", snapv1.SnapshotPending)
	vgs := &unstructured.Unstructured{}
	vgs.SetGroupVersionKind(testVGS)
	vgs.SetNamespace(ns)
	vgs.SetName("g1")
	vgs.SetLabels(map[string]string{wellknown.LabelManagedBy: wellknown.ManagedByValue, wellknown.LabelVolumeGroup: "g1", wellknown.LabelConfig: "pg"})
	vgs.SetOwnerReferences([]metav1.OwnerReference{groupOwner(a), groupOwner(b)})
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithRESTMapper(served).WithObjects(a, b, late, vgs).
		WithStatusSubresource(&snapv1.Snapshot{}).Build()
	f := &Function{Client: c}
	group := func() *unstructured.Unstructured {
		g := &unstructured.Unstructured{}
		g.SetGroupVersionKind(testVGS)
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "g1"}, g); err != nil {
			return nil
		}
		return g
	}
	finish := func(s *snapv1.Snapshot) {
		s.Status.Phase = snapv1.SnapshotSucceeded
		if err := c.Status().Update(ctx, s); err != nil {
			t.Fatal(err)
		}
		if err := f.releaseGroup(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.releaseGroup(ctx, a); err != nil {
		t.Fatal(err)
	}
	// a lets go; late, which has not staged, is made to hold it, so the
	// group never has no owner while a member still needs it.
	if g := group(); g == nil || ownedByUID(g, a.UID) || !ownedByUID(g, b.UID) || !ownedByUID(g, late.UID) {
		t.Fatalf("after a: group %v, want it held by b and late", g)
	}
	finish(b)
	if g := group(); g == nil || ownedByUID(g, b.UID) || !ownedByUID(g, late.UID) {
		t.Fatalf("the group went, or kept b, while a member that has not staged yet still needs it: %v", g)
	}
	finish(late) // the last unfinished member, though it never staged
	if g := group(); g != nil {
		t.Fatalf("the last member did not delete the group: %v", g.Object)
	}
}
