package maintenance

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/functions/host"
	kernel "github.com/snapflow/snapflow/internal/maintenance"
	"github.com/snapflow/snapflow/internal/mover"
	"github.com/snapflow/snapflow/internal/repository"
	"github.com/snapflow/snapflow/internal/validate"
)

// start begins the run d decided, once the live Maintenance still wants it.
func (f *Function) start(ctx context.Context, m *snapv1.Maintenance, repo *repository.Object, d kernel.Decision) error {
	log := host.Log(ctx).WithValues("maintenance", m.Namespace+"/"+m.Name, "mode", d.Mode, "repository", repo.Key())
	if repo.Spec.Suspend {
		// A suspended repository is not touched; the due run goes once it
		// is resumed.
		return f.setReady(ctx, m, metav1.ConditionFalse, wellknown.ReasonRepositorySuspended,
			fmt.Sprintf("%s is suspended (spec.suspend: true): the %s run due at %s waits for it to be resumed", repo.Key(), d.Mode, d.Slot.UTC().Format(time.RFC3339)))
	}
	if repo.Status.Phase != snapv1.RepositoryReady {
		log.Info("maintenance due but the repository is not Ready; waiting", "phase", repo.Status.Phase)
		return nil
	}
	// A resync decides on its listing, which may be older than a run
	// another event started or finished meanwhile: decide again on the
	// live object.
	var live snapv1.Maintenance
	if err := f.Client.Get(ctx, client.ObjectKeyFromObject(m), &live); err != nil {
		return client.IgnoreNotFound(err)
	}
	if live.UID != m.UID || live.DeletionTimestamp != nil || kernel.Running(&live.Status) != nil {
		return nil
	}
	if last, ok := kernel.LastSlots(&live.Status)[d.Mode]; ok && !last.Before(d.Slot) {
		return nil
	}
	m = &live
	if other, err := f.olderTwin(ctx, m); err != nil {
		return err
	} else if other != "" {
		return f.setReady(ctx, m, metav1.ConditionFalse, "DuplicateMaintenance",
			fmt.Sprintf("Maintenance %s also maintains %s and is older, so this one does not run; delete one of them", other, repo.Key()))
	}
	// Only a requested run may go without kopia's margins: a scheduled
	// one never does, whatever the annotation says.
	safety := ""
	if d.Requested {
		safety = m.Annotations[wellknown.AnnotationMaintenanceSafety]
	}
	if safety == "none" {
		busy, err := f.repositoryBusy(ctx, repo)
		if err != nil {
			return err
		}
		if busy != "" {
			log.Info("maintenance with safety none waits for the repository's other Jobs", "job", busy)
			return f.setReady(ctx, m, metav1.ConditionFalse, "WaitingForRepositoryJobs",
				fmt.Sprintf("%s maintenance with %s=none waits until no other snapflow Job uses the repository (%s is running)", d.Mode, wellknown.AnnotationMaintenanceSafety, busy))
		}
	}
	clusterID, err := f.clusterID(ctx)
	if err != nil {
		return err
	}
	owner := kernel.Owner(m, repo.Spec, clusterID)
	job, cm, err := f.build(ctx, m, repo, d, owner, safety)
	if err != nil && !isRefused(err) {
		return err // the API server failed: the next event retries
	}
	if err != nil {
		return f.record(ctx, m, d.Mode, d.Slot, true, func(r *snapv1.MaintenanceRun) {
			now := metav1.NewTime(f.now())
			r.Phase, r.Message, r.Job, r.CompletedAt = mover.MaintenanceFailed, err.Error(), "", &now
		})
	}
	if err := host.CreateWorkSpec(ctx, f.Client, cm); err != nil {
		return err
	}
	if err := f.Client.Create(ctx, job); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create the maintenance job: %w", err)
	}
	log.Info("maintenance started", "job", job.Name, "slot", d.Slot, "reason", d.Reason, "owner", owner, "safety", safety)
	return f.record(ctx, m, d.Mode, d.Slot, true, func(r *snapv1.MaintenanceRun) {
		now := metav1.NewTime(f.now())
		r.Phase, r.Job, r.StartedAt, r.CompletedAt, r.Message = mover.MaintenanceRunning, job.Name, &now, nil, fmt.Sprintf("%s maintenance as %s started (%s)", d.Mode, owner, d.Reason)
		r.DurationSeconds, r.BlobsBefore, r.BytesBefore, r.BlobsAfter, r.BytesAfter, r.ReclaimedBytes, r.ReclaimableBytes, r.Safety = nil, nil, nil, nil, nil, nil, nil, ""
	})
}

// cannotRun says a Maintenance stands still for a reason of its own (it is
// invalid or its repository unusable): it does not hold a twin back.
func cannotRun(m *snapv1.Maintenance) bool {
	c := meta.FindStatusCondition(m.Status.Conditions, wellknown.ConditionReady)
	return c != nil && c.Status == metav1.ConditionFalse && (c.Reason == "FailedValidation" || c.Reason == "InvalidSchedule" || c.Reason == "RepositoryNotUsable")
}

// olderTwin names an older Maintenance of the same namespace that
// maintains the same repository ("" when none does): of two, only the
// oldest runs, so one repository never gets two maintenance Jobs at once.
func (f *Function) olderTwin(ctx context.Context, m *snapv1.Maintenance) (string, error) {
	var list snapv1.MaintenanceList
	if err := f.Client.List(ctx, &list, client.InNamespace(m.Namespace)); err != nil {
		return "", fmt.Errorf("list the maintenances of namespace %s: %w", m.Namespace, err)
	}
	key := validate.RepoKey(m.Spec.Repository, m.Namespace)
	for _, o := range list.Items {
		if o.UID == m.UID || o.DeletionTimestamp != nil || validate.RepoKey(o.Spec.Repository, o.Namespace) != key || cannotRun(&o) {
			continue
		}
		ot, mt := o.CreationTimestamp.Time, m.CreationTimestamp.Time
		if ot.Before(mt) || (ot.Equal(mt) && o.Name < m.Name) {
			return o.Name, nil
		}
	}
	return "", nil
}
