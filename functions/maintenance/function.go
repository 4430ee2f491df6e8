// Package maintenance is the maintenance function: it gives every
// repository a default Maintenance (unless spec.maintenance disables it or
// one exists), and on each tick starts a mover Job running kopia's quick
// or full maintenance when a Maintenance's cron or run-requested
// annotation makes one due. kopia only runs maintenance on its own from its
// command line, so without this nothing deleted is ever reclaimed. The
// mover reports in its termination message; this function writes it onto
// the Maintenance and emits dev.snapflow.maintenance.* events.
package maintenance

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/events"
	"github.com/snapflow/snapflow/functions/host"
	"github.com/snapflow/snapflow/internal/conditions"
	"github.com/snapflow/snapflow/internal/jobwatch"
	"github.com/snapflow/snapflow/internal/kopia"
	kernel "github.com/snapflow/snapflow/internal/maintenance"
	"github.com/snapflow/snapflow/internal/mover"
	"github.com/snapflow/snapflow/internal/projection"
	"github.com/snapflow/snapflow/internal/repository"
	"github.com/snapflow/snapflow/internal/statuspatch"
	"github.com/snapflow/snapflow/internal/validate"
)

// Function is the maintenance function's configuration and ports.
type Function struct {
	Client              client.Client
	Namespace           string
	MoverImage          string
	MoverServiceAccount string
	// Defaults are the crons of default Maintenances (KopiaCadence when
	// empty).
	Defaults kernel.Defaults
	Recorder record.EventRecorder
	Emitter  host.Emitter
	Now      func() time.Time
}

func (f *Function) now() time.Time { return host.Now(f.Now) }

func (f *Function) defaults() kernel.Defaults {
	d := f.Defaults
	if d.Quick == "" {
		d.Quick = kernel.KopiaCadence.Quick
	}
	if d.Full == "" {
		d.Full = kernel.KopiaCadence.Full
	}
	return d
}

// Handle is the CloudEvents entry point.
func (f *Function) Handle(ctx context.Context, e event.Event) error {
	switch {
	case e.Type() == events.Resync || e.Type() == events.Ping:
		return f.Resync(ctx)
	case events.IsAPIServer(e.Type()):
		ref, _, err := events.DecodeAPIServer(e)
		if err != nil {
			return err
		}
		gk := ref.GroupKind()
		switch {
		case gk.Group == snapv1.GroupVersion.Group && gk.Kind == "Maintenance":
			err := f.Reconcile(ctx, ref.Namespace, ref.Name)
			// A Maintenance written (or removed) for a repository makes
			// its default step aside (or come back) now, not at the next
			// resync.
			var m snapv1.Maintenance
			if gerr := f.Client.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, &m); gerr == nil && m.Labels[wellknown.LabelMaintenanceDefault] != "true" {
				r := m.Spec.Repository
				if r.Kind != snapv1.KindClusterRepository {
					r.Kind, r.Namespace = snapv1.KindRepository, m.Namespace
				}
				err = errors.Join(err, f.ensureDefault(ctx, r))
			}
			return err
		case gk.Group == snapv1.GroupVersion.Group && (gk.Kind == string(snapv1.KindRepository) || gk.Kind == string(snapv1.KindClusterRepository)):
			return f.ensureDefault(ctx, snapv1.RepositoryRef{Kind: snapv1.RepositoryKind(gk.Kind), Name: ref.Name, Namespace: ref.Namespace})
		case gk.Group == "batch" && gk.Kind == "Job":
			var j batchv1.Job
			if err := f.Client.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, &j); err != nil {
				return client.IgnoreNotFound(err)
			}
			// The label marks the Job (its value may be cut to 63
			// characters); the controller reference names the Maintenance.
			if _, ok := j.Labels[wellknown.LabelMaintenance]; ok {
				if o := metav1.GetControllerOf(&j); o != nil && o.Kind == "Maintenance" {
					return f.Reconcile(ctx, j.Namespace, o.Name)
				}
			}
		}
		return nil
	}
	return fmt.Errorf("%w: the maintenance function handles ApiServerSource, %s and %s events, not %q", events.ErrUnsupported, events.Resync, events.Ping, e.Type())
}

