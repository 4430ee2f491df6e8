// Package cleanup decides what happens to a Snapshot's kopia data when the
// Snapshot is deleted: release it untouched, hold it behind the
// mass-deletion breaker, or delete the kopia snapshot. It is pure: callers
// pass the Snapshot, the facts they read and the time; the safe answer
// (keep the data) wins whenever a fact is missing.
package cleanup

import (
	"fmt"
	"sort"
	"strings"
	"time"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
)

// Action is the decision for one deleting Snapshot.
type Action string

const (
	// Release removes the finalizer and leaves the kopia data alone.
	Release Action = "Release"
	// Delete removes the kopia snapshot, then releases.
	Delete Action = "Delete"
	// Hold keeps the finalizer: the breaker is open for this repository.
	Hold Action = "Hold"
)

// Reasons for a release or hold, shown in events and conditions.
const (
	ReasonSkipAnnotation     = "SkipSnapshotCleanup"
	ReasonRetain             = "DeletionPolicyRetain"
	ReasonOrphan             = "DeletionPolicyOrphan"
	ReasonNoKopiaSnapshot    = "NoKopiaSnapshot"
	ReasonRetainedOnSchedule = "SnapshotRetainedOnScheduleDelete"
	ReasonRetainedOnPolicy   = "SnapshotRetainedOnPolicyDelete"
	// ReasonRetainedOnNamespace: the Snapshot's namespace is being deleted
	// and its repository's onNamespaceDelete is Orphan.
	ReasonRetainedOnNamespace = "SnapshotRetainedOnNamespaceDelete"
	ReasonBreaker             = "MassDeletionBreaker"
	ReasonUnknownOrigin       = "UnknownOrigin"
	ReasonDeleted             = wellknown.ReasonKopiaSnapshotDeleted
)

// Internal pruned-by values: snapflow's own prunes, never counted by the breaker.
var internalPrunes = map[string]bool{
	wellknown.PrunedByRetention: true, wellknown.PrunedByFailedHistory: true, wellknown.PrunedByPolicyCascade: true,
	"replication-retention": true, wellknown.PrunedByReplacedRun: true,
}

// Facts are what the caller read about the Snapshot's surroundings.
type Facts struct {
	// ScheduleGone is true when the Snapshot came from a schedule that is
	// deleted, terminating or replaced (UID mismatch).
	ScheduleGone bool
	// PolicyGone is true when its SnapshotPolicy is deleted or terminating.
	PolicyGone bool
	// PolicyOnDelete is the policy's deletion.onPolicyDelete (Retain when unknown).
	PolicyOnDelete snapv1.CascadePolicy
	// NamespaceGone is true when the Snapshot's namespace is deleted or
	// terminating.
	NamespaceGone bool
	// OnNamespaceDelete is the repository's spec.onNamespaceDelete (Orphan
	// when unknown, e.g. the repository went with the namespace).
	OnNamespaceDelete snapv1.NamespaceDeletePolicy
}

// Decision is what to do and why.
type Decision struct {
	Action  Action
	Reason  string
	Message string
	// External says the deletion came from outside snapflow (a person,
	// GitOps prune, a namespace going away): the breaker counts those.
	External bool
}

// EffectivePolicy is the deletion policy that applies: the Snapshot's own,
// else Retain for discovered rows (snapflow never deletes what it did not
// create), else Delete.
func EffectivePolicy(s *snapv1.Snapshot) snapv1.DeletionPolicy {
	if s.Status.Origin == snapv1.OriginDiscovered {
		return snapv1.DeletionRetain
	}
	if s.Spec.DeletionPolicy != "" {
		return s.Spec.DeletionPolicy
	}
	return snapv1.DeletionDelete
}

// IsExternal says whether the deletion was not one of snapflow's own prunes.
func IsExternal(s *snapv1.Snapshot) bool {
	return !internalPrunes[s.Annotations[wellknown.AnnotationPrunedBy]]
}

