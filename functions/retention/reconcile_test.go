package retention

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ktypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/events"
	"github.com/snapflow/snapflow/internal/scheme"
)

var t0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

// emitted records what the function sends.
type emitted struct {
	mu  sync.Mutex
	got []event.Event
}

func (e *emitted) Emit(_ context.Context, ev event.Event) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, ev)
	return nil
}

// run is one Snapshot of policy app, ended h hours after t0.
func run(name string, h int, phase snapv1.SnapshotPhase, mutate ...func(*snapv1.Snapshot)) *snapv1.Snapshot {
	end := metav1.NewTime(t0.Add(time.Duration(h) * time.Hour))
	s := &snapv1.Snapshot{
		ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name, UID: ktypes.UID("uid-" + name),
			CreationTimestamp: end, Labels: map[string]string{wellknown.LabelConfig: "app"}},
		Spec: snapv1.SnapshotSpec{PolicyRef: &snapv1.PolicyRef{Name: "app"}, Repository: &snapv1.RepositoryRef{Name: "primary"}},
		Status: snapv1.SnapshotStatus{Phase: phase, Timing: &snapv1.Timing{EndTime: &end},
			Snapshot: &snapv1.SnapshotRecord{KopiaSnapshotID: "k" + name}},
	}
	for _, m := range mutate {
		m(s)
	}
	return s
}

func keepLatest(n int32) *snapv1.Retention { return &snapv1.Retention{KeepLatest: &n} }

// Reconcile deletes exactly what GFS drops among finished runs, confirms
// each live first, and leaves runs in flight, failed or pinned alone.
func TestReconcilePrunesOnlyWhatRetentionDrops(t *testing.T) {
	pinned := func(s *snapv1.Snapshot) { s.Spec.Pin = true }
	tests := []struct {
		name      string
		retention *snapv1.Retention
		suspend   bool
		snaps     []*snapv1.Snapshot
		// deleted are the names pruned, in any order.
		deleted []string
	}{
		{name: "keepLatest drops the oldest finished runs",
			retention: keepLatest(2),
			snaps: []*snapv1.Snapshot{run("s1", 1, snapv1.SnapshotSucceeded), run("s2", 2, snapv1.SnapshotSucceeded),
				run("s3", 3, snapv1.SnapshotSucceeded), run("s4", 4, snapv1.SnapshotSucceeded)},
			deleted: []string{"s1", "s2"}},
		{name: "runs in flight, failed and pinned ones stay",
			retention: keepLatest(1),
			snaps: []*snapv1.Snapshot{run("old-pinned", 1, snapv1.SnapshotSucceeded, pinned), run("failed", 2, snapv1.SnapshotFailed),
				run("s3", 3, snapv1.SnapshotSucceeded), run("s4", 4, snapv1.SnapshotSucceeded), run("running", 5, snapv1.SnapshotRunning)},
			deleted: []string{"s3"}},
		{name: "no retention keeps every run",
			snaps:   []*snapv1.Snapshot{run("s1", 1, snapv1.SnapshotSucceeded), run("s2", 2, snapv1.SnapshotSucceeded)},
			deleted: nil},
		{name: "a suspended policy prunes nothing",
			retention: keepLatest(1), suspend: true,
			snaps:   []*snapv1.Snapshot{run("s1", 1, snapv1.SnapshotSucceeded), run("s2", 2, snapv1.SnapshotSucceeded)},
			deleted: nil},
		{name: "the unchanged rows beyond the history bound go",
			retention: keepLatest(5),
			snaps: func() []*snapv1.Snapshot {
				var out []*snapv1.Snapshot
				for i := range UnchangedHistory + 2 {
					out = append(out, run(fmt.Sprintf("u%02d", i), i+1, snapv1.SnapshotUnchanged))
				}
				return out
			}(),
			deleted: []string{"u00", "u01"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			p := &snapv1.SnapshotPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "app", UID: "p-uid", Generation: 1},
				Spec: snapv1.SnapshotPolicySpec{Suspend: tt.suspend, Repository: &snapv1.RepositoryRef{Name: "primary"}, Retention: tt.retention}}
			objs := []client.Object{p, &snapv1.Repository{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "primary"}}}
			for _, s := range tt.snaps {
				objs = append(objs, s)
			}
			// Another policy's Snapshot, older than all: never this policy's to prune.
			objs = append(objs, run("other", 0, snapv1.SnapshotSucceeded, func(s *snapv1.Snapshot) {
				s.Labels[wellknown.LabelConfig] = "other"
				s.Spec.PolicyRef.Name = "other"
			}))
			c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).
				WithStatusSubresource(&snapv1.SnapshotPolicy{}, &snapv1.Snapshot{}).Build()
			rec := record.NewFakeRecorder(20)
			em := &emitted{}
			f := &Function{Client: c, Recorder: rec, Emitter: em, Now: func() time.Time { return t0.Add(24 * time.Hour) }}
			if err := f.Reconcile(ctx, "app", "app"); err != nil {
				t.Fatal(err)
			}
			var left snapv1.SnapshotList
			if err := c.List(ctx, &left); err != nil {
				t.Fatal(err)
			}
			var gone []string
			for _, s := range append(tt.snaps, run("other", 0, "")) {
				if !slices.ContainsFunc(left.Items, func(l snapv1.Snapshot) bool { return l.Name == s.Name }) {
					gone = append(gone, s.Name)
				}
			}
			slices.Sort(gone)
			if !slices.Equal(gone, tt.deleted) {
				t.Fatalf("deleted %v, want %v", gone, tt.deleted)
			}
			if len(tt.deleted) == 0 {
				if len(em.got) != 0 {
					t.Fatalf("emitted %d events without pruning", len(em.got))
				}
				return
			}
			if len(em.got) != 1 || em.got[0].Type() != events.RetentionPruned {
				t.Fatalf("emitted %v, want one %s", em.got, events.RetentionPruned)
			}
			var data PrunedData
			if err := json.Unmarshal(em.got[0].Data(), &data); err != nil {
				t.Fatal(err)
			}
			slices.Sort(data.Pruned)
			if data.Namespace != "app" || data.Policy != "app" || !slices.Equal(data.Pruned, tt.deleted) {
				t.Fatalf("event data %+v, want policy app/app pruning %v", data, tt.deleted)
			}
			if got := recorded(rec); !strings.Contains(got, "RetentionPruned") {
				t.Fatalf("Kubernetes Events %q, want RetentionPruned", got)
			}
			var live snapv1.SnapshotPolicy
			if err := c.Get(ctx, client.ObjectKeyFromObject(p), &live); err != nil {
				t.Fatal(err)
			}
			if r := live.Status.Retention; r == nil || r.ActiveSnapshotCount == nil {
				t.Fatalf("policy status retention %+v: want the active count", r)
			}
		})
	}
}

