package schedule

import (
	"context"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
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

// Replace asks a run whose mover Job exists (recorded or not) to stop, and
// holds the slot until it has ended and run its afterSnapshot hooks; then
// the run goes, stamped replaced-run, and the held slot fires.
func TestReplaceCancelsARunningRunThenFires(t *testing.T) {
	ctx := context.Background()
	slot := time.Date(2026, 12, 6, 0, 45, 0, 0, time.UTC)
	isController := true
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: moverjob.Name("often-20261206004000", "old-uid"),
		Labels:          map[string]string{wellknown.LabelManagedBy: wellknown.ManagedByValue},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: snapv1.GroupVersion.String(), Kind: "Snapshot", Name: "often-20261206004000", UID: "old-uid", Controller: &isController}}}}
	c, f, sched, old := replaceFixture(t, slot, slot.Add(-time.Minute), job)
	if err := f.Reconcile(ctx, "app", "often"); err != nil {
		t.Fatal(err)
	}
	var got snapv1.Snapshot
	if err := c.Get(ctx, client.ObjectKeyFromObject(old), &got); err != nil || !strings.HasPrefix(got.Annotations[wellknown.AnnotationCancelRequested], wellknown.CancelReplaced) {
		t.Fatalf("the running run was not asked to stop: %v %v", err, got.Annotations)
	}
	if held := heldReason(t, c, sched); held != "OldRunCancelling" {
		t.Fatalf("ReplacementHeld reason %q, want OldRunCancelling", held)
	}
	if n := count(t, c); n != 1 {
		t.Fatalf("%d Snapshots: the new slot fired before the old run ended", n)
	}
	// Failed but not yet finalized (its afterSnapshot hooks not run): the
	// slot still waits, so the next freeze never comes before this thaw.
	got.Status.Phase = snapv1.SnapshotFailed
	got.Status.Failure = &snapv1.Failure{Class: "Cancelled", Message: "the run was cancelled"}
	if err := c.Status().Update(ctx, &got); err != nil {
		t.Fatal(err)
	}
	if err := f.Reconcile(ctx, "app", "often"); err != nil {
		t.Fatal(err)
	}
	if n := count(t, c); n != 1 || heldReason(t, c, sched) != "OldRunCancelling" {
		t.Fatalf("%d Snapshots, held %q: the slot fired before the cancelled run's hooks ran", n, heldReason(t, c, sched))
	}
	// The snapshot function finalizes it after its hooks.
	if err := c.Get(ctx, client.ObjectKeyFromObject(old), &got); err != nil {
		t.Fatal(err)
	}
	got.Status.Conditions = append(got.Status.Conditions, metav1.Condition{Type: wellknown.ConditionReady, Status: metav1.ConditionFalse, Reason: string(snapv1.SnapshotFailed),
		ObservedGeneration: got.Generation, LastTransitionTime: metav1.Now()})
	if err := c.Status().Update(ctx, &got); err != nil {
		t.Fatal(err)
	}
	if err := f.Reconcile(ctx, "app", "often"); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(old), &got); err == nil && got.Annotations[wellknown.AnnotationPrunedBy] != wellknown.PrunedByReplacedRun {
		t.Fatalf("the cancelled run was not pruned: %v", got.Annotations)
	}
	if err := f.Reconcile(ctx, "app", "often"); err != nil {
		t.Fatal(err)
	}
	var kids snapv1.SnapshotList
	if err := c.List(ctx, &kids, client.InNamespace("app")); err != nil {
		t.Fatal(err)
	}
	fired := false
	for _, k := range kids.Items {
		fired = fired || strings.HasSuffix(k.Name, slot.Format("20060102150405"))
	}
	if !fired {
		t.Fatalf("the held slot did not fire once the old run ended: %d Snapshots", len(kids.Items))
	}
}

