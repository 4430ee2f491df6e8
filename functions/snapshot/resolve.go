package snapshot

import (
	"context"
	"fmt"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/identity"
	"github.com/snapflow/snapflow/internal/kopia"
	"github.com/snapflow/snapflow/internal/repository"
	"github.com/snapflow/snapflow/internal/validate"
)

// getRepository reads the repository ref points at, from consumer namespace ns.
func (f *Function) getRepository(ctx context.Context, ref snapv1.RepositoryRef, ns string) (*repository.Object, error) {
	return repository.Get(ctx, f.Client, f.Namespace, ref, ns)
}

// resolveIdentity is the kopia identity of policy p's source in repository r.
func resolveIdentity(p *snapv1.SnapshotPolicy, r *repository.Object, src snapv1.Source, pvc string) (kopia.Source, error) {
	id, err := identity.Resolve(p, r.Spec.IdentityDefaults)
	if err != nil {
		return kopia.Source{}, err
	}
	path := identity.PVCSourcePath(src, p.Namespace, pvc)
	switch {
	case src.NFS != nil:
		path = identity.NFSSourcePath(src)
	case src.Stream != nil:
		path = identity.StreamSourcePath(src)
	}
	return kopia.Source{Username: id.Username, Hostname: id.Hostname, Path: path}, nil
}

// collisionGate re-runs admission's identity-collision rule for the run's
// repository: two policies writing one kopia source would mix their
// lineages, and each one's retention would prune the other's history. The
// policy that came first keeps running.
func (f *Function) collisionGate(ctx context.Context, p *snapv1.SnapshotPolicy, ref snapv1.RepositoryRef) (*gate, error) {
	cs, err := validate.IdentityCollisions(ctx, repository.Lookup{Reader: f.Client}, p, ref)
	if err != nil {
		return nil, fmt.Errorf("check identity collisions: %w", err)
	}
	c := validate.Earlier(p, cs)
	if c == nil {
		return nil, nil
	}
	return &gate{cond: wellknown.ConditionReady, reason: ReasonIdentityCollision, fatal: true,
		message: fmt.Sprintf("SnapshotPolicy %s/%s, created before SnapshotPolicy %s, also writes kopia source %q in %s, so this run was stopped before it mixed the two lineages; give SnapshotPolicy %s a distinct spec.identity, or point it at another repository",
			c.Policy.Namespace, c.Policy.Name, p.Name, c.Address, validate.RepoKey(ref, p.Namespace), p.Name)}, nil
}

// tenancyProblem re-runs the webhook's tenancy rule (the webhook may have
// been bypassed, or the ClusterRepository changed since admission).
func (f *Function) tenancyProblem(ctx context.Context, ns string, ref snapv1.RepositoryRef) string {
	return repository.TenancyProblem(ctx, f.Client, ns, ref)
}
