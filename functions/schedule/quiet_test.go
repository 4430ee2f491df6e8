package schedule

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/events"
	"github.com/snapflow/snapflow/internal/scheme"
)

func TestQuiet(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *snapv1.ScheduleRef {
		return &snapv1.ScheduleRef{At: &metav1.Time{Time: now.Add(d)}}
	}
	deleting := metav1.NewTime(now)
	tests := []struct {
		name string
		s    snapv1.SnapshotSchedule
		want bool
	}{
		{"next slot ahead", snapv1.SnapshotSchedule{Status: snapv1.SnapshotScheduleStatus{NextSchedule: at(time.Minute)}}, true},
		{"next slot due", snapv1.SnapshotSchedule{Status: snapv1.SnapshotScheduleStatus{NextSchedule: at(0)}}, false},
		{"next slot past", snapv1.SnapshotSchedule{Status: snapv1.SnapshotScheduleStatus{NextSchedule: at(-time.Hour)}}, false},
		{"nothing pinned yet", snapv1.SnapshotSchedule{}, false},
		{"being deleted", snapv1.SnapshotSchedule{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &deleting}, Status: snapv1.SnapshotScheduleStatus{NextSchedule: at(time.Minute)}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := quiet(&tt.s, now); got != tt.want {
				t.Fatalf("quiet = %v, want %v", got, tt.want)
			}
		})
	}
}

// A tick fires every due schedule, several at a time, each once, and
// leaves the others alone; with an informer, the tick lists the schedules
// from it.
func TestTickFiresEveryDueSchedule(t *testing.T) {
	for _, informed := range []bool{false, true} {
		t.Run(fmt.Sprintf("informed=%v", informed), func(t *testing.T) {
			ctx := context.Background()
			slot := time.Date(2026, 12, 6, 1, 0, 0, 0, time.UTC)
			pol := &snapv1.SnapshotPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "app"},
				Spec: snapv1.SnapshotPolicySpec{Repository: &snapv1.RepositoryRef{Name: "primary"}, CopyMethod: snapv1.CopyDirect,
					Sources: []snapv1.Source{{PVC: &snapv1.LocalObjectRef{Name: "data"}}}}}
			c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(pol, &snapv1.Repository{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "primary"}}).
				WithStatusSubresource(&snapv1.SnapshotSchedule{}, &snapv1.Snapshot{}).Build()
			f := &Function{Client: c, Now: func() time.Time { return slot.Add(time.Second) }, Workers: 4}
			const due, later = 20, 5
			for i := range due + later {
				s := &snapv1.SnapshotSchedule{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: fmt.Sprintf("s-%02d", i), UID: types.UID(fmt.Sprintf("uid-%02d", i)), Generation: 1},
					Spec: snapv1.SnapshotScheduleSpec{PolicyRef: &snapv1.LocalObjectRef{Name: "app"}, Schedule: snapv1.Schedule{Cron: "0 * * * *", ConcurrencyPolicy: snapv1.ConcurrencyAllow}}}
				if err := c.Create(ctx, s); err != nil {
					t.Fatal(err)
				}
				at := slot
				if i >= due {
					at = slot.Add(time.Hour)
				}
				pin(t, f, s, at)
			}
			if informed {
				// The tick's list of schedules is never asked of the API
				// server: the live client refuses it.
				f.Reader = c
				f.Client = interceptor.NewClient(c, interceptor.Funcs{
					List: func(ctx context.Context, cl client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
						if _, ok := list.(*snapv1.SnapshotScheduleList); ok {
							return errors.New("a tick listed the schedules live: the informer serves them")
						}
						return cl.List(ctx, list, opts...)
					},
				})
			}
			tick := func(id string) {
				e := cloudevents.NewEvent()
				e.SetID(id)
				e.SetType(events.Ping)
				e.SetSource("test")
				if err := f.Handle(ctx, e); err != nil {
					t.Fatal(err)
				}
			}
			tick("t1")
			tick("t1-again")
			var snaps snapv1.SnapshotList
			if err := c.List(ctx, &snaps); err != nil {
				t.Fatal(err)
			}
			per := map[string]int{}
			for _, s := range snaps.Items {
				per[s.Labels[wellknown.LabelSchedule]]++
			}
			if len(snaps.Items) != due || len(per) != due {
				t.Fatalf("%d Snapshots from %d schedules, want one from each of the %d due", len(snaps.Items), len(per), due)
			}
		})
	}
}

// A schedule's own event reads live, whatever the informer has seen: a
// schedule applied with its policy finds the policy at once.
func TestAnEditReadsLiveNotTheInformer(t *testing.T) {
	ctx := context.Background()
	pol := &snapv1.SnapshotPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "app"},
		Spec: snapv1.SnapshotPolicySpec{Repository: &snapv1.RepositoryRef{Name: "primary"}, Sources: []snapv1.Source{{PVC: &snapv1.LocalObjectRef{Name: "data"}}}}}
	s := &snapv1.SnapshotSchedule{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "nightly", UID: "s-uid", Generation: 1},
		Spec: snapv1.SnapshotScheduleSpec{PolicyRef: &snapv1.LocalObjectRef{Name: "app"}, Schedule: snapv1.Schedule{Cron: "0 1 * * *"}}}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(pol, s).WithStatusSubresource(&snapv1.SnapshotSchedule{}).Build()
	behind := fake.NewClientBuilder().WithScheme(scheme.New()).Build() // an informer that has seen nothing yet
	f := &Function{Client: c, Reader: behind, Now: func() time.Time { return time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC) }}
	if err := f.Reconcile(ctx, "app", "nightly"); err != nil {
		t.Fatal(err)
	}
	var live snapv1.SnapshotSchedule
	if err := c.Get(ctx, client.ObjectKeyFromObject(s), &live); err != nil {
		t.Fatal(err)
	}
	if r := meta.FindStatusCondition(live.Status.Conditions, wellknown.ConditionReady); r == nil || r.Reason == reasonNoPolicy || live.Status.NextSchedule == nil {
		t.Fatalf("Ready %+v, next %+v: the edit's event must find the policy live", r, live.Status.NextSchedule)
	}
}
