package fleet

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
)

func at(minute int) *metav1.Time {
	t := metav1.NewTime(time.Date(2026, 12, 6, 10, minute, 0, 0, time.UTC))
	return &t
}

func snap(name, policy string, phase snapv1.SnapshotPhase, ended int, mut ...func(*snapv1.Snapshot)) snapv1.Snapshot {
	s := snapv1.Snapshot{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name, Labels: map[string]string{wellknown.LabelConfig: policy}},
		Status: snapv1.SnapshotStatus{Phase: phase, Resolved: &snapv1.SnapshotResolved{Repository: &snapv1.RepositoryRef{Name: "nas"}}}}
	if ended > 0 {
		s.Status.Timing = &snapv1.Timing{EndTime: at(ended)}
	}
	for _, m := range mut {
		m(&s)
	}
	return s
}

func TestSummarize(t *testing.T) {
	pol := func(name string, lastOK int, suspend bool) snapv1.SnapshotPolicy {
		p := snapv1.SnapshotPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name}, Spec: snapv1.SnapshotPolicySpec{Suspend: suspend}}
		if lastOK > 0 {
			p.Status.LastSuccessfulSnapshot = at(lastOK)
		}
		return p
	}
	sched := snapv1.SnapshotSchedule{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "hourly"},
		Spec:   snapv1.SnapshotScheduleSpec{PolicySelector: &metav1.LabelSelector{}},
		Status: snapv1.SnapshotScheduleStatus{NextSchedule: &snapv1.ScheduleRef{At: at(59)}}}
	deleting := metav1.NewTime(time.Now())
	in := Input{
		Policies:  []snapv1.SnapshotPolicy{pol("db", 10, false), pol("web", 5, false), pol("old", 0, true)},
		Schedules: []snapv1.SnapshotSchedule{sched},
		Snapshots: []snapv1.Snapshot{
			snap("db-1", "db", snapv1.SnapshotSucceeded, 10),
			snap("db-2", "db", snapv1.SnapshotRunning, 0, func(s *snapv1.Snapshot) { s.Status.Job = &snapv1.JobRef{Name: "j"} }),
			snap("web-1", "web", snapv1.SnapshotSucceeded, 5),
			snap("web-2", "web", snapv1.SnapshotFailed, 20, func(s *snapv1.Snapshot) {
				s.Status.Failure = &snapv1.Failure{Class: "Unreachable", Message: "the endpoint did not answer"}
			}),
			snap("web-3", "web", snapv1.SnapshotFailed, 30),
			snap("web-4", "web", snapv1.SnapshotPending, 0, func(s *snapv1.Snapshot) {
				s.Status.Conditions = []metav1.Condition{{Type: wellknown.ConditionRepositorySlotAvailable, Status: metav1.ConditionFalse}}
			}),
			snap("web-0", "web", snapv1.SnapshotSucceeded, 1, func(s *snapv1.Snapshot) {
				s.DeletionTimestamp = &deleting
				s.Status.Conditions = []metav1.Condition{{Type: wellknown.ConditionDeletionHeld, Status: metav1.ConditionFalse, Reason: "RepositoryMissing"}}
			}),
		},
		Repositories: []snapv1.Repository{{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "nas"}, Status: snapv1.RepositoryStatus{Phase: snapv1.RepositoryReady}}},
	}
	rep := Summarize(in)
	if len(rep.Policies) != 3 || len(rep.Repositories) != 1 {
		t.Fatalf("report %+v", rep)
	}
	db, old, web := rep.Policies[0], rep.Policies[1], rep.Policies[2]
	if db.State != OK || db.Running != 1 || db.FailedSince != 0 || db.NextRun == nil || !db.NextRun.Equal(at(59)) {
		t.Errorf("db %+v: want OK, one running, next run from the schedule", db)
	}
	if web.State != Failing || web.FailedSince != 2 || web.Queued != 1 || web.HeldDeletions != 1 || web.LastFailure != "" {
		t.Errorf("web %+v: want Failing, two failures since the last success, one queued, one held deletion, the newest failure's (empty) reason", web)
	}
	if old.State != Suspended {
		t.Errorf("old %+v: want Suspended", old)
	}
	r := rep.Repositories[0]
	if r.Phase != "Ready" || r.Running != 1 || r.Queued != 1 || r.HeldDeletions != 1 {
		t.Errorf("repository %+v: want Ready, one running, one queued, one held", r)
	}

	// Without a schedule a healthy policy is Unscheduled; its newest
	// failure's reason is shown.
	in.Schedules = nil
	in.Snapshots = in.Snapshots[:4]
	rep = Summarize(in)
	if rep.Policies[0].State != Unscheduled || rep.Policies[2].LastFailure != "Unreachable: the endpoint did not answer" {
		t.Errorf("without a schedule: %+v", rep.Policies)
	}
}