// Resync gives every repository its default Maintenance and reconciles
// every Maintenance.
func (f *Function) Resync(ctx context.Context) error {
	var list snapv1.MaintenanceList
	if err := f.Client.List(ctx, &list); err != nil {
		return fmt.Errorf("list maintenances: %w", err)
	}
	var errs []error
	var repos snapv1.RepositoryList
	listFailed := false
	if err := f.Client.List(ctx, &repos); err != nil {
		errs, listFailed = append(errs, fmt.Errorf("list repositories: %w", err)), true
	}
	listed := &repositories{byKey: map[string]client.Object{}}
	for i := range repos.Items {
		errs = append(errs, f.keepDefault(ctx, &repos.Items[i], list.Items))
		listed.add(&repos.Items[i])
	}
	var crs snapv1.ClusterRepositoryList
	if err := f.Client.List(ctx, &crs); err != nil {
		errs, listFailed = append(errs, fmt.Errorf("list cluster repositories: %w", err)), true
	}
	for i := range crs.Items {
		errs = append(errs, f.keepDefault(ctx, &crs.Items[i], list.Items))
		listed.add(&crs.Items[i])
	}
	if listFailed {
		listed = nil // read each repository instead
	}
	for _, m := range list.Items {
		if m.DeletionTimestamp == nil {
			errs = append(errs, f.reconcile(ctx, m.DeepCopy(), listed))
		}
	}
	return errors.Join(errs...)
}

// Reconcile settles a finished run of one Maintenance, or starts the run
// that is due.
func (f *Function) Reconcile(ctx context.Context, ns, name string) error {
	var m snapv1.Maintenance
	if err := f.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &m); err != nil {
		return client.IgnoreNotFound(err)
	}
	if m.DeletionTimestamp != nil {
		return nil
	}
	return f.reconcile(ctx, &m, nil)
}

func (f *Function) reconcile(ctx context.Context, m *snapv1.Maintenance, listed *repositories) error {
	if run := kernel.Running(&m.Status); run != nil {
		return f.observe(ctx, m, run)
	}
	// Copies of a run that ended while its Job was still going away (a
	// wedged mover's) go once nothing runs.
	f.sweep(ctx, m)
	// The webhook's rules again: snapflow's own namespace is not admitted
	// by it, and a Maintenance written before a rule existed may break it.
	if r := validate.Maintenance(m, validate.Options{}); !r.OK() {
		return f.setReady(ctx, m, metav1.ConditionFalse, "FailedValidation", "the Maintenance is invalid, so it does not run: "+r.Errs.Error())
	}
	repo, why, err := f.repository(ctx, m, listed)
	if err != nil {
		return err
	}
	if why != "" {
		return f.setReady(ctx, m, metav1.ConditionFalse, "RepositoryNotUsable", why)
	}
	scheds, err := kernel.Resolve(m, repo.Spec)
	if err != nil {
		return f.setReady(ctx, m, metav1.ConditionFalse, "InvalidSchedule", err.Error())
	}
	// Valid and its repository usable: Ready from the start (kubectl wait,
	// GitOps health), and again once what stalled it is fixed. A failed
	// run's or a wait's reason stands until the next run decides.
	c := meta.FindStatusCondition(m.Status.Conditions, wellknown.ConditionReady)
	reset := c == nil || c.Status == metav1.ConditionFalse && (stalledReasons[c.Reason] || c.Reason == wellknown.ReasonRepositorySuspended && !repo.Spec.Suspend)
	if reset && c != nil && c.Reason == "DuplicateMaintenance" {
		// Ready again once the older twin is gone.
		other, err := f.olderTwin(ctx, m)
		if err != nil {
			return err
		}
		reset = other == ""
	}
	switch {
	case reset:
		if err := f.setReady(ctx, m, metav1.ConditionTrue, "Scheduled", "the Maintenance is valid and runs on its schedule"); err != nil {
			return err
		}
	case c.ObservedGeneration != m.Generation || m.Status.ObservedGeneration != m.Generation:
		// An edit that changed nothing Ready says still moves the generation.
		if err := f.setReady(ctx, m, c.Status, c.Reason, c.Message); err != nil {
			return err
		}
	}
	requested, mode, err := validate.MaintenanceRequest(m.Annotations)
	if err != nil {
		if f.Recorder != nil {
			f.Recorder.Event(m, corev1.EventTypeWarning, "InvalidRunRequest", "invalid maintenance run annotation: "+err.Error()+"; the request is ignored")
		}
		requested = nil
	}
	d, err := kernel.Due(scheds, kernel.LastSlots(&m.Status), m.CreationTimestamp.Time, requested, mode, f.now())
	if err != nil || !d.Due {
		return err
	}
	return f.start(ctx, m, repo, d)
}

