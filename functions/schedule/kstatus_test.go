package schedule

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/scheme"
)

// The schedule's kstatus: Ready from the start, Ready=False (in progress,
// not stalled) while no policy matches and Ready once one does; a cron
// that never fires is invalid and stalled. Reconciling an unchanged
// schedule again writes nothing, so its own update events cannot loop.
func TestScheduleReadiness(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 12, 6, 5, 0, 0, 0, time.UTC)
	sched := func(name, cron string) *snapv1.SnapshotSchedule {
		return &snapv1.SnapshotSchedule{
			ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name, UID: types.UID("uid-" + name), Generation: 1, CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))},
			Spec:       snapv1.SnapshotScheduleSpec{PolicyRef: &snapv1.LocalObjectRef{Name: "app"}, Schedule: snapv1.Schedule{Cron: cron, Timezone: "UTC"}},
		}
	}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(sched("yearly", "0 3 1 1 *"), sched("never", "0 0 31 2 *")).
		WithStatusSubresource(&snapv1.SnapshotSchedule{}).Build()
	f := &Function{Client: c, Now: func() time.Time { return now }}
	get := func(name string) (*snapv1.SnapshotSchedule, *metav1.Condition) {
		var s snapv1.SnapshotSchedule
		if err := c.Get(ctx, client.ObjectKey{Namespace: "app", Name: name}, &s); err != nil {
			t.Fatal(err)
		}
		return &s, meta.FindStatusCondition(s.Status.Conditions, wellknown.ConditionReady)
	}
	is := func(s *snapv1.SnapshotSchedule, typ string) metav1.ConditionStatus {
		if c := meta.FindStatusCondition(s.Status.Conditions, typ); c != nil {
			return c.Status
		}
		return ""
	}
	reconcileTwice := func(name string) {
		t.Helper()
		if err := f.Reconcile(ctx, "app", name); err != nil {
			t.Fatal(err)
		}
		before, _ := get(name)
		if err := f.Reconcile(ctx, "app", name); err != nil {
			t.Fatal(err)
		}
		if after, _ := get(name); after.ResourceVersion != before.ResourceVersion {
			t.Fatalf("%s: reconciling an unchanged schedule wrote its status again", name)
		}
	}

	reconcileTwice("yearly")
	s, ready := get("yearly")
	if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != reasonNoPolicy || is(s, wellknown.ConditionStalled) != metav1.ConditionFalse || is(s, wellknown.ConditionReconciling) != metav1.ConditionTrue {
		t.Fatalf("no policy yet: Ready %+v, Stalled %s, Reconciling %s", ready, is(s, wellknown.ConditionStalled), is(s, wellknown.ConditionReconciling))
	}
	if err := c.Create(ctx, &snapv1.SnapshotPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "app"}}); err != nil {
		t.Fatal(err)
	}
	reconcileTwice("yearly")
	if s, ready = get("yearly"); ready == nil || ready.Status != metav1.ConditionTrue || ready.Reason != reasonScheduled || s.Status.ObservedGeneration != 1 {
		t.Fatalf("with its policy: Ready %+v, observedGeneration %d", ready, s.Status.ObservedGeneration)
	}

	reconcileTwice("never")
	if s, ready = get("never"); ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != reasonInvalid || is(s, wellknown.ConditionStalled) != metav1.ConditionTrue {
		t.Fatalf("a cron that never fires: Ready %+v, Stalled %s", ready, is(s, wellknown.ConditionStalled))
	}
}