// Classify decides for a Snapshot being deleted, before the breaker.
func Classify(s *snapv1.Snapshot, f Facts) Decision {
	if _, skip := s.Annotations[wellknown.AnnotationSkipSnapshotCleanup]; skip {
		return Decision{Action: Release, Reason: ReasonSkipAnnotation, Message: "the skip-snapshot-cleanup annotation releases this Snapshot without touching the repository"}
	}
	if o := s.Status.Origin; o != "" && !o.IsKnown() {
		return Decision{Action: Release, Reason: ReasonUnknownOrigin, Message: fmt.Sprintf("origin %q is not one this snapflow knows, so its kopia data is left alone", o)}
	}
	switch EffectivePolicy(s) {
	case snapv1.DeletionRetain:
		return Decision{Action: Release, Reason: ReasonRetain, Message: "deletionPolicy Retain keeps the kopia snapshot in the repository"}
	case snapv1.DeletionOrphan:
		return Decision{Action: Release, Reason: ReasonOrphan, Message: "deletionPolicy Orphan leaves the kopia snapshot without contacting the repository"}
	}
	if s.Status.Snapshot == nil || s.Status.Snapshot.KopiaSnapshotID == "" || s.Status.Resolved == nil || s.Status.Resolved.Repository == nil {
		return Decision{Action: Release, Reason: ReasonNoKopiaSnapshot, Message: "no kopia snapshot was recorded for this run, so there is nothing to delete"}
	}
	external := IsExternal(s)
	if external && f.NamespaceGone {
		// Deleting a namespace must not take the backups needed to
		// restore it, unless the repository says so; then each Snapshot's
		// deletionPolicy alone decides, whichever of its schedule and
		// policy the namespace deletion reached first.
		if f.OnNamespaceDelete != snapv1.NamespaceDeleteDelete {
			return Decision{Action: Release, Reason: ReasonRetainedOnNamespace, External: true,
				Message: "its namespace is being deleted and the repository's onNamespaceDelete is Orphan (the default), so the kopia snapshot is kept"}
		}
		return Decision{Action: Delete, Reason: ReasonDeleted, External: true}
	}
	if external && f.ScheduleGone && s.Spec.OnScheduleDelete != snapv1.CascadeDelete {
		// Deleting a schedule must never take its history with it unless asked.
		return Decision{Action: Release, Reason: ReasonRetainedOnSchedule, External: true,
			Message: "its SnapshotSchedule is gone and onScheduleDelete is Retain (the default), so the kopia snapshot is kept"}
	}
	if s.Annotations[wellknown.AnnotationPrunedBy] == wellknown.PrunedByPolicyCascade {
		return Decision{Action: Release, Reason: ReasonRetainedOnPolicy, Message: "its SnapshotPolicy was deleted with onPolicyDelete: Retain, so the kopia snapshot is kept"}
	}
	if external && f.PolicyGone && f.PolicyOnDelete != snapv1.CascadeDelete {
		return Decision{Action: Release, Reason: ReasonRetainedOnPolicy, External: true,
			Message: "its SnapshotPolicy is gone and onPolicyDelete is Retain (the default), so the kopia snapshot is kept"}
	}
	return Decision{Action: Delete, Reason: ReasonDeleted, External: external}
}

// Breaker is a repository's mass-deletion protection state.
type Breaker struct {
	// Threshold from spec.deletionProtection.threshold (default 10; 0 disables).
	Threshold int
	// Ack is the allow-mass-deletion annotation's instant (zero when absent or invalid).
	Ack time.Time
}

// DefaultThreshold applies when deletionProtection is unset.
const DefaultThreshold = 10

// BreakerOf reads a repository's breaker settings. A bad or future
// annotation is reported (for an event) and ignored.
func BreakerOf(spec *snapv1.RepositorySpec, annotations map[string]string, now time.Time) (Breaker, string) {
	ack, bad := AckOf(annotations, now)
	return Breaker{Threshold: ThresholdOf(spec), Ack: ack}, bad
}

// ThresholdOf is a repository's deletionProtection.threshold (default 10; 0 disables).
func ThresholdOf(spec *snapv1.RepositorySpec) int {
	if spec != nil && spec.DeletionProtection != nil && spec.DeletionProtection.Threshold != nil {
		return int(*spec.DeletionProtection.Threshold)
	}
	return DefaultThreshold
}

// AckSkew is how far ahead of this clock an acknowledgement may be and still
// count (clamped to now): the writer's clock may run a little fast.
const AckSkew = time.Minute

// AckOf reads the allow-mass-deletion annotation: its instant, or zero with
// a message when it is not RFC3339 or lies in the future. A future instant
// would otherwise stand for every deletion yet to come: an acknowledgement
// covers only what has already happened.
func AckOf(annotations map[string]string, now time.Time) (time.Time, string) {
	v, ok := annotations[wellknown.AnnotationAllowMassDeletion]
	if !ok {
		return time.Time{}, ""
	}
	t, err := time.Parse(time.RFC3339, strings.TrimSpace(v))
	if err != nil {
		return time.Time{}, fmt.Sprintf("%s=%q is not an RFC3339 time and is ignored", wellknown.AnnotationAllowMassDeletion, v)
	}
	if t.After(now.Add(AckSkew)) {
		return time.Time{}, fmt.Sprintf("%s=%q is in the future and is ignored: an acknowledgement covers deletions up to its instant; use the time printed in the hold", wellknown.AnnotationAllowMassDeletion, v)
	}
	if t.After(now) {
		t = now
	}
	return t, ""
}

// Pending is one external deletion waiting on the breaker.
type Pending struct {
	Name      string // namespace/name
	DeletedAt time.Time
}

// Held returns the names of pending external deletions the breaker holds:
// none while fewer than Threshold are pending; otherwise every one not
// acknowledged (deleted at or before Ack). Counted at a point in time.
func (b Breaker) Held(pending []Pending) []string {
	if b.Threshold <= 0 || len(pending) < b.Threshold {
		return nil
	}
	var held []string
	for _, p := range pending {
		if b.Ack.IsZero() || p.DeletedAt.After(b.Ack) {
			held = append(held, p.Name)
		}
	}
	sort.Strings(held)
	return held
}

// AckCommand is the exact command that releases the held deletions up to
// the newest one pending.
func AckCommand(repo snapv1.RepositoryRef, namespace string, pending []Pending) string {
	newest := time.Time{}
	for _, p := range pending {
		if p.DeletedAt.After(newest) {
			newest = p.DeletedAt
		}
	}
	target := "repository/" + repo.Name + " -n " + namespace
	if repo.Kind == snapv1.KindClusterRepository {
		target = "clusterrepository/" + repo.Name
	}
	return AckCommandFor(target, newest)
}

// AckCommandFor is the command that acknowledges, on target (as kubectl
// names it, with -n when namespaced), what was held up to at.
func AckCommandFor(target string, at time.Time) string {
	return fmt.Sprintf("kubectl annotate --overwrite %s %s=%s", target, wellknown.AnnotationAllowMassDeletion, at.UTC().Format(time.RFC3339))
}
