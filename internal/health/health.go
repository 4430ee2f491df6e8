// Package health decides when a connected repository is probed again and
// what a probe's outcome does to its status. A repository whose password
// was rotated, whose bucket went away or whose storage now holds another
// repository must stop saying Ready, so backups and restores wait with a
// reason instead of failing one by one; one that opens again says Ready
// again. No client and no clock: the caller passes the time.
package health

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
)

// Defaults of spec.health.probe.
const (
	DefaultInterval         = 30 * time.Minute
	DefaultFailureThreshold = 3
)

// Reasons a probe writes on the Ready condition.
const (
	// ReasonReplaced: the storage opened as another kopia repository.
	ReasonReplaced = "RepositoryReplaced"
	// ReasonRecovered: a probe opened a Degraded repository again.
	ReasonRecovered = "Recovered"
)

// Settings are spec.health.probe with its defaults applied.
type Settings struct {
	Enabled          bool
	Interval         time.Duration
	FailureThreshold int32
}

// FromSpec reads spec.health; admission has refused bad values, so one
// that does not parse falls back to the default rather than failing.
func FromSpec(h *snapv1.Health) Settings {
	s := Settings{Enabled: true, Interval: DefaultInterval, FailureThreshold: DefaultFailureThreshold}
	if h == nil || h.Probe == nil {
		return s
	}
	p := h.Probe
	if p.Enabled != nil {
		s.Enabled = *p.Enabled
	}
	if d, err := time.ParseDuration(p.Interval); err == nil && d >= 30*time.Second {
		s.Interval = d
	}
	if p.FailureThreshold != nil && *p.FailureThreshold > 0 {
		s.FailureThreshold = *p.FailureThreshold
	}
	return s
}

// LastChecked is when the repository was last found to open, or last
// probed: the later of the last connect and the last probe.
func LastChecked(st *snapv1.RepositoryStatus) time.Time {
	var t time.Time
	if st.StorageStats != nil && st.StorageStats.LastObservedAt != nil {
		t = st.StorageStats.LastObservedAt.Time
	}
	if p := st.Probe; p != nil && p.LastProbeAt != nil && p.LastProbeAt.After(t) {
		t = p.LastProbeAt.Time
	}
	return t
}

// Due is when the next probe is due. After a failed probe the next comes
// sooner, from retry doubling per failure up to the interval, so a
// repository that recovers says so within minutes, not an interval later.
func Due(s Settings, st *snapv1.RepositoryStatus, retry time.Duration) time.Time {
	wait := s.Interval
	if p := st.Probe; p != nil && p.ConsecutiveFailures > 0 && retry > 0 {
		wait = retry
		for i := int32(1); i < p.ConsecutiveFailures && wait < s.Interval; i++ {
			wait *= 2
		}
		wait = min(wait, s.Interval)
	}
	return LastChecked(st).Add(wait).Truncate(time.Second)
}

// Result is what one probe found.
type Result struct {
	// Job is the probe's Job (or the name it would have had).
	Job string
	// Generation is the repository generation the probe was started at
	// (0: unknown); the caller records a result only for the live one.
	Generation int64
	// At is when the probe's end was seen.
	At time.Time
	// UniqueID, Snapshots and Bytes describe the repository the probe
	// opened; empty when it failed.
	UniqueID  string
	Snapshots int64
	Bytes     int64
	// Class, Message and Hint describe a failure (Class empty: success).
	Class, Message, Hint string
}

// Record writes r onto st, a repository's status at generation gen. The
// result of the Job recorded last is a redelivery and changes nothing, so
// one probe counts once.
func Record(st *snapv1.RepositoryStatus, gen int64, s Settings, r Result) {
	at := metav1.NewTime(r.At.Truncate(time.Second))
	if p := st.Probe; p != nil && r.Job != "" && p.Job == r.Job {
		return
	}
	if r.Class == "" && st.UniqueID != "" && r.UniqueID != st.UniqueID {
		r.Class = ReasonReplaced
		r.Message = fmt.Sprintf("the storage now holds kopia repository %s, not %s, the one connected before: it was deleted and created again, or the spec points at other storage", r.UniqueID, st.UniqueID)
		r.Hint = "if this is intended, edit the repository's spec (any change to spec bumps its generation) so snapflow connects anew; otherwise put the old repository's blobs back"
	}
	if r.Class == "" {
		recovered(st, gen, at, r)
		return
	}
	failed(st, gen, s, at, r)
}

func recovered(st *snapv1.RepositoryStatus, gen int64, at metav1.Time, r Result) {
	msg := fmt.Sprintf("the repository opened: %d snapshots, %d bytes", r.Snapshots, r.Bytes)
	st.Probe = &snapv1.ProbeStatus{LastProbeAt: &at, Message: msg, Job: r.Job}
	st.LastReverifyAt = &at
	stats := snapv1.StorageStats{}
	if st.StorageStats != nil {
		stats = *st.StorageStats
	}
	stats.SnapshotCount, stats.TotalSize, stats.LastObservedAt = &r.Snapshots, &r.Bytes, &at
	st.StorageStats = &stats
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: wellknown.ConditionBackendReachable, Status: metav1.ConditionTrue, Reason: "Probed", Message: "the backend answered the last probe", ObservedGeneration: gen})
	if st.Phase != snapv1.RepositoryDegraded {
		return
	}
	st.Phase = snapv1.RepositoryReady
	msg = "recovered: " + msg
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: wellknown.ConditionReady, Status: metav1.ConditionTrue, Reason: ReasonRecovered, Message: msg, ObservedGeneration: gen})
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: wellknown.ConditionStalled, Status: metav1.ConditionFalse, Reason: ReasonRecovered, ObservedGeneration: gen})
}

func failed(st *snapv1.RepositoryStatus, gen int64, s Settings, at metav1.Time, r Result) {
	n := int32(1)
	if st.Probe != nil {
		n = st.Probe.ConsecutiveFailures + 1
	}
	msg := r.Message
	if r.Hint != "" {
		msg += " (" + r.Hint + ")"
	}
	st.Probe = &snapv1.ProbeStatus{LastProbeAt: &at, ConsecutiveFailures: n, Message: msg, Job: r.Job}
	reach := metav1.ConditionTrue
	if r.Class == "Unreachable" || r.Class == "BucketMissing" {
		reach = metav1.ConditionFalse
	}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: wellknown.ConditionBackendReachable, Status: reach, Reason: r.Class, Message: r.Message, ObservedGeneration: gen})
	// Storage that opens as another repository is not a blip to wait out:
	// backups would start a new history there.
	if n < s.FailureThreshold && r.Class != ReasonReplaced {
		return
	}
	st.Phase = snapv1.RepositoryDegraded
	ready := fmt.Sprintf("%d consecutive probe(s) failed; backups, restores and verifications wait until a probe opens the repository again: %s", n, msg)
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: wellknown.ConditionReady, Status: metav1.ConditionFalse, Reason: r.Class, Message: ready, ObservedGeneration: gen})
}

// ReasonDegraded names the turn to Degraded in Transition.
const ReasonDegraded = "Degraded"

// Transition names what Record changed about readiness, for an Event:
// ReasonDegraded, ReasonRecovered or "" (no change).
func Transition(before, after snapv1.RepositoryPhase) string {
	switch {
	case before != snapv1.RepositoryDegraded && after == snapv1.RepositoryDegraded:
		return ReasonDegraded
	case before == snapv1.RepositoryDegraded && after == snapv1.RepositoryReady:
		return ReasonRecovered
	}
	return ""
}
