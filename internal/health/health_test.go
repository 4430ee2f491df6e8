package health

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
)

var t0 = time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC)

func ptr[T any](v T) *T { return &v }

func TestFromSpec(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   *snapv1.Health
		want Settings
	}{
		{"nothing set", nil, Settings{true, DefaultInterval, DefaultFailureThreshold}},
		{"no probe section", &snapv1.Health{}, Settings{true, DefaultInterval, DefaultFailureThreshold}},
		{"turned off", &snapv1.Health{Probe: &snapv1.HealthProbe{Enabled: ptr(false)}}, Settings{false, DefaultInterval, DefaultFailureThreshold}},
		{"set", &snapv1.Health{Probe: &snapv1.HealthProbe{Interval: "45s", FailureThreshold: ptr(int32(1))}}, Settings{true, 45 * time.Second, 1}},
		{"below the minimum admission refuses", &snapv1.Health{Probe: &snapv1.HealthProbe{Interval: "5s", FailureThreshold: ptr(int32(0))}}, Settings{true, DefaultInterval, DefaultFailureThreshold}},
	} {
		if got := FromSpec(tc.in); got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func connected(at time.Time) *snapv1.RepositoryStatus {
	ts := metav1.NewTime(at)
	st := &snapv1.RepositoryStatus{Phase: snapv1.RepositoryReady, ObservedGeneration: 2, UniqueID: "abc",
		StorageStats: &snapv1.StorageStats{SnapshotCount: ptr(int64(1)), IndexBlobCount: ptr(int64(7)), LastObservedAt: &ts}}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: wellknown.ConditionReady, Status: metav1.ConditionTrue, Reason: "Connected"})
	return st
}

// A healthy repository is probed an interval after it was last checked;
// after failures the probes come back sooner, doubling up to the interval.
func TestDue(t *testing.T) {
	s := Settings{true, 10 * time.Minute, 3}
	st := connected(t0)
	if got := Due(s, st, time.Minute); !got.Equal(t0.Add(10 * time.Minute)) {
		t.Errorf("healthy: due %s", got)
	}
	for _, tc := range []struct {
		failures int32
		wait     time.Duration
	}{{1, time.Minute}, {2, 2 * time.Minute}, {3, 4 * time.Minute}, {4, 8 * time.Minute}, {5, 10 * time.Minute}, {40, 10 * time.Minute}} {
		last := metav1.NewTime(t0.Add(time.Hour))
		st.Probe = &snapv1.ProbeStatus{LastProbeAt: &last, ConsecutiveFailures: tc.failures}
		if got := Due(s, st, time.Minute); !got.Equal(last.Add(tc.wait)) {
			t.Errorf("%d failures: due %s, want %s after the last probe", tc.failures, got.Sub(last.Time), tc.wait)
		}
	}
}

func ready(st *snapv1.RepositoryStatus) *metav1.Condition {
	return meta.FindStatusCondition(st.Conditions, wellknown.ConditionReady)
}

// Failures below the threshold leave the repository Ready; the one that
// reaches it turns it Degraded with the reason; a later success recovers
// it and refreshes the storage figures.
func TestRecordDegradesAtTheThresholdAndRecovers(t *testing.T) {
	s := Settings{true, time.Minute, 3}
	st := connected(t0)
	fail := func(i int) Result {
		return Result{Job: fmt.Sprintf("probe-%d", i), At: t0.Add(time.Duration(i) * time.Minute), Class: "WrongPassword", Message: "the password does not open the repository", Hint: "check the Secret"}
	}
	for i := 1; i <= 2; i++ {
		Record(st, 2, s, fail(i))
		if st.Phase != snapv1.RepositoryReady || ready(st).Status != metav1.ConditionTrue || st.Probe.ConsecutiveFailures != int32(i) {
			t.Fatalf("after %d failure(s): phase %s, ready %+v, probe %+v", i, st.Phase, ready(st), st.Probe)
		}
	}
	// The same result delivered again counts once.
	Record(st, 2, s, fail(2))
	if st.Probe.ConsecutiveFailures != 2 {
		t.Fatalf("a redelivered result counted again: %+v", st.Probe)
	}
	Record(st, 2, s, fail(3))
	c := ready(st)
	if st.Phase != snapv1.RepositoryDegraded || c.Status != metav1.ConditionFalse || c.Reason != "WrongPassword" ||
		!strings.Contains(c.Message, "3 consecutive") || !strings.Contains(c.Message, "check the Secret") || Transition(snapv1.RepositoryReady, st.Phase) != ReasonDegraded {
		t.Fatalf("at the threshold: phase %s, ready %+v", st.Phase, c)
	}
	if r := meta.FindStatusCondition(st.Conditions, wellknown.ConditionBackendReachable); r.Status != metav1.ConditionTrue {
		t.Errorf("a wrong password is not an unreachable backend: %+v", r)
	}

	Record(st, 2, s, Result{At: t0.Add(10 * time.Minute), UniqueID: "abc", Snapshots: 4, Bytes: 1000})
	c = ready(st)
	if st.Phase != snapv1.RepositoryReady || c.Status != metav1.ConditionTrue || c.Reason != ReasonRecovered || st.Probe.ConsecutiveFailures != 0 ||
		Transition(snapv1.RepositoryDegraded, st.Phase) != ReasonRecovered {
		t.Fatalf("recovery: phase %s, ready %+v, probe %+v", st.Phase, c, st.Probe)
	}
	if *st.StorageStats.SnapshotCount != 4 || *st.StorageStats.TotalSize != 1000 || *st.StorageStats.IndexBlobCount != 7 ||
		!st.StorageStats.LastObservedAt.Time.Equal(t0.Add(10*time.Minute)) || !st.LastReverifyAt.Time.Equal(t0.Add(10*time.Minute)) {
		t.Errorf("storage figures not refreshed (or index count lost): %+v", st.StorageStats)
	}
}

func TestRecordUnreachableMarksTheBackend(t *testing.T) {
	st := connected(t0)
	Record(st, 2, Settings{true, time.Minute, 1}, Result{At: t0.Add(time.Minute), Class: "Unreachable", Message: "connection refused"})
	r := meta.FindStatusCondition(st.Conditions, wellknown.ConditionBackendReachable)
	if st.Phase != snapv1.RepositoryDegraded || r.Status != metav1.ConditionFalse || r.Reason != "Unreachable" {
		t.Fatalf("phase %s, reachable %+v", st.Phase, r)
	}
}

// Storage that opens as another repository degrades at once: backups
// would start a new history there and the old one would look gone.
func TestRecordReplacedRepositoryDegradesAtOnce(t *testing.T) {
	st := connected(t0)
	Record(st, 2, Settings{true, time.Minute, 5}, Result{At: t0.Add(time.Minute), UniqueID: "other", Snapshots: 0})
	c := ready(st)
	if st.Phase != snapv1.RepositoryDegraded || c.Reason != ReasonReplaced || !strings.Contains(c.Message, "other") || !strings.Contains(c.Message, "abc") {
		t.Fatalf("phase %s, ready %+v", st.Phase, c)
	}
	if st.UniqueID != "abc" || *st.StorageStats.SnapshotCount != 1 {
		t.Errorf("the replaced repository's figures overwrote the connected one's: %+v %+v", st.UniqueID, st.StorageStats)
	}
}
