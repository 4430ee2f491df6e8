package maintenance

import (
	"context"
	"errors"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/functions/host"
	"github.com/snapflow/snapflow/internal/kopia"
	kernel "github.com/snapflow/snapflow/internal/maintenance"
	"github.com/snapflow/snapflow/internal/mover"
	"github.com/snapflow/snapflow/internal/moverjob"
	"github.com/snapflow/snapflow/internal/privilege"
	"github.com/snapflow/snapflow/internal/projection"
	"github.com/snapflow/snapflow/internal/repository"
)

// refusedError marks what fails the run for good (until someone changes a
// spec): everything else build returns is the API server's and retried.
type refusedError struct{ error }

func (e refusedError) Unwrap() error { return e.error }

func refused(err error) error { return refusedError{err} }

func isRefused(err error) bool {
	var r refusedError
	return errors.As(err, &r)
}

// build renders one maintenance run's Job. Its name is derived from the
// Maintenance, mode and slot, so a redelivered event cannot start a second
// run of one slot. Maintenance takes no repository pool slot: it is what
// keeps an overloaded repository usable, so it never queues behind backups.
func (f *Function) build(ctx context.Context, m *snapv1.Maintenance, repo *repository.Object, d kernel.Decision, owner, safety string) (*batchv1.Job, *corev1.ConfigMap, error) {
	work, mounts, err := repository.Work(repo.Ref, repo.Obj, repo.Spec)
	if err != nil {
		return nil, nil, refused(fmt.Errorf("%s: %w", repo.Key(), err))
	}
	if why := repo.ClaimProblem(mounts, "maintenance job", m.Namespace); why != "" {
		return nil, nil, refused(fmt.Errorf("%s; set its spec.maintenance.namespace to %s", why, repo.Namespace))
	}
	// Maintenance never creates a repository; the mover refuses a spec
	// that asks it to.
	work.Create = nil
	mw := &mover.MaintenanceWork{Mode: d.Mode, Slot: d.Slot, Owner: owner, Safety: safety}
	if o := m.Spec.Ownership; o != nil {
		mw.Aliases, mw.Takeover = o.OwnerAliases, o.TakeoverPolicy == snapv1.TakeoverAlways
	}
	spec := mover.WorkSpec{Operation: mover.OpMaintenance, Target: mover.Target{Kind: "Maintenance", Namespace: m.Namespace, Name: m.Name, UID: string(m.UID)},
		Repository: work, Maintenance: mw}
	// Maintenance reads every index: its cache settings matter most. A
	// Persistent cache belongs to a policy's source, so maintenance gets
	// its own volume of the same shape.
	cache := moverjob.EffectiveCache(m.Spec.Mover, repo.Spec.MoverDefaults)
	moverjob.CacheBudgets(&spec, cache)
	name := moverjob.Name(moverjob.Prefix(m.Name, 36)+"-maint-"+d.Mode, fmt.Sprintf("%s/%s/%d", m.UID, d.Mode, d.Slot.Unix()))
	t := true
	ref := metav1.OwnerReference{APIVersion: snapv1.GroupVersion.String(), Kind: "Maintenance", Name: m.Name, UID: m.UID, Controller: &t, BlockOwnerDeletion: &t}
	// A label value holds 63 characters; the Job's controller reference
	// names the Maintenance in full.
	labels := map[string]string{wellknown.LabelMaintenance: moverjob.Prefix(m.Name, 63), wellknown.LabelOp: mover.OpMaintenance}
	if safety == kopia.SafetyNone {
		labels[wellknown.LabelReclaiming] = poolKeyOf(repo)
	}
	job, cm, err := host.BuildMoverJob(ctx, f.Client, moverjob.Params{
		Name: name, Namespace: m.Namespace, Owner: ref,
		Labels: labels,
		Image:  f.MoverImage, ServiceAccount: f.MoverServiceAccount, Work: spec,
		PasswordSecret: repo.Spec.Encryption.PasswordSecretRef.Name, PasswordKey: repo.Spec.Encryption.PasswordSecretRef.Key,
		CredentialsSecret: mounts.Credentials, CABundle: mounts.CABundle,
		RepositoryClaim: mounts.RepoClaim, RepositoryNFS: mounts.RepoNFS, RepositoryHost: mounts.HostPath,
		RepositoryHostTrusted: mounts.HostTrusted, Cache: cache,
		Mover: m.Spec.Mover, Defaults: repo.Spec.MoverDefaults, FailurePolicy: m.Spec.FailurePolicy,
	})
	if errors.Is(err, privilege.ErrNotPermitted) {
		return nil, nil, refused(err)
	}
	if err != nil {
		return nil, nil, err
	}
	if repo.Namespace != m.Namespace {
		// A ClusterRepository maintained from the namespace its
		// spec.maintenance.namespace names: its credentials are copied
		// there for the run, with its owner's consent.
		if msg := repository.CopyRefused(ctx, f.Client, repo, m.Namespace, true, "the ClusterRepository's spec.maintenance.namespace"); msg != "" {
			return nil, nil, refused(errors.New(msg))
		}
		if err := projection.Apply(ctx, f.Client, job, repo.Homes(), true, ""); errors.Is(err, projection.ErrSource) {
			return nil, nil, refused(err)
		} else if err != nil {
			return nil, nil, err
		}
	}
	return job, cm, nil
}
