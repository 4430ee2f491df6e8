package schedule

import (
	"context"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/scheme"
)

// A skip decided on a spec that changed meanwhile spends no slot: a
// reconcile that read concurrencyPolicy Forbid must not skip a slot the
// user has just switched to Replace (seen in e2e under load: the held slot
// was never fired).
func TestADecisionOnAStaleSpecSpendsNoSlot(t *testing.T) {
	ctx := context.Background()
	slot := time.Date(2026, 12, 6, 0, 45, 0, 0, time.UTC)
	live := &snapv1.SnapshotSchedule{
		ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "often", UID: "sched-uid", Generation: 2},
		Spec: snapv1.SnapshotScheduleSpec{PolicyRef: &snapv1.LocalObjectRef{Name: "app"},
			Schedule: snapv1.Schedule{Cron: "*/5 * * * *", ConcurrencyPolicy: snapv1.ConcurrencyReplace}},
		Status: snapv1.SnapshotScheduleStatus{NextSchedule: &snapv1.ScheduleRef{At: &metav1.Time{Time: slot}}},
	}
	policy := &snapv1.SnapshotPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "app"}}
	// The previous run still waits for a repository slot.
	queued := &snapv1.Snapshot{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "often-20261206004000",
		Labels: map[string]string{wellknown.LabelSchedule: "often", wellknown.LabelScheduleUID: "sched-uid"}},
		Status: snapv1.SnapshotStatus{Phase: snapv1.SnapshotPending, Conditions: []metav1.Condition{{Type: wellknown.ConditionRepositorySlotAvailable,
			Status: metav1.ConditionFalse, Reason: "Parked", LastTransitionTime: metav1.Now()}}}}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(live, policy, queued).
		WithStatusSubresource(&snapv1.SnapshotSchedule{}, &snapv1.Snapshot{}).Build()
	f := &Function{Client: c, Now: func() time.Time { return slot.Add(time.Second) }}
	// Pinned as the function pins it, with the inherited timezone and jitter.
	pin(t, f, live, slot)

	// What a reconcile read before the edit: generation 1, Forbid.
	stale := live.DeepCopy()
	stale.Generation = 1
	stale.Spec.Schedule.ConcurrencyPolicy = snapv1.ConcurrencyForbid
	stepOn(t, f, stale, f.now())
	var got snapv1.SnapshotSchedule
	if err := c.Get(ctx, client.ObjectKeyFromObject(live), &got); err != nil {
		t.Fatal(err)
	}
	if at := got.Status.NextSchedule.At.Time; !at.Equal(slot) {
		t.Fatalf("a skip decided under the old spec moved the pinned slot to %s", at)
	}

	// The live spec holds the slot while the old run is queued ...
	if err := f.Reconcile(ctx, "app", "often"); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(live), &got); err != nil {
		t.Fatal(err)
	}
	if at := got.Status.NextSchedule.At.Time; !at.Equal(slot) {
		t.Fatalf("Replace spent the slot while the old run was queued: next %s", at)
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, wellknown.ConditionReplacementHeld); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("ReplacementHeld %+v", got.Status.Conditions)
	}
}

// An edit that lands inside one reconcile, between its read of the
// schedule and its decision (Forbid → Allow, and another policy), fires
// the slot once, for the new policy, and records it.
func TestAnEditDuringAReconcileIsDecidedOnTheNewSpec(t *testing.T) {
	ctx := context.Background()
	slot := time.Date(2026, 12, 6, 0, 45, 0, 0, time.UTC)
	edited := false
	edit := interceptor.Funcs{List: func(ctx context.Context, cl client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		if _, ok := list.(*snapv1.SnapshotList); ok && !edited {
			edited = true
			var s snapv1.SnapshotSchedule
			if err := cl.Get(ctx, client.ObjectKey{Namespace: "app", Name: "often"}, &s); err != nil {
				return err
			}
			s.Spec.Schedule.ConcurrencyPolicy = snapv1.ConcurrencyAllow
			s.Spec.PolicyRef.Name = "other"
			s.Generation++ // the fake client leaves generation alone
			if err := cl.Update(ctx, &s); err != nil {
				return err
			}
		}
		return cl.List(ctx, list, opts...)
	}}
	sched := &snapv1.SnapshotSchedule{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "often", UID: "sched-uid", Generation: 1},
		Spec: snapv1.SnapshotScheduleSpec{PolicyRef: &snapv1.LocalObjectRef{Name: "app"},
			Schedule: snapv1.Schedule{Cron: "*/5 * * * *", ConcurrencyPolicy: snapv1.ConcurrencyForbid}}}
	pol := func(name string) *snapv1.SnapshotPolicy {
		return &snapv1.SnapshotPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name},
			Spec: snapv1.SnapshotPolicySpec{Repository: &snapv1.RepositoryRef{Name: "primary"}, Sources: []snapv1.Source{{PVC: &snapv1.LocalObjectRef{Name: "data"}}}}}
	}
	unfinished := &snapv1.Snapshot{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "often-20261206004000",
		Labels: map[string]string{wellknown.LabelSchedule: "often", wellknown.LabelScheduleUID: "sched-uid"}},
		Status: snapv1.SnapshotStatus{Phase: snapv1.SnapshotPending}}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(sched, pol("app"), pol("other"), unfinished).
		WithStatusSubresource(&snapv1.SnapshotSchedule{}, &snapv1.Snapshot{}).WithInterceptorFuncs(edit).Build()
	f := &Function{Client: c, Now: func() time.Time { return slot.Add(time.Second) }}
	pin(t, f, sched, slot)

	if err := f.Reconcile(ctx, "app", "often"); err != nil {
		t.Fatal(err)
	}
	var fired snapv1.Snapshot
	if err := c.Get(ctx, client.ObjectKey{Namespace: "app", Name: "often-20261206004500"}, &fired); err != nil {
		t.Fatalf("the slot did not fire after the edit: %v", err)
	}
	if fired.Spec.PolicyRef.Name != "other" {
		t.Fatalf("fired with the policy from before the edit, %s", fired.Spec.PolicyRef.Name)
	}
	var got snapv1.SnapshotSchedule
	if err := c.Get(ctx, client.ObjectKeyFromObject(sched), &got); err != nil {
		t.Fatal(err)
	}
	if l := got.Status.LastSchedule; l == nil || !l.At.Time.Equal(slot) {
		t.Fatalf("the firing is not recorded: lastSchedule %+v", got.Status.LastSchedule)
	}
	if cd := meta.FindStatusCondition(got.Status.Conditions, "Scheduled"); cd == nil || cd.Reason != reasonFired {
		t.Fatalf("Scheduled %+v, want Fired", cd)
	}
}

