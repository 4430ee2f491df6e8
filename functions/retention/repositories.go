package retention

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/conditions"
)

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