// A run whose mover finished before the cancel was seen succeeded: its
// backup is kept, whatever annotation it carries.
func TestReplaceKeepsARunThatSucceededFirst(t *testing.T) {
	ctx := context.Background()
	slot := time.Date(2026, 12, 6, 0, 45, 0, 0, time.UTC)
	c, f, _, old := replaceFixture(t, slot, slot.Add(-time.Minute))
	var got snapv1.Snapshot
	if err := c.Get(ctx, client.ObjectKeyFromObject(old), &got); err != nil {
		t.Fatal(err)
	}
	got.Annotations = map[string]string{wellknown.AnnotationCancelRequested: wellknown.CancelReplaced + "2026-12-06T00:45:00Z"}
	if err := c.Update(ctx, &got); err != nil {
		t.Fatal(err)
	}
	got.Status.Phase = snapv1.SnapshotSucceeded
	got.Status.Conditions = []metav1.Condition{{Type: wellknown.ConditionReady, Status: metav1.ConditionTrue, Reason: string(snapv1.SnapshotSucceeded),
		ObservedGeneration: got.Generation, LastTransitionTime: metav1.Now()}}
	if err := c.Status().Update(ctx, &got); err != nil {
		t.Fatal(err)
	}
	if err := f.Reconcile(ctx, "app", "often"); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(old), &got); err != nil || got.Annotations[wellknown.AnnotationPrunedBy] != "" {
		t.Fatalf("a run that succeeded was pruned as replaced: %v %v", err, got.Annotations)
	}
}

func heldReason(t *testing.T, c client.Client, sched *snapv1.SnapshotSchedule) string {
	t.Helper()
	var s snapv1.SnapshotSchedule
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(sched), &s); err != nil {
		t.Fatal(err)
	}
	if cond := meta.FindStatusCondition(s.Status.Conditions, wellknown.ConditionReplacementHeld); cond != nil && cond.Status == metav1.ConditionTrue {
		return cond.Reason
	}
	return ""
}

func count(t *testing.T, c client.Client) int {
	t.Helper()
	var kids snapv1.SnapshotList
	if err := c.List(context.Background(), &kids, client.InNamespace("app")); err != nil {
		t.Fatal(err)
	}
	return len(kids.Items)
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

// How long a run may stay starting follows its policy: a run whose
// beforeSnapshot hook may take an hour is not cancelled after 45 minutes.
func TestReplaceWaitsOutARunsOwnHookTimeout(t *testing.T) {
	replaceStarting(t, time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC), false, func(p *snapv1.SnapshotPolicy) {
		p.Spec.Hooks = &snapv1.Hooks{BeforeSnapshot: []snapv1.Hook{{HTTPRequest: &snapv1.HTTPRequestHook{URL: "http://db/freeze", Timeout: "1h"}}}}
	})
}

func replaceStarting(t *testing.T, claimedAt time.Time, stuck bool, policy ...func(*snapv1.SnapshotPolicy)) {
	ctx := context.Background()
	slot := time.Date(2026, 12, 6, 0, 45, 0, 0, time.UTC)
	c, f, sched, old := replaceFixture(t, slot, claimedAt)
	for _, mutate := range policy {
		var pol snapv1.SnapshotPolicy
		if err := c.Get(ctx, client.ObjectKey{Namespace: "app", Name: "app"}, &pol); err != nil {
			t.Fatal(err)
		}
		mutate(&pol)
		if err := c.Update(ctx, &pol); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Reconcile(ctx, "app", "often"); err != nil {
		t.Fatal(err)
	}
	var got snapv1.Snapshot
	if err := c.Get(ctx, client.ObjectKeyFromObject(old), &got); err != nil {
		t.Fatal(err)
	}
	_, asked := got.Annotations[wellknown.AnnotationCancelRequested]
	want := "OldRunStarting"
	if stuck {
		want = "OldRunCancelling"
	}
	if asked != stuck || heldReason(t, c, sched) != want {
		t.Fatalf("stuck %v: asked to stop %v, held %q; want asked %v, held %s", stuck, asked, heldReason(t, c, sched), stuck, want)
	}
	if n := count(t, c); n != 1 {
		t.Fatalf("the new slot fired while the old run was starting: %d Snapshots", n)
	}
}
