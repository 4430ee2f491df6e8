package validate

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
)

// A runJob hook makes a Job, and a workloadExec hook and a stream source
// exec into a pod, all with rights snapflow lends. So that they never lend
// those rights to someone who may only edit SnapshotPolicies, admission
// records who set them and the function checks, each time one runs, that
// this user may do what it does.

// HooksAuthor is the user a policy's runJob and workloadExec hooks act for.
type HooksAuthor struct {
	Username string   `json:"username"`
	UID      string   `json:"uid,omitempty"`
	Groups   []string `json:"groups,omitempty"`
}

// RightedHooks is a policy's runJob and workloadExec hooks, in order: the
// ones that act with an author's rights.
func RightedHooks(p *snapv1.SnapshotPolicy) []snapv1.Hook {
	h := p.Spec.Hooks
	if h == nil {
		return nil
	}
	var out []snapv1.Hook
	for _, hk := range slices.Concat(h.BeforeSnapshot, h.AfterSnapshot) {
		if hk.RunJob != nil || hk.WorkloadExec != nil {
			out = append(out, hk)
		}
	}
	return out
}

// HasStream says whether p has a stream source, whose command the mover
// runs in the workload with its author's rights.
func HasStream(p *snapv1.SnapshotPolicy) bool {
	return slices.ContainsFunc(p.Spec.Sources, func(s snapv1.Source) bool { return s.Stream != nil })
}

// ExpectedHooksAuthor is the hooks-author annotation p must carry once user
// has written it over old (nil on CREATE), or "" for none. Whoever writes a
// policy with such hooks becomes their author, so the hooks run only while
// the last person who wrote the policy may do what they do; to approve
// hooks someone else wrote, a user who may run them writes the policy (an
// annotation will do). A controller (snapflow's own functions, adding a
// finalizer) never becomes an author: its writes keep what was there.
func ExpectedHooksAuthor(old, p *snapv1.SnapshotPolicy, user HooksAuthor, controller bool) (string, error) {
	var was *string
	if old != nil {
		v := old.Annotations[wellknown.AnnotationHooksAuthor]
		was = &v
	}
	return expectedAuthor(len(RightedHooks(p)) > 0 || HasStream(p), was, user, controller)
}

// expectedAuthor is the author annotation of an object that acts with
// its author's rights when rights is set: the writer, except that a
// controller keeps what was there (was: nil on CREATE).
func expectedAuthor(rights bool, was *string, user HooksAuthor, controller bool) (string, error) {
	if !rights {
		return "", nil
	}
	if controller {
		if was == nil {
			return "", nil
		}
		return *was, nil
	}
	b, err := json.Marshal(user)
	if err != nil {
		return "", fmt.Errorf("encode the author: %w", err)
	}
	return string(b), nil
}

// ForeignSource is what a Restore reads in another namespace: the
// Snapshot its snapshotRef names, or the SnapshotPolicy its fromPolicy
// names (and that namespace's Snapshots).
type ForeignSource struct {
	Namespace, Name string
	Policy          bool
}

// ForeignRestoreSource is the source r reads in a namespace other than its
// own, or nil. The restore function reads it with its own cluster-wide
// rights, so it first checks that r's author may read it too: otherwise
// anyone who may create a Restore could learn of, and restore, another
// namespace's backups.
func ForeignRestoreSource(r *snapv1.Restore) *ForeignSource {
	src := r.Spec.Source
	switch {
	case src.SnapshotRef != nil && src.SnapshotRef.Namespace != "" && src.SnapshotRef.Namespace != r.Namespace:
		return &ForeignSource{Namespace: src.SnapshotRef.Namespace, Name: src.SnapshotRef.Name}
	case src.FromPolicy != nil && src.FromPolicy.Namespace != "" && src.FromPolicy.Namespace != r.Namespace:
		return &ForeignSource{Namespace: src.FromPolicy.Namespace, Name: src.FromPolicy.Name, Policy: true}
	}
	return nil
}

