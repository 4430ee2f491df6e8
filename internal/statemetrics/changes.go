package statemetrics

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
)

// The counter families. A function instance scales to zero and would take
// its counts with it, so the exporter counts what it sees change in the
// watch cache instead: a Snapshot that ends, one a schedule creates, one
// that is deleted. A count is of changes this exporter process observed:
// it restarts at zero with the process (rate() and increase() handle
// that), and a change made while no exporter ran is not counted.
var (
	SnapshotsCompleted = &Desc{"kopiur_snapshots_completed_total", "Snapshots that ended, by result (Succeeded, Unchanged or Failed), namespace and policy.",
		[]string{"result", "namespace", "policy"}}
	ScheduleSnapshotsCreated = &Desc{"kopiur_schedule_snapshots_created_total", "Snapshots a SnapshotSchedule created, by namespace and schedule.",
		[]string{"namespace", "schedule"}}
	SnapshotDeletions = &Desc{"kopiur_snapshot_deletions_total", "Snapshot objects deleted, by what became of their kopia data: deleted, kept (released with the data left in the repository) or none (no kopia snapshot was recorded).",
		[]string{"outcome"}}
	SnapshotDeletionFailures = &Desc{"kopiur_snapshot_deletion_failures_total", "Snapshot deletion attempts that did not delete its kopia snapshot: each member of a deletion batch that goes into another batch counts once.",
		nil}
	OrphanedSnapshots = &Desc{"kopiur_orphaned_snapshots_total", "Snapshot objects deleted while their kopia snapshot stays in the repository (a Retain or Orphan deletion policy, the skip annotation, a retained namespace, schedule or policy): data no object tracks any more.",
		nil}
	DeleteBatchMembers = &Desc{"kopiur_snapshot_delete_batch_members_total", "Members of deletion batches by what became of them: deleted (the batch deleted the kopia snapshot and the object went), kept (released with its data after a batch took it) or failed (it went into another batch).",
		[]string{"outcome"}}
	SnapshotRefusals = &Desc{"kopiur_snapshot_refusals_total", "Snapshot runs refused before their mover started, by reason (PrivilegedMoverNotPermitted, FailedValidation, IdentityCollision).",
		[]string{"reason"}}
)

// Counters lists the counter families, for registration.
var Counters = []*Desc{SnapshotsCompleted, ScheduleSnapshotsCreated, SnapshotDeletions, SnapshotDeletionFailures, SnapshotRefusals,
	OrphanedSnapshots, DeleteBatchMembers}

// Deletion outcomes.
const (
	OutcomeDeleted = "deleted"
	OutcomeKept    = "kept"
	OutcomeNone    = "none"
	OutcomeFailed  = "failed"
)

// refusedClasses are the failure classes of a run refused before it moved
// any data: its spec, or its kopia identity, cannot be run.
var refusedClasses = map[string]bool{wellknown.ReasonFailedValidation: true, wellknown.ReasonIdentityCollision: true}

// Changed is what one observed change of a Snapshot adds to the counters:
// old is nil for an object created since the watch started, cur is nil for
// one deleted. Objects the first list found are not changes (pass neither).
func Changed(old, cur *snapv1.Snapshot) []Sample {
	var out []Sample
	add := func(d *Desc, labels ...string) { out = append(out, Sample{Desc: d, Labels: labels, Value: 1}) }
	if cur == nil {
		if old != nil {
			outcome := deletionOutcome(old)
			add(SnapshotDeletions, outcome)
			if outcome == OutcomeKept {
				add(OrphanedSnapshots)
			}
			// A batch took it at least once (a failed batch's members
			// leave it until the next one).
			if attempts(old.Status) > 0 && outcome != OutcomeNone {
				add(DeleteBatchMembers, outcome)
			}
		}
		return out
	}
	var was snapv1.SnapshotStatus
	if old != nil {
		was = old.Status
	} else if sch := cur.Labels[wellknown.LabelSchedule]; sch != "" {
		add(ScheduleSnapshotsCreated, cur.Namespace, sch)
	}
	now := cur.Status
	if finished(*cur) && (old == nil || !finished(*old)) {
		add(SnapshotsCompleted, string(now.Phase), cur.Namespace, policyOf(*cur))
	}
	if r := refusal(now); r != "" && refusal(was) == "" {
		add(SnapshotRefusals, r)
	}
	if a, b := attempts(was), attempts(now); b > a && a > 0 {
		// A new batch for a member of an earlier one: that one did not
		// delete it.
		for range b - a {
			add(SnapshotDeletionFailures)
			add(DeleteBatchMembers, OutcomeFailed)
		}
	}
	return out
}

// refusal is why the run was refused before its mover started, if it was.
func refusal(st snapv1.SnapshotStatus) string {
	if st.Phase == snapv1.SnapshotFailed && st.Failure != nil && refusedClasses[st.Failure.Class] {
		return st.Failure.Class
	}
	if c := meta.FindStatusCondition(st.Conditions, wellknown.ConditionMoverPermitted); c != nil && c.Status == metav1.ConditionFalse {
		return c.Reason
	}
	return ""
}

func attempts(st snapv1.SnapshotStatus) int32 {
	if st.Cleanup == nil {
		return 0
	}
	return st.Cleanup.Attempts
}

// deletionOutcome reads what became of a deleted Snapshot's data from its
// last state: the cleanup function marks a Snapshot Deleting when a batch
// takes it, and before it releases one makes the condition say what
// happened (deleted, or kept by a deletion policy, the skip annotation,
// or a retained schedule, policy or namespace).
func deletionOutcome(s *snapv1.Snapshot) string {
	if s.Status.Snapshot == nil || s.Status.Snapshot.KopiaSnapshotID == "" {
		return OutcomeNone
	}
	if c := meta.FindStatusCondition(s.Status.Conditions, wellknown.ConditionDeletionHeld); c != nil && c.Status == metav1.ConditionFalse &&
		(c.Reason == wellknown.ReasonDeletionInProgress || c.Reason == wellknown.ReasonKopiaSnapshotDeleted) {
		return OutcomeDeleted
	}
	return OutcomeKept
}