// observe applies a finished run's report, and settles a run whose mover
// ended without one.
func (f *Function) observe(ctx context.Context, m *snapv1.Maintenance, run *snapv1.MaintenanceRun) error {
	var j batchv1.Job
	err := f.Client.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: run.Job}, &j)
	if err == nil && !host.Owned(&j, m) {
		// The Job's name is in status, which is not proof it is ours.
		err = apierrors.NewNotFound(batchv1.Resource("jobs"), run.Job)
	}
	msg := ""
	switch {
	case apierrors.IsNotFound(err):
		msg = fmt.Sprintf("the maintenance job %s disappeared before reporting", run.Job)
	case err != nil:
		return err
	default:
		c, done := jobwatch.Finished(&j)
		if !done {
			if wedged, why := jobwatch.Wedged(ctx, f.Client, &j, f.now()); wedged {
				_ = f.Client.Delete(ctx, &j, client.PropagationPolicy(metav1.DeletePropagationBackground))
				msg = why
				break
			}
			return nil
		}
		why, err := jobwatch.ApplyReport(ctx, f.Client, &j, m.UID, mover.OpMaintenance)
		if err != nil {
			return err
		}
		if why == "" {
			// The report lands only on the run its work spec names, and
			// the spec sits in a ConfigMap its namespace may edit: a
			// report of another slot or mode leaves this run Running.
			if still, err := f.stillRunning(ctx, m, run); err != nil || !still {
				f.sweep(ctx, m)
				if err != nil {
					return err
				}
				return f.finished(ctx, m.Namespace, m.Name, run.Mode, run.Slot.Time)
			}
			why = "its report was for another run than this one (was its work spec edited?)"
		}
		msg = fmt.Sprintf("the maintenance job %s ended (%s) without a result (%s): %s %s", j.Name, c.Reason, why, c.Message, jobwatch.PodMessage(ctx, f.Client, &j))
	}
	f.sweep(ctx, m)
	if err := f.record(ctx, m, run.Mode, run.Slot.Time, false, func(r *snapv1.MaintenanceRun) {
		if r.Phase != mover.MaintenanceRunning || r.Job != run.Job {
			return
		}
		now := metav1.NewTime(f.now())
		r.Phase, r.Message, r.CompletedAt = mover.MaintenanceFailed, msg, &now
	}); err != nil {
		return err
	}
	return f.finished(ctx, m.Namespace, m.Name, run.Mode, run.Slot.Time)
}

// stillRunning says whether run is still Running with its Job on the live
// Maintenance.
func (f *Function) stillRunning(ctx context.Context, m *snapv1.Maintenance, run *snapv1.MaintenanceRun) (bool, error) {
	var live snapv1.Maintenance
	if err := f.Client.Get(ctx, client.ObjectKeyFromObject(m), &live); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	r := kernel.Running(&live.Status)
	return r != nil && r.Mode == run.Mode && r.Job == run.Job, nil
}

// sweep removes credential copies of finished maintenance Jobs: a
// ClusterRepository maintained outside snapflow's namespace gets them.
func (f *Function) sweep(ctx context.Context, m *snapv1.Maintenance) {
	if m.Spec.Repository.Kind != snapv1.KindClusterRepository || m.Namespace == f.Namespace {
		return
	}
	if err := projection.Sweep(ctx, f.Client, m.Namespace, f.now()); err != nil {
		host.Log(ctx).Info("could not sweep credential copies of finished maintenance jobs", "namespace", m.Namespace, "error", err.Error())
	}
}

