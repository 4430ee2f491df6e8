package snapshot

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/validate"
)

// ReasonRepositorySuspended: the run's repository has spec.suspend set;
// it waits until the repository is resumed.
const ReasonRepositorySuspended = wellknown.ReasonRepositorySuspended

// PolicyRepositories reads the repositories p writes to once and says
// which do not exist (as Kind/name) and which are suspended (as
// validate.RepoKey).
func PolicyRepositories(ctx context.Context, c client.Client, p *snapv1.SnapshotPolicy) (missing, suspended []string, err error) {
	for _, ref := range validate.PolicyRefs(p) {
		r, err := GetRepository(ctx, c, "", ref, p.Namespace)
		switch {
		case apierrors.IsNotFound(err):
			kind := ref.Kind
			if kind == "" {
				kind = snapv1.KindRepository
			}
			missing = append(missing, fmt.Sprintf("%s/%s", kind, ref.Name))
			continue
		case err != nil:
			return nil, nil, fmt.Errorf("read repository %s of policy %s/%s: %w", ref.Name, p.Namespace, p.Name, err)
		}
		if r.Spec.Suspend {
			suspended = append(suspended, r.Key())
		}
	}
	return missing, suspended, nil
}

// SuspendedRepositories lists the repositories p writes to that are
// suspended, and whether all of them are. A repository that does not
// exist is not suspended: the callers report it otherwise.
func SuspendedRepositories(ctx context.Context, c client.Client, p *snapv1.SnapshotPolicy) (suspended []string, all bool, err error) {
	_, suspended, err = PolicyRepositories(ctx, c, p)
	refs := validate.PolicyRefs(p)
	return suspended, err == nil && len(refs) > 0 && len(suspended) == len(refs), err
}
