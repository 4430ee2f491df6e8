package schedule

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/internal/scheme"
)

// A slot passes without minting for a policy whose every repository is
// suspended, as for a suspended policy; with one repository of two
// suspended, the slot fires for the other only.
func TestASlotPassesWhileEveryRepositoryIsSuspended(t *testing.T) {
	for _, tc := range []struct {
		name      string
		suspended []bool
		minted    bool
	}{
		{"running repository", []bool{false}, true},
		{"suspended repository", []bool{true}, false},
		{"one of two suspended", []bool{true, false}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			slot := time.Date(2026, 12, 6, 1, 0, 0, 0, time.UTC)
			sched := &snapv1.SnapshotSchedule{
				ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "hourly", UID: "sched-uid", Generation: 1},
				Spec: snapv1.SnapshotScheduleSpec{PolicyRef: &snapv1.LocalObjectRef{Name: "app"},
					Schedule: snapv1.Schedule{Cron: "0 * * * *"}},
			}
			pol := &snapv1.SnapshotPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "app"},
				Spec: snapv1.SnapshotPolicySpec{CopyMethod: snapv1.CopyDirect, Sources: []snapv1.Source{{PVC: &snapv1.LocalObjectRef{Name: "data"}}}}}
			objs := []client.Object{sched, pol}
			for i, s := range tc.suspended {
				name := []string{"primary", "offsite"}[i]
				pol.Spec.Repositories = append(pol.Spec.Repositories, snapv1.RepositoryRef{Name: name})
				objs = append(objs, &snapv1.Repository{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name}, Spec: snapv1.RepositorySpec{Suspend: s}})
			}
			c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).
				WithStatusSubresource(&snapv1.SnapshotSchedule{}, &snapv1.Snapshot{}, &snapv1.SnapshotPolicy{}).Build()
			f := &Function{Client: c, Now: func() time.Time { return slot.Add(time.Second) }}
			pin(t, f, sched, slot)
			if err := f.Reconcile(ctx, "app", "hourly"); err != nil {
				t.Fatal(err)
			}
			var snaps snapv1.SnapshotList
			if err := c.List(ctx, &snaps); err != nil {
				t.Fatal(err)
			}
			if got := len(snaps.Items) > 0; got != tc.minted {
				t.Fatalf("minted %d Snapshot(s), want minted=%v", len(snaps.Items), tc.minted)
			}
			// No run of a suspended repository is minted: it would wait
			// unfinished and, under Forbid, hold back every later slot.
			for _, sn := range snaps.Items {
				if r := sn.Spec.Repository; r != nil && r.Name == "primary" && tc.suspended[0] {
					t.Fatalf("minted %s for the suspended repository", sn.Name)
				}
			}
			var got snapv1.SnapshotSchedule
			if err := c.Get(ctx, client.ObjectKeyFromObject(sched), &got); err != nil {
				t.Fatal(err)
			}
			if at := got.Status.NextSchedule.At.Time; !at.After(slot) {
				t.Fatalf("the slot did not pass: next %s", at)
			}
		})
	}
}