// finished tells about a run that ended: an Event and a CloudEvent, each
// once per slot (the CloudEvent's id is the slot's).
func (f *Function) finished(ctx context.Context, ns, name, mode string, slot time.Time) error {
	var m snapv1.Maintenance
	if err := f.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &m); err != nil {
		return client.IgnoreNotFound(err)
	}
	var run *snapv1.MaintenanceRun
	for i := range m.Status.Runs {
		if r := &m.Status.Runs[i]; r.Mode == mode && r.Slot.Time.Equal(slot) {
			run = r
		}
	}
	if run == nil || run.Phase == mover.MaintenanceRunning {
		return nil
	}
	typ, evType := events.MaintenanceSucceeded, corev1.EventTypeNormal
	switch run.Phase {
	case mover.MaintenanceSkipped:
		typ, evType = events.MaintenanceSkipped, corev1.EventTypeWarning
	case mover.MaintenanceFailed:
		typ, evType = events.MaintenanceFailed, corev1.EventTypeWarning
	}
	if f.Recorder != nil {
		f.Recorder.Event(&m, evType, "Maintenance"+run.Phase, run.Message)
	}
	// Only here, after the run: a failed write is logged, not retried,
	// and the next full run writes a fresh count.
	if err := f.recordStorage(ctx, &m, run); err != nil {
		host.Log(ctx).Error(err, "could not record the full run's storage count on its repository", "maintenance", m.Namespace+"/"+m.Name)
	}
	if f.Emitter == nil {
		return nil
	}
	data := events.MaintenanceResult{Namespace: m.Namespace, Name: m.Name, UID: string(m.UID), Mode: run.Mode, Phase: run.Phase,
		Repository: validate.RepoKey(m.Spec.Repository, m.Namespace), Owner: m.Status.Owner, Message: run.Message}
	if run.DurationSeconds != nil {
		data.DurationSeconds = *run.DurationSeconds
	}
	if run.BytesBefore != nil && run.BytesAfter != nil {
		data.BytesBefore, data.BytesAfter = *run.BytesBefore, *run.BytesAfter
	}
	if run.ReclaimedBytes != nil {
		data.ReclaimedBytes = *run.ReclaimedBytes
	}
	e, err := events.New(fmt.Sprintf("%s/%s/%d", m.UID, run.Mode, slot.Unix()), typ, m.Namespace+"/"+m.Name, data)
	if err != nil {
		return err
	}
	return f.Emitter.Emit(ctx, e)
}

// record updates (or adds) the run entry of mode.
// start says mutate records a run's start.
func (f *Function) record(ctx context.Context, m *snapv1.Maintenance, mode string, slot time.Time, start bool, mutate func(*snapv1.MaintenanceRun)) error {
	return statuspatch.Update(ctx, f.Client, client.ObjectKeyFromObject(m), func() *snapv1.Maintenance { return &snapv1.Maintenance{} },
		func(live *snapv1.Maintenance) error {
			if live.UID != m.UID {
				return statuspatch.Skip
			}
			var r *snapv1.MaintenanceRun
			for i := range live.Status.Runs {
				if live.Status.Runs[i].Mode == mode {
					r = &live.Status.Runs[i]
				}
			}
			if r == nil {
				live.Status.Runs = append(live.Status.Runs, snapv1.MaintenanceRun{Mode: mode})
				r = &live.Status.Runs[len(live.Status.Runs)-1]
			}
			if r.Slot.After(slot) {
				return statuspatch.Skip // a later run holds the entry
			}
			// A start recorded late, after its own result (a redelivered
			// event read the Maintenance before the result was written),
			// never turns that result back into Running.
			if start && r.Slot.Time.Equal(slot) && r.Phase != "" && r.Phase != mover.MaintenanceRunning {
				return statuspatch.Skip
			}
			r.Slot = metav1.NewTime(slot)
			mutate(r)
			live.Status.ObservedGeneration = live.Generation
			switch r.Phase {
			case mover.MaintenanceFailed:
				// The next slot tries again: not stalled.
				conditions.Observed(&live.Status.Conditions, false, false, "MaintenanceFailed", r.Message, live.Generation)
			case mover.MaintenanceSucceeded:
				conditions.Observed(&live.Status.Conditions, true, false, "MaintenanceSucceeded", "the last "+string(r.Mode)+" run succeeded", live.Generation)
			}
			*m = *live.DeepCopy()
			return nil
		})
}