// A policy edit that would drop more restore points than the budget allows
// prunes the oldest up to the budget and holds the rest, saying so.
func TestReconcileHoldsAMassDeletion(t *testing.T) {
	ctx := context.Background()
	p := &snapv1.SnapshotPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "app", UID: "p-uid", Generation: 2},
		Spec: snapv1.SnapshotPolicySpec{Repository: &snapv1.RepositoryRef{Name: "primary"}, Retention: keepLatest(1)}}
	objs := []client.Object{p, &snapv1.Repository{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "primary"},
		Spec: snapv1.RepositorySpec{DeletionProtection: &snapv1.DeletionProtection{Threshold: ptr(int32(3))}}}}
	for i := range 8 {
		objs = append(objs, run(fmt.Sprintf("s%d", i), i+1, snapv1.SnapshotSucceeded))
	}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).
		WithStatusSubresource(&snapv1.SnapshotPolicy{}, &snapv1.Snapshot{}).Build()
	rec := record.NewFakeRecorder(20)
	f := &Function{Client: c, Recorder: rec, Emitter: &emitted{}, Now: func() time.Time { return t0.Add(24 * time.Hour) }}
	if err := f.Reconcile(ctx, "app", "app"); err != nil {
		t.Fatal(err)
	}
	var left snapv1.SnapshotList
	if err := c.List(ctx, &left); err != nil {
		t.Fatal(err)
	}
	if len(left.Items) != 8-3 {
		t.Fatalf("%d Snapshots left, want 5: a budget of 3 prunes 3 of the 7 GFS drops", len(left.Items))
	}
	for _, s := range left.Items {
		if s.Name == "s0" || s.Name == "s1" || s.Name == "s2" {
			t.Fatalf("%s is left: the budget prunes the oldest first", s.Name)
		}
	}
	if got := recorded(rec); !strings.Contains(got, ReasonBudgetExceeded) {
		t.Fatalf("Kubernetes Events %q, want %s for the held prunes", got, ReasonBudgetExceeded)
	}
}

// recorded drains what rec holds, without waiting.
func recorded(rec *record.FakeRecorder) string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return strings.Join(out, "\n")
		}
	}
}

func ptr[T any](v T) *T { return &v }
