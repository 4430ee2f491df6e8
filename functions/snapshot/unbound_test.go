package snapshot

import (
	"context"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/scheme"
)

// A run waits for its source claim to bind: an unbound claim holds no data,
// and a storageClass volume policy can only match once the PV exists.
func TestRunWaitsForItsSourceToBind(t *testing.T) {
	ctx := context.Background()
	const ns = "app"
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data"},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(oneRunFixture(ns, pvc)...).
		WithStatusSubresource(&snapv1.Snapshot{}, &snapv1.Repository{}, &corev1.PersistentVolumeClaim{}).Build()
	f := &Function{Client: c, Namespace: "snapflow-system", MoverImage: "img"}

	jobs := func() int {
		var l batchv1.JobList
		if err := c.List(ctx, &l, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		return len(l.Items)
	}
	for i := 0; i < 2; i++ { // redelivery changes nothing while it waits
		if err := f.ReconcileSnapshot(ctx, ns, "s1"); err != nil {
			t.Fatal(err)
		}
	}
	var s snapv1.Snapshot
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "s1"}, &s); err != nil {
		t.Fatal(err)
	}
	ready := meta.FindStatusCondition(s.Status.Conditions, wellknown.ConditionReady)
	if s.Status.Phase != snapv1.SnapshotPending || ready == nil || ready.Reason != ReasonSourceNotBound ||
		!strings.Contains(ready.Message, "app/data is not bound") || !strings.Contains(ready.Message, "phase Pending") {
		t.Fatalf("phase %s, Ready %+v: want Pending, waiting for app/data to bind", s.Status.Phase, ready)
	}
	if n := jobs(); n != 0 {
		t.Fatalf("%d mover Jobs for an unbound source, want none", n)
	}

	// The claim binds; the next event starts the run.
	pvc.Spec.VolumeName = "pv-data"
	if err := c.Update(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	pvc.Status.Phase = corev1.ClaimBound
	if err := c.Status().Update(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	if err := f.ReconcileSnapshot(ctx, ns, "s1"); err != nil {
		t.Fatal(err)
	}
	if n := jobs(); n != 1 {
		t.Fatalf("%d mover Jobs once bound, want 1", n)
	}
}
