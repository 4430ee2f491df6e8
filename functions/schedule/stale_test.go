package schedule

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

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
	r0, err := f.resolve(ctx, live)
	if err != nil {
		t.Fatal(err)
	}
	live.Status.NextSchedule = &snapv1.ScheduleRef{At: &metav1.Time{Time: slot}, Timezone: r0.tz, Jitter: r0.jitter}
	if err := c.Status().Update(ctx, live); err != nil {
		t.Fatal(err)
	}

	// What a reconcile read before the edit: generation 1, Forbid.
	stale := live.DeepCopy()
	stale.Generation = 1
	stale.Spec.Schedule.ConcurrencyPolicy = snapv1.ConcurrencyForbid
	r, err := f.resolve(ctx, stale)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.step(ctx, stale, r, f.now()); err != nil {
		t.Fatal(err)
	}
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