// stalledReasons are the Ready=False reasons that last until someone edits
// the Maintenance or its repository.
var stalledReasons = map[string]bool{"FailedValidation": true, "RepositoryNotUsable": true, "InvalidSchedule": true, "DuplicateMaintenance": true}

// setReady writes the Ready condition (only when it changes).
func (f *Function) setReady(ctx context.Context, m *snapv1.Maintenance, status metav1.ConditionStatus, reason, msg string) error {
	if c := meta.FindStatusCondition(m.Status.Conditions, wellknown.ConditionReady); c != nil && c.Status == status && c.Reason == reason && c.Message == msg &&
		c.ObservedGeneration == m.Generation && m.Status.ObservedGeneration == m.Generation && meta.FindStatusCondition(m.Status.Conditions, wellknown.ConditionStalled) != nil {
		return nil
	}
	return statuspatch.Update(ctx, f.Client, client.ObjectKeyFromObject(m), func() *snapv1.Maintenance { return &snapv1.Maintenance{} },
		func(live *snapv1.Maintenance) error {
			if live.UID != m.UID {
				return statuspatch.Skip
			}
			conditions.Observed(&live.Status.Conditions, status == metav1.ConditionTrue, stalledReasons[reason], reason, msg, live.Generation)
			live.Status.ObservedGeneration = live.Generation
			return nil
		})
}

// repository resolves the Maintenance's repository and says why it cannot
// be maintained from here ("" when it can).
// listed, when not nil, holds every repository of the cluster as a resync
// listed them, so a tick reads no repository once per Maintenance.
func (f *Function) repository(ctx context.Context, m *snapv1.Maintenance, listed *repositories) (*repository.Object, string, error) {
	ref := m.Spec.Repository
	if ref.Kind == "" {
		ref.Kind = snapv1.KindRepository
	}
	if ref.Kind == snapv1.KindRepository && ref.Namespace != "" && ref.Namespace != m.Namespace {
		return nil, fmt.Sprintf("Repository %s/%s is not in the Maintenance's namespace; maintenance runs where the repository lives", ref.Namespace, ref.Name), nil
	}
	ref.Namespace = ""
	var (
		repo *repository.Object
		err  error
	)
	if listed != nil {
		repo = listed.find(ref, m.Namespace, f.Namespace)
		if repo == nil {
			err = apierrors.NewNotFound(snapv1.GroupVersion.WithResource("repositories").GroupResource(), ref.Name)
		}
	} else {
		repo, err = repository.Get(ctx, f.Client, f.Namespace, ref, m.Namespace)
	}
	if apierrors.IsNotFound(err) {
		return nil, fmt.Sprintf("%s %s does not exist", ref.Kind, ref.Name), nil
	}
	if err != nil {
		return nil, "", err
	}
	// Admission checked this too; the ClusterRepository may have changed.
	if cr, ok := repo.Obj.(*snapv1.ClusterRepository); ok {
		if want := validate.MaintenanceNamespace(cr, f.Namespace); want != m.Namespace {
			return nil, fmt.Sprintf("ClusterRepository %s is maintained only from namespace %s (its spec.maintenance.namespace, or snapflow's namespace), not %s", cr.Name, want, m.Namespace), nil
		}
	}
	if repo.Spec.Mode == snapv1.ModeReadOnly {
		return nil, fmt.Sprintf("%s is read-only (spec.mode: ReadOnly): kopia runs no maintenance on a read-only connection; whoever writes the repository maintains it", repo.Key()), nil
	}
	return repo, "", nil
}

