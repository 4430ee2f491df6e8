package statemetrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
)

func TestChanged(t *testing.T) {
	pending := snap("run", snapv1.SnapshotPending, 0)
	running := snap("run", snapv1.SnapshotRunning, 0)
	succeeded := snap("run", snapv1.SnapshotSucceeded, 0)
	failed := snap("run", snapv1.SnapshotFailed, 0)
	scheduled := snap("run", "", 0, func(s *snapv1.Snapshot) { s.Labels = map[string]string{wellknown.LabelSchedule: "nightly"} })
	refused := snap("run", snapv1.SnapshotFailed, 0, func(s *snapv1.Snapshot) { s.Status.Failure = &snapv1.Failure{Class: "FailedValidation"} })
	gated := snap("run", snapv1.SnapshotPending, 0, func(s *snapv1.Snapshot) {
		s.Status.Conditions = []metav1.Condition{{Type: wellknown.ConditionMoverPermitted, Status: metav1.ConditionFalse, Reason: wellknown.ReasonPrivilegedMoverNotPermitted}}
	})
	batch := func(n int32) snapv1.Snapshot {
		return snap("run", snapv1.SnapshotDeleting, 0, func(s *snapv1.Snapshot) { s.Status.Cleanup = &snapv1.CleanupStatus{Attempts: n} })
	}
	inBatch := func(s *snapv1.Snapshot) { s.Status.Cleanup = &snapv1.CleanupStatus{Batch: "snapdel-1", Attempts: 1} }
	afterBatch := func(s *snapv1.Snapshot) { s.Status.Cleanup = &snapv1.CleanupStatus{Attempts: 1} }
	withData := func(m ...func(*snapv1.Snapshot)) snapv1.Snapshot {
		return snap("run", snapv1.SnapshotDeleting, 0, append([]func(*snapv1.Snapshot){func(s *snapv1.Snapshot) {
			s.Status.Snapshot = &snapv1.SnapshotRecord{KopiaSnapshotID: "k1"}
		}}, m...)...)
	}
	reason := func(r string) func(*snapv1.Snapshot) {
		return func(s *snapv1.Snapshot) {
			s.Status.Conditions = []metav1.Condition{{Type: wellknown.ConditionDeletionHeld, Status: metav1.ConditionFalse, Reason: r}}
		}
	}
	deleting := reason(wellknown.ReasonDeletionInProgress)
	skipped := func(s *snapv1.Snapshot) {
		s.Annotations = map[string]string{wellknown.AnnotationSkipSnapshotCleanup: ""}
	}
	for _, tc := range []struct {
		name     string
		old, cur *snapv1.Snapshot
		want     []string
	}{
		{"a run that succeeds", &running, &succeeded, []string{"kopiur_snapshots_completed_total{Succeeded,apps,app}"}},
		{"a run that fails", &pending, &failed, []string{"kopiur_snapshots_completed_total{Failed,apps,app}"}},
		{"a resync of an ended run counts nothing", &succeeded, &succeeded, nil},
		{"a run still going", &pending, &running, nil},
		{"a schedule's new Snapshot", nil, &scheduled, []string{"kopiur_schedule_snapshots_created_total{apps,nightly}"}},
		{"a manual Snapshot", nil, &pending, nil},
		{"a Snapshot that ended before it was seen", nil, &succeeded, []string{"kopiur_snapshots_completed_total{Succeeded,apps,app}"}},
		{"a refused spec", &pending, &refused, []string{"kopiur_snapshots_completed_total{Failed,apps,app}", "kopiur_snapshot_refusals_total{FailedValidation}"}},
		{"the privilege gate", &pending, &gated, []string{"kopiur_snapshot_refusals_total{PrivilegedMoverNotPermitted}"}},
		{"the privilege gate, again", &gated, &gated, nil},
		{"a first deletion batch", ptr.To(batch(0)), ptr.To(batch(1)), nil},
		{"a second batch: the first failed", ptr.To(batch(1)), ptr.To(batch(2)), []string{"kopiur_snapshot_deletion_failures_total{}", "kopiur_snapshot_delete_batch_members_total{failed}"}},
		{"deleted from its batch", ptr.To(withData(deleting, inBatch)), nil, []string{"kopiur_snapshot_deletions_total{deleted}", "kopiur_snapshot_delete_batch_members_total{deleted}"}},
		{"deleted, the breaker's mark overwritten before release", ptr.To(withData(reason(wellknown.ReasonKopiaSnapshotDeleted), inBatch)), nil, []string{"kopiur_snapshot_deletions_total{deleted}", "kopiur_snapshot_delete_batch_members_total{deleted}"}},
		{"released with the skip annotation after a batch took it", ptr.To(withData(skipped, reason("SkipSnapshotCleanup"), inBatch)), nil,
			[]string{"kopiur_snapshot_deletions_total{kept}", "kopiur_orphaned_snapshots_total{}", "kopiur_snapshot_delete_batch_members_total{kept}"}},
		{"released with the skip annotation between two batches", ptr.To(withData(skipped, reason("SkipSnapshotCleanup"), afterBatch)), nil,
			[]string{"kopiur_snapshot_deletions_total{kept}", "kopiur_orphaned_snapshots_total{}", "kopiur_snapshot_delete_batch_members_total{kept}"}},
		{"held by the breaker, then released", ptr.To(withData(reason("MassDeletionBreaker"))), nil, []string{"kopiur_snapshot_deletions_total{kept}", "kopiur_orphaned_snapshots_total{}"}},
		{"released by its deletion policy", ptr.To(withData()), nil, []string{"kopiur_snapshot_deletions_total{kept}", "kopiur_orphaned_snapshots_total{}"}},
		{"a run that stored nothing", &failed, nil, []string{"kopiur_snapshot_deletions_total{none}"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, s := range Changed(tc.old, tc.cur) {
				if len(s.Labels) != len(s.Desc.Labels) {
					t.Fatalf("%s has %d label values for %v", s.Desc.Name, len(s.Labels), s.Desc.Labels)
				}
				got = append(got, key(s))
			}
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("counted %v, want %v", got, tc.want)
			}
		})
	}
}