// A Replace decided on a spec the user has since switched to Forbid never
// deletes the running run, and a stale "no policy" hold never overwrites
// what the live spec recorded.
func TestStaleDecisionsTouchNothing(t *testing.T) {
	ctx := context.Background()
	slot := time.Date(2026, 12, 6, 0, 45, 0, 0, time.UTC)
	live := &snapv1.SnapshotSchedule{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "often", UID: "sched-uid", Generation: 2},
		Spec: snapv1.SnapshotScheduleSpec{PolicyRef: &snapv1.LocalObjectRef{Name: "app"},
			Schedule: snapv1.Schedule{Cron: "*/5 * * * *", ConcurrencyPolicy: snapv1.ConcurrencyForbid}}}
	policy := &snapv1.SnapshotPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "app"}}
	run := &snapv1.Snapshot{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "often-20261206004000",
		Labels: map[string]string{wellknown.LabelSchedule: "often", wellknown.LabelScheduleUID: "sched-uid"}},
		Status: snapv1.SnapshotStatus{Phase: snapv1.SnapshotRunning, Job: &snapv1.JobRef{Name: "mover-1"}}}
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "mover-1"}}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(live, policy, run, job).
		WithStatusSubresource(&snapv1.SnapshotSchedule{}, &snapv1.Snapshot{}).Build()
	f := &Function{Client: c, Now: func() time.Time { return slot.Add(time.Second) }}
	r0 := pin(t, f, live, slot)

	stale := live.DeepCopy()
	stale.Generation = 1
	stale.Spec.Schedule.ConcurrencyPolicy = snapv1.ConcurrencyReplace
	stepOn(t, f, stale, f.now())
	if err := c.Get(ctx, client.ObjectKeyFromObject(job), &batchv1.Job{}); err != nil {
		t.Fatalf("a stale Replace deleted the running run's Job: %v", err)
	}
	var s snapv1.Snapshot
	if err := c.Get(ctx, client.ObjectKeyFromObject(run), &s); err != nil || s.Annotations[wellknown.AnnotationPrunedBy] != "" {
		t.Fatalf("a stale Replace pruned the running run: %v %v", err, s.Annotations)
	}

	// The live spec skips the slot (Forbid); a stale reconcile that found no
	// policy then leaves Ready as the live one wrote it.
	if err := f.Reconcile(ctx, "app", "often"); err != nil {
		t.Fatal(err)
	}
	var before snapv1.SnapshotSchedule
	if err := c.Get(ctx, client.ObjectKeyFromObject(live), &before); err != nil {
		t.Fatal(err)
	}
	gone := stale.DeepCopy()
	gone.Spec.PolicyRef.Name = "gone"
	gone.Status = before.Status
	gone.Status.NextSchedule = &snapv1.ScheduleRef{At: &metav1.Time{Time: before.Status.NextSchedule.At.Time}, Timezone: r0.tz, Jitter: r0.jitter}
	stepOn(t, f, gone, before.Status.NextSchedule.At.Add(time.Second))
	var after snapv1.SnapshotSchedule
	if err := c.Get(ctx, client.ObjectKeyFromObject(live), &after); err != nil {
		t.Fatal(err)
	}
	if a, b := meta.FindStatusCondition(after.Status.Conditions, wellknown.ConditionReady), meta.FindStatusCondition(before.Status.Conditions, wellknown.ConditionReady); (a == nil) != (b == nil) || a != nil && a.Reason != b.Reason {
		t.Fatalf("a stale hold rewrote Ready: %+v, was %+v", a, b)
	}
}

// pin writes slot as s's pinned next slot, as the function pins it (with
// the inherited timezone and jitter), and returns what it resolved.
func pin(t *testing.T, f *Function, s *snapv1.SnapshotSchedule, slot time.Time) *resolved {
	t.Helper()
	r, err := f.resolve(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	s.Status.NextSchedule = &snapv1.ScheduleRef{At: &metav1.Time{Time: slot}, Timezone: r.tz, Jitter: r.jitter}
	if err := f.Client.Status().Update(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	return r
}

// stepOn runs one step as a reconcile that read s would, at now.
func stepOn(t *testing.T, f *Function, s *snapv1.SnapshotSchedule, now time.Time) {
	t.Helper()
	r, err := f.resolve(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.step(context.Background(), s, r, now); err != nil {
		t.Fatal(err)
	}
}