// ExpectedRestoreAuthor is the exec-author annotation a Restore must carry
// once user has written it over old (nil on CREATE): its writer, when the
// Restore acts with the writer's rights. A streamExec target pipes data
// into a command only while they may exec into the namespace's pods; a
// source in another namespace is read only while they may read it there.
func ExpectedRestoreAuthor(old, r *snapv1.Restore, user HooksAuthor, controller bool) (string, error) {
	var was *string
	if old != nil {
		v := old.Annotations[wellknown.AnnotationExecAuthor]
		was = &v
	}
	return expectedAuthor(r.Spec.Target.StreamExec != nil || ForeignRestoreSource(r) != nil, was, user, controller)
}

// RestoreAuthorProblem refuses an exec-author annotation that is not the
// one admission computes.
func RestoreAuthorProblem(old, r *snapv1.Restore, user HooksAuthor, controller bool) Result {
	want, err := ExpectedRestoreAuthor(old, r, user, controller)
	return authorProblem(want, err, r.Annotations[wellknown.AnnotationExecAuthor], wellknown.AnnotationExecAuthor,
		"this Restore, whose rights its streamExec target or its source in another namespace uses")
}

// authorProblem refuses an author annotation (got) other than the one
// admission computed (want); what says whose author it names.
func authorProblem(want string, err error, got, annotation, what string) Result {
	var r Result
	field := "metadata.annotations[" + annotation + "]"
	if err != nil {
		r.Also(fieldErr(field, "%v", err))
	} else if got != want {
		r.Also(fieldErr(field, "is set by admission to the user who wrote %s; leave it as it is (remove it from your manifest)", what))
	}
	return r
}

// ParseRestoreAuthor reads the author of r, whose rights its streamExec
// target or its source in another namespace uses.
func ParseRestoreAuthor(r *snapv1.Restore) (HooksAuthor, error) {
	return parseAuthor(r.Annotations[wellknown.AnnotationExecAuthor], fmt.Sprintf("Restore %s/%s", r.Namespace, r.Name), "the Restore", "it", wellknown.AnnotationExecAuthor)
}

// HooksAuthorProblem refuses a hooks-author annotation that is not the one
// admission computes: a user cannot lend a hook someone else's rights.
func HooksAuthorProblem(old, p *snapv1.SnapshotPolicy, user HooksAuthor, controller bool) Result {
	want, err := ExpectedHooksAuthor(old, p, user, controller)
	return authorProblem(want, err, p.Annotations[wellknown.AnnotationHooksAuthor], wellknown.AnnotationHooksAuthor,
		"this policy's runJob and workloadExec hooks and stream sources, whose rights those run with")
}

// ParseHooksAuthor reads the author of p's runJob and workloadExec hooks.
func ParseHooksAuthor(p *snapv1.SnapshotPolicy) (HooksAuthor, error) {
	return parseAuthor(p.Annotations[wellknown.AnnotationHooksAuthor], fmt.Sprintf("SnapshotPolicy %s/%s", p.Namespace, p.Name), "the policy", "its runJob and workloadExec hooks and stream sources", wellknown.AnnotationHooksAuthor)
}

func parseAuthor(v, object, it, what, annotation string) (HooksAuthor, error) {
	var a HooksAuthor
	if v == "" {
		return a, fmt.Errorf("%s does not record who set %s (annotation %s, which admission sets); apply %s again so admission records you", object, what, annotation, it)
	}
	if err := json.Unmarshal([]byte(v), &a); err != nil || a.Username == "" {
		return a, fmt.Errorf("%s: annotation %s is not a user admission wrote (%v); apply %s again so admission records you", object, annotation, err, it)
	}
	return a, nil
}

// InstallAccount says whether a is one of the ServiceAccounts of snapflow's
// own namespace ns: they write objects for others (a Restore made from an
// event, say), so their rights are never lent as an author's.
func (a HooksAuthor) InstallAccount(ns string) bool {
	return ns != "" && strings.HasPrefix(a.Username, "system:serviceaccount:"+ns+":")
}