// The informer's first list is state: only later notifications count.
func TestCountsSkipTheFirstList(t *testing.T) {
	c := NewCounts()
	reg := prometheus.NewRegistry()
	if err := c.Register(reg); err != nil {
		t.Fatal(err)
	}
	h := c.Handler()
	done := snap("done", snapv1.SnapshotSucceeded, 0)
	h.OnAdd(&done, true)
	running := snap("run", snapv1.SnapshotRunning, 0)
	h.OnAdd(&running, false)
	ok := snap("run", snapv1.SnapshotSucceeded, 0)
	h.OnUpdate(&running, &ok)
	h.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "apps/run", Obj: &ok})
	const want = `
# HELP kopiur_snapshots_completed_total Snapshots that ended, by result (Succeeded, Unchanged or Failed), namespace and policy.
# TYPE kopiur_snapshots_completed_total counter
kopiur_snapshots_completed_total{namespace="apps",policy="app",result="Succeeded"} 1
# HELP kopiur_snapshot_deletion_failures_total Snapshot deletion attempts that did not delete its kopia snapshot: each member of a deletion batch that goes into another batch counts once.
# TYPE kopiur_snapshot_deletion_failures_total counter
kopiur_snapshot_deletion_failures_total 0
# HELP kopiur_snapshot_deletions_total Snapshot objects deleted, by what became of their kopia data: deleted, kept (released with the data left in the repository) or none (no kopia snapshot was recorded).
# TYPE kopiur_snapshot_deletions_total counter
kopiur_snapshot_deletions_total{outcome="deleted"} 0
kopiur_snapshot_deletions_total{outcome="kept"} 0
kopiur_snapshot_deletions_total{outcome="none"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "kopiur_snapshots_completed_total", "kopiur_snapshot_deletion_failures_total", "kopiur_snapshot_deletions_total"); err != nil {
		t.Error(err)
	}
}
