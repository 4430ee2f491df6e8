package schedule

import (
	"context"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ktypes "k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/scheme"
)

// failedJobsHistoryLimit keeps the newest failed runs per repository and
// prunes the older ones, stamped as failed history; successful runs, and
// another repository's failures within its own limit, stay. The consecutive
// failures count back to the newest success.
func TestFailedHistoryIsBoundedPerRepository(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	two := int32(2)
	for _, tc := range []struct {
		name        string
		limit       *int32
		pruned      []string
		consecutive int32
	}{
		{name: "a limit of two", limit: &two, pruned: []string{"f1", "f2", "f3"}, consecutive: 3},
		{name: "the default keeps ten", pruned: nil, consecutive: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &snapv1.SnapshotSchedule{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "nightly", UID: "s-uid", Generation: 1, CreationTimestamp: metav1.NewTime(t0)},
				Spec: snapv1.SnapshotScheduleSpec{PolicyRef: &snapv1.LocalObjectRef{Name: "app"}, Schedule: snapv1.Schedule{Cron: "0 1 * * *"}, FailedJobsHistoryLimit: tc.limit}}
			pol := &snapv1.SnapshotPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "app"},
				Spec: snapv1.SnapshotPolicySpec{Repository: &snapv1.RepositoryRef{Name: "primary"}, Sources: []snapv1.Source{{PVC: &snapv1.LocalObjectRef{Name: "data"}}}}}
			run := func(name string, h int, phase snapv1.SnapshotPhase, repo string) *snapv1.Snapshot {
				end := metav1.NewTime(t0.Add(time.Duration(h) * time.Hour))
				return &snapv1.Snapshot{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name, UID: ktypes.UID("uid-" + name), CreationTimestamp: end,
					Labels: map[string]string{wellknown.LabelSchedule: "nightly", wellknown.LabelScheduleUID: "s-uid"}},
					Spec:   snapv1.SnapshotSpec{Repository: &snapv1.RepositoryRef{Kind: snapv1.KindRepository, Namespace: "app", Name: repo}},
					Status: snapv1.SnapshotStatus{Phase: phase, Timing: &snapv1.Timing{EndTime: &end}}}
			}
			// Oldest first: five failures in primary around one success,
			// then two newer failures; one failure in offsite.
			snaps := []*snapv1.Snapshot{run("f1", 1, snapv1.SnapshotFailed, "primary"), run("f2", 2, snapv1.SnapshotFailed, "primary"),
				run("ok", 3, snapv1.SnapshotSucceeded, "primary"), run("f3", 4, snapv1.SnapshotFailed, "primary"),
				run("f4", 5, snapv1.SnapshotFailed, "primary"), run("f5", 6, snapv1.SnapshotFailed, "primary"),
				run("off1", 2, snapv1.SnapshotFailed, "offsite")}
			// With a limit of two, f5 and f4 (the newest) stay in primary.
			b := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(s, pol).WithStatusSubresource(&snapv1.SnapshotSchedule{}, &snapv1.Snapshot{})
			for _, sn := range snaps {
				b = b.WithObjects(sn)
			}
			c := b.Build()
			f := &Function{Client: c, Now: func() time.Time { return t0.Add(7 * time.Hour) }}
			if err := f.Reconcile(ctx, "app", "nightly"); err != nil {
				t.Fatal(err)
			}
			var left snapv1.SnapshotList
			if err := c.List(ctx, &left); err != nil {
				t.Fatal(err)
			}
			var gone []string
			for _, sn := range snaps {
				if !slices.ContainsFunc(left.Items, func(l snapv1.Snapshot) bool { return l.Name == sn.Name }) {
					gone = append(gone, sn.Name)
				}
			}
			if !slices.Equal(gone, tc.pruned) {
				t.Fatalf("pruned %v, want %v", gone, tc.pruned)
			}
			var live snapv1.SnapshotSchedule
			if err := c.Get(ctx, client.ObjectKeyFromObject(s), &live); err != nil {
				t.Fatal(err)
			}
			if live.Status.ConsecutiveFailures != tc.consecutive {
				t.Fatalf("consecutiveFailures %d, want %d (f3, f4 and f5 since ok)", live.Status.ConsecutiveFailures, tc.consecutive)
			}
			if l := live.Status.LastSuccessfulSchedule; l == nil || l.SnapshotRef == nil || l.SnapshotRef.Name != "ok" {
				t.Fatalf("lastSuccessfulSchedule %+v, want ok", l)
			}
		})
	}
}
