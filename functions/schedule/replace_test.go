package schedule

import (
	"context"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/moverjob"
	"github.com/snapflow/snapflow/internal/scheme"
)

// replaceFixture is a Replace schedule pinned at slot whose previous run
// claimed its slot at claimedAt and has no Job recorded; extra objects
// join the client.
func replaceFixture(t *testing.T, slot, claimedAt time.Time, extra ...client.Object) (client.Client, *Function, *snapv1.SnapshotSchedule, *snapv1.Snapshot) {
	t.Helper()
	sched := &snapv1.SnapshotSchedule{
		ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "often", UID: "sched-uid", Generation: 1},
		Spec: snapv1.SnapshotScheduleSpec{PolicyRef: &snapv1.LocalObjectRef{Name: "app"},
			Schedule: snapv1.Schedule{Cron: "*/5 * * * *", ConcurrencyPolicy: snapv1.ConcurrencyReplace}},
	}
	pol := &snapv1.SnapshotPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "app"},
		Spec: snapv1.SnapshotPolicySpec{Repository: &snapv1.RepositoryRef{Name: "primary"}, CopyMethod: snapv1.CopyDirect,
			Sources: []snapv1.Source{{PVC: &snapv1.LocalObjectRef{Name: "data"}}}}}
	old := &snapv1.Snapshot{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "often-20261206004000", UID: "old-uid",
		Labels: map[string]string{wellknown.LabelSchedule: "often", wellknown.LabelScheduleUID: "sched-uid", wellknown.LabelConfig: "app"}},
		Spec: snapv1.SnapshotSpec{PolicyRef: &snapv1.PolicyRef{Name: "app"}},
		Status: snapv1.SnapshotStatus{Phase: snapv1.SnapshotPending, Conditions: []metav1.Condition{{Type: wellknown.ConditionRepositorySlotAvailable,
			Status: metav1.ConditionTrue, Reason: "SlotClaimed", LastTransitionTime: metav1.NewTime(claimedAt)}}}}
	objs := append([]client.Object{sched, pol, old, &snapv1.Repository{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "primary"}}}, extra...)
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).
		WithStatusSubresource(&snapv1.SnapshotSchedule{}, &snapv1.Snapshot{}).Build()
	f := &Function{Client: c, Now: func() time.Time { return slot.Add(time.Second) }}
	pin(t, f, sched, slot)
	return c, f, sched, old
}

// Replace cancels a run whose mover Job exists but is not recorded in its
// status yet (it had just claimed its slot): the Job is found by the name
// the run gives it, and deleted only because the run made it.
func TestReplaceDeletesTheJobOfARunStillStarting(t *testing.T) {
	ctx := context.Background()
	slot := time.Date(2026, 12, 6, 0, 45, 0, 0, time.UTC)
	isController := true
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: moverjob.Name("often-20261206004000", "old-uid"),
		Labels:          map[string]string{wellknown.LabelManagedBy: wellknown.ManagedByValue},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: snapv1.GroupVersion.String(), Kind: "Snapshot", Name: "often-20261206004000", UID: "old-uid", Controller: &isController}}}}
	c, f, _, old := replaceFixture(t, slot, slot.Add(-time.Minute), job)
	if err := f.Reconcile(ctx, "app", "often"); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(job), &batchv1.Job{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the replaced run's mover Job is still there (%v)", err)
	}
	var got snapv1.Snapshot
	if err := c.Get(ctx, client.ObjectKeyFromObject(old), &got); err == nil && got.Annotations[wellknown.AnnotationPrunedBy] != wellknown.PrunedByReplacedRun {
		t.Fatalf("the replaced run was not pruned: %v", got.Annotations)
	}
}

// A run that claimed its slot but has no mover Job yet is in its
// before-snapshot hooks (which may have frozen the application): Replace
// waits for it instead of cancelling it halfway.
func TestReplaceWaitsForARunInItsHooks(t *testing.T) {
	replaceStarting(t, time.Date(2026, 12, 6, 0, 44, 0, 0, time.UTC), false)
}

// A run starting for longer than any hook or staging may take is stuck:
// Replace cancels it after all, or the schedule would never fire again.
func TestReplaceCancelsARunStuckStarting(t *testing.T) {
	replaceStarting(t, time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC), true)
}

func replaceStarting(t *testing.T, claimedAt time.Time, stuck bool) {
	ctx := context.Background()
	slot := time.Date(2026, 12, 6, 0, 45, 0, 0, time.UTC)
	c, f, sched, old := replaceFixture(t, slot, claimedAt)
	if err := f.Reconcile(ctx, "app", "often"); err != nil {
		t.Fatal(err)
	}
	var got snapv1.Snapshot
	err := c.Get(ctx, client.ObjectKeyFromObject(old), &got)
	if stuck {
		if err == nil && got.Annotations[wellknown.AnnotationPrunedBy] != wellknown.PrunedByReplacedRun {
			t.Fatalf("the stuck run was not replaced: %v", got.Annotations)
		}
		return
	}
	if err != nil || got.Annotations[wellknown.AnnotationPrunedBy] != "" {
		t.Fatalf("the starting run was cancelled: %v %v", err, got.Annotations)
	}
	var s snapv1.SnapshotSchedule
	if err := c.Get(ctx, client.ObjectKeyFromObject(sched), &s); err != nil {
		t.Fatal(err)
	}
	cond := meta.FindStatusCondition(s.Status.Conditions, wellknown.ConditionReplacementHeld)
	if cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != "OldRunStarting" {
		t.Fatalf("ReplacementHeld = %+v, want True OldRunStarting", cond)
	}
	var kids snapv1.SnapshotList
	if err := c.List(ctx, &kids, client.InNamespace("app")); err != nil || len(kids.Items) != 1 {
		t.Fatalf("the new slot fired while the old run was starting: %d Snapshots (%v)", len(kids.Items), err)
	}
}
