package schedule

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/events"
	"github.com/snapflow/snapflow/internal/scheme"
)

type emitted []event.Event

func (e *emitted) Emit(_ context.Context, ev event.Event) error { *e = append(*e, ev); return nil }

// A schedule with no success for two slots is BackupStale, announced once
// (not on every resync), and fresh again after a success; a suspended
// schedule is never stale.
func TestAStaleScheduleIsAnnouncedOnce(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 12, 6, 5, 0, 0, 0, time.UTC)
	last := metav1.NewTime(time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC))
	sched := func(name string, suspend bool) *snapv1.SnapshotSchedule {
		return &snapv1.SnapshotSchedule{
			ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name, UID: k8stypes.UID("uid-" + name), Generation: 1,
				CreationTimestamp: metav1.NewTime(time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC))},
			Spec: snapv1.SnapshotScheduleSpec{PolicyRef: &snapv1.LocalObjectRef{Name: "app"},
				Schedule: snapv1.Schedule{Cron: "0 3 * * *", Timezone: "UTC", Suspend: suspend}},
			// The slot of this morning was taken: nothing is due now.
			Status: snapv1.SnapshotScheduleStatus{LastSchedule: &snapv1.ScheduleRef{At: &last}},
		}
	}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).
		WithObjects(sched("nightly", false), sched("paused", true), &snapv1.SnapshotPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "app"}}).
		WithStatusSubresource(&snapv1.SnapshotSchedule{}, &snapv1.Snapshot{}).Build()
	var out emitted
	f := &Function{Client: c, Now: func() time.Time { return now }, Emitter: &out}
	cond := func(name string) *metav1.Condition {
		var s snapv1.SnapshotSchedule
		if err := c.Get(ctx, client.ObjectKey{Namespace: "app", Name: name}, &s); err != nil {
			t.Fatal(err)
		}
		return meta.FindStatusCondition(s.Status.Conditions, wellknown.ConditionBackupStale)
	}
	for i := 0; i < 2; i++ { // a resync changes nothing
		for _, name := range []string{"nightly", "paused"} {
			if err := f.Reconcile(ctx, "app", name); err != nil {
				t.Fatal(err)
			}
		}
	}
	if c := cond("nightly"); c == nil || c.Status != metav1.ConditionTrue || c.Reason != "NoRecentSuccess" || !strings.Contains(c.Message, "since its creation") {
		t.Fatalf("nightly BackupStale %+v", c)
	}
	if c := cond("paused"); c != nil {
		t.Fatalf("a suspended schedule is never stale: %+v", c)
	}
	if len(out) != 1 || out[0].Type() != events.BackupStale || out[0].Subject() != "app/nightly" {
		t.Fatalf("events %v, want one %s", out, events.BackupStale)
	}
	var d events.BackupStaleData
	if err := out[0].DataAs(&d); err != nil || d.LastSuccess != "" || d.Since != "2026-12-03T00:00:00Z" || d.StaleSince != "2026-12-04T03:00:00Z" || len(d.Policies) != 1 {
		t.Fatalf("data %+v (%v)", d, err)
	}

	// A run of this morning succeeds: fresh again, and nothing is sent.
	end := metav1.NewTime(time.Date(2026, 12, 6, 3, 5, 0, 0, time.UTC))
	ok := &snapv1.Snapshot{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "nightly-20261206030000",
		Labels: map[string]string{wellknown.LabelSchedule: "nightly", wellknown.LabelScheduleUID: "uid-nightly"}}}
	if err := c.Create(ctx, ok); err != nil {
		t.Fatal(err)
	}
	ok.Status = snapv1.SnapshotStatus{Phase: snapv1.SnapshotSucceeded, Timing: &snapv1.Timing{EndTime: &end}}
	if err := c.Status().Update(ctx, ok); err != nil {
		t.Fatal(err)
	}
	if err := f.Reconcile(ctx, "app", "nightly"); err != nil {
		t.Fatal(err)
	}
	if c := cond("nightly"); c == nil || c.Status != metav1.ConditionFalse || c.Reason != "RecentSuccess" || len(out) != 1 {
		t.Fatalf("after a success: %+v, %d events", c, len(out))
	}
}
