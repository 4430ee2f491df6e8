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
	"github.com/snapflow/snapflow/internal/repository"
	"github.com/snapflow/snapflow/internal/scheme"
)

// A backup waits while maintenance reclaims its repository without kopia's
// margins: the run could reuse content that maintenance is deleting.
func TestBackupWaitsForAReclaimingMaintenance(t *testing.T) {
	ctx := context.Background()
	const ns = "app"
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-data"}, Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}
	label := map[string]string{wellknown.LabelReclaiming: repository.PoolKey(snapv1.KindRepository, ns, "primary")}
	isController := true
	maint := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "primary-maint-full", Labels: label,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: snapv1.GroupVersion.String(), Kind: "Maintenance", Name: "primary", UID: "m-uid", Controller: &isController}}}}
	// Forged: the label on a Job no Maintenance controls, and one of
	// another namespace's Maintenance. Neither holds the backup.
	forged := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "forged", Labels: label}}
	elsewhere := maint.DeepCopy()
	elsewhere.Namespace, elsewhere.Name = "other", "elsewhere"
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(append(oneRunFixture(ns, pvc), maint, forged, elsewhere)...).
		WithStatusSubresource(&snapv1.Snapshot{}, &snapv1.Repository{}, &batchv1.Job{}).Build()
	f := &Function{Client: c, Namespace: "snapflow-system", MoverImage: "img"}
	if err := f.ReconcileSnapshot(ctx, ns, "s1"); err != nil {
		t.Fatal(err)
	}
	var s snapv1.Snapshot
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "s1"}, &s); err != nil {
		t.Fatal(err)
	}
	ready := meta.FindStatusCondition(s.Status.Conditions, wellknown.ConditionReady)
	if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != ReasonRepositoryReclaiming || !strings.Contains(ready.Message, "primary-maint-full") || strings.Contains(ready.Message, "forged") {
		t.Fatalf("condition %+v: want a wait naming the maintenance job", ready)
	}
	// It ends; the backup starts.
	maint.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	if err := c.Status().Update(ctx, maint); err != nil {
		t.Fatal(err)
	}
	if err := f.ReconcileSnapshot(ctx, ns, "s1"); err != nil {
		t.Fatal(err)
	}
	var jobs batchv1.JobList
	if err := c.List(ctx, &jobs, client.InNamespace(ns), client.HasLabels{wellknown.LabelSnapshot}); err != nil || len(jobs.Items) != 1 {
		t.Fatalf("mover jobs %d (%v), want 1 once maintenance ended", len(jobs.Items), err)
	}
}