// repositoryBusy names a running snapflow Job that uses the repository
// ("" when none does).
func (f *Function) repositoryBusy(ctx context.Context, repo *repository.Object) (string, error) {
	var jobs batchv1.JobList
	if err := f.Client.List(ctx, &jobs, client.MatchingLabels{wellknown.LabelRepoPool: poolKeyOf(repo)}); err != nil {
		return "", fmt.Errorf("list the repository's jobs: %w", err)
	}
	for _, j := range jobs.Items {
		if _, done := jobwatch.Finished(&j); !done {
			return j.Namespace + "/" + j.Name, nil
		}
	}
	return "", nil
}

func poolKeyOf(repo *repository.Object) string {
	return repository.PoolKey(repo.Ref.Kind, repo.Namespace, repo.Ref.Name)
}

// clusterID is the kube-system namespace's UID: what tells this cluster's
// default maintenance owner from another's.
func (f *Function) clusterID(ctx context.Context) (string, error) {
	var ns corev1.Namespace
	if err := f.Client.Get(ctx, client.ObjectKey{Name: metav1.NamespaceSystem}, &ns); err != nil {
		return "", fmt.Errorf("read namespace kube-system for the default maintenance owner: %w", err)
	}
	return string(ns.UID), nil
}

// recordStorage copies what a counted full run found its storage holding
// afterwards onto the repository's status (storedBytes, blobCount), so
// the repository says what it costs and the exporter can tell storage
// that grows while snapshots go. A redelivered older run never overwrites
// a newer count.
func (f *Function) recordStorage(ctx context.Context, m *snapv1.Maintenance, run *snapv1.MaintenanceRun) error {
	if run.Mode != kopia.MaintainFull || run.Phase != mover.MaintenanceSucceeded || run.BytesAfter == nil || run.BlobsAfter == nil || run.CompletedAt == nil {
		return nil
	}
	// The completion time comes from the mover's pod; a clock ahead must
	// not pin the count against every later run.
	at := *run.CompletedAt
	if now := metav1.NewTime(f.now()); now.Before(&at) {
		at = now
	}
	mutate := func(st *snapv1.RepositoryStatus) error {
		if ss := st.StorageStats; ss != nil && ss.StoredObservedAt != nil && !ss.StoredObservedAt.Before(&at) {
			return statuspatch.Skip
		}
		ss := snapv1.StorageStats{}
		if st.StorageStats != nil {
			ss = *st.StorageStats
		}
		ss.StoredBytes, ss.BlobCount, ss.ReclaimableBytes, ss.StoredObservedAt = run.BytesAfter, run.BlobsAfter, run.ReclaimableBytes, &at
		st.StorageStats = &ss
		return nil
	}
	// Only a Maintenance that may maintain the repository speaks for its
	// storage: status is not proof a run happened here.
	repo, why, err := f.repository(ctx, m, nil)
	if err != nil || why != "" {
		return err
	}
	if created := repo.Obj.GetCreationTimestamp(); run.StartedAt == nil || run.StartedAt.Before(&created) {
		return nil // counted on a repository of this name that is gone
	}
	if repo.Ref.Kind == snapv1.KindClusterRepository {
		return statuspatch.Update(ctx, f.Client, client.ObjectKey{Name: repo.Ref.Name}, func() *snapv1.ClusterRepository { return &snapv1.ClusterRepository{} },
			func(r *snapv1.ClusterRepository) error {
				if r.UID != repo.Obj.GetUID() {
					return statuspatch.Skip
				}
				return mutate(&r.Status)
			})
	}
	return statuspatch.Update(ctx, f.Client, client.ObjectKey{Namespace: repo.Namespace, Name: repo.Ref.Name}, func() *snapv1.Repository { return &snapv1.Repository{} },
		func(r *snapv1.Repository) error {
			if r.UID != repo.Obj.GetUID() {
				return statuspatch.Skip
			}
			return mutate(&r.Status)
		})
}
