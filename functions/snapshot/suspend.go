package snapshot

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/internal/validate"
)

// ReasonRepositorySuspended: the run's repository has spec.suspend set;
// it waits until the repository is resumed.
const ReasonRepositorySuspended = "RepositorySuspended"

// SuspendedRepositories lists the repositories p writes to that are
// suspended (as Kind/name), and whether all of them are. A repository
// that does not exist is not suspended: the callers report it otherwise.
func SuspendedRepositories(ctx context.Context, c client.Client, p *snapv1.SnapshotPolicy) (suspended []string, all bool, err error) {
	refs := validate.PolicyRefs(p)
	for _, ref := range refs {
		r, err := GetRepository(ctx, c, "", ref, p.Namespace)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return nil, false, fmt.Errorf("read repository %s of policy %s/%s: %w", ref.Name, p.Namespace, p.Name, err)
		}
		if r.Spec.Suspend {
			suspended = append(suspended, r.Key())
		}
	}
	return suspended, len(refs) > 0 && len(suspended) == len(refs), nil
}
