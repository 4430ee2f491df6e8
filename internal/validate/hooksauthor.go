package validate

import (
	"encoding/json"
	"fmt"
	"slices"

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
	if len(RightedHooks(p)) == 0 && !HasStream(p) {
		return "", nil
	}
	if controller {
		if old == nil {
			return "", nil
		}
		return old.Annotations[wellknown.AnnotationHooksAuthor], nil
	}
	b, err := json.Marshal(user)
	if err != nil {
		return "", fmt.Errorf("encode the hooks author: %w", err)
	}
	return string(b), nil
}

// HooksAuthorProblem refuses a hooks-author annotation that is not the one
// admission computes: a user cannot lend a hook someone else's rights.
func HooksAuthorProblem(old, p *snapv1.SnapshotPolicy, user HooksAuthor, controller bool) Result {
	var r Result
	want, err := ExpectedHooksAuthor(old, p, user, controller)
	if err != nil {
		r.Also(fieldErr("metadata.annotations["+wellknown.AnnotationHooksAuthor+"]", "%v", err))
		return r
	}
	if got := p.Annotations[wellknown.AnnotationHooksAuthor]; got != want {
		r.Also(fieldErr("metadata.annotations["+wellknown.AnnotationHooksAuthor+"]",
			"is set by admission to the user who set this policy's runJob and workloadExec hooks and stream sources, whose rights those run with; leave it as it is (remove it from your manifest)"))
	}
	return r
}

// ParseHooksAuthor reads the author of p's runJob and workloadExec hooks.
func ParseHooksAuthor(p *snapv1.SnapshotPolicy) (HooksAuthor, error) {
	var a HooksAuthor
	v := p.Annotations[wellknown.AnnotationHooksAuthor]
	if v == "" {
		return a, fmt.Errorf("SnapshotPolicy %s/%s does not record who set its runJob and workloadExec hooks and stream sources (annotation %s, which admission sets); apply the policy again so admission records you", p.Namespace, p.Name, wellknown.AnnotationHooksAuthor)
	}
	if err := json.Unmarshal([]byte(v), &a); err != nil || a.Username == "" {
		return a, fmt.Errorf("SnapshotPolicy %s/%s: annotation %s is not a user admission wrote (%v); apply the policy again so admission records you", p.Namespace, p.Name, wellknown.AnnotationHooksAuthor, err)
	}
	return a, nil
}
