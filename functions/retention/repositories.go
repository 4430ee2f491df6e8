package retention

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/functions/snapshot"
	"github.com/snapflow/snapflow/internal/conditions"
	"github.com/snapflow/snapflow/internal/validate"
)

// missingRepositories lists the repositories p writes to that do not exist,
// as kind/name.
func (f *Function) missingRepositories(ctx context.Context, p *snapv1.SnapshotPolicy) ([]string, error) {
	var missing []string
	for _, ref := range validate.PolicyRefs(p) {
		_, err := snapshot.GetRepository(ctx, f.Client, "", ref, p.Namespace)
		switch {
		case apierrors.IsNotFound(err):
			kind := ref.Kind
			if kind == "" {
				kind = snapv1.KindRepository
			}
			missing = append(missing, fmt.Sprintf("%s/%s", kind, ref.Name))
		case err != nil:
			return nil, fmt.Errorf("read repository %s of policy %s/%s: %w", ref.Name, p.Namespace, p.Name, err)
		}
	}
	return missing, nil
}

// repositoriesCondition says whether every repository p names exists: a
// policy that fans out to a repository not yet made mints runs that wait
// for it, and without this nothing on the policy would say so.
func repositoriesCondition(p *snapv1.SnapshotPolicy, missing []string) metav1.Condition {
	c := metav1.Condition{Type: wellknown.ConditionRepositoriesFound, Status: metav1.ConditionTrue, Reason: "Found",
		Message: "every repository the policy writes to exists", ObservedGeneration: p.Generation}
	if len(missing) > 0 {
		c.Status, c.Reason = metav1.ConditionFalse, "RepositoryNotFound"
		c.Message = fmt.Sprintf("%s named by the policy do(es) not exist: runs for it wait until it is created; create it, or remove it from spec.repositories", strings.Join(missing, ", "))
	}
	return c
}

// setFound writes the repositories condition and the policy's kstatus
// conditions, which follow it: a policy is Ready when every repository it
// writes to exists, and stalled until a missing one is created.
func setFound(conds *[]metav1.Condition, found metav1.Condition) {
	meta.SetStatusCondition(conds, found)
	ok := found.Status == metav1.ConditionTrue
	conditions.Observed(conds, ok, !ok, found.Reason, found.Message, found.ObservedGeneration)
}

// foundIs says whether conds already hold found and the Ready it implies.
func foundIs(conds []metav1.Condition, found metav1.Condition) bool {
	ready := meta.FindStatusCondition(conds, wellknown.ConditionReady)
	return conditionIs(conds, found) && ready != nil && ready.Reason == found.Reason && ready.ObservedGeneration == found.ObservedGeneration
}
