// Package verify is the verification function: on each tick it checks
// every SnapshotPolicy with spec.verification and, per repository and tier,
// starts a mover Job when the tier is due. A tier waits until the policy has
// a finished backup in that repository, then catches up at once; an
// annotation asks for a run outside the schedule. The mover writes the
// outcome onto the policy's status; this function only starts runs and
// settles those whose mover died without reporting.
package verify

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
	"github.com/snapflow/snapflow/functions/snapshot"
	"github.com/snapflow/snapflow/internal/jobwatch"
	"github.com/snapflow/snapflow/internal/mover"
	"github.com/snapflow/snapflow/internal/privilege"
	"github.com/snapflow/snapflow/internal/projection"
	"github.com/snapflow/snapflow/internal/repository"
	"github.com/snapflow/snapflow/internal/schedule"
	"github.com/snapflow/snapflow/internal/statuspatch"
	"github.com/snapflow/snapflow/internal/validate"
	kernel "github.com/snapflow/snapflow/internal/verify"
)

// Function is the verification function's configuration and ports.
type Function struct {
	Client              client.Client
	Namespace           string
	MoverImage          string
	MoverServiceAccount string
	Recorder            record.EventRecorder
	// Emitter sends dev.snapflow.verification.failed when a run fails.
	Emitter host.Emitter
	Now     func() time.Time
}

func (f *Function) now() time.Time { return host.Now(f.Now) }

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
		case gk.Group == snapv1.GroupVersion.Group && gk.Kind == "SnapshotPolicy":
			return f.Reconcile(ctx, ref.Namespace, ref.Name)
		case gk.Group == snapv1.GroupVersion.Group && gk.Kind == "Snapshot":
			// A finished backup may open a tier's gate.
			var s snapv1.Snapshot
			if err := f.Client.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, &s); err != nil {
				return client.IgnoreNotFound(err)
			}
			if p := s.Labels[wellknown.LabelConfig]; p != "" && s.Status.Phase.IsTerminal() {
				return f.Reconcile(ctx, s.Namespace, p)
			}
		case gk.Group == "batch" && gk.Kind == "Job":
			var j batchv1.Job
			if err := f.Client.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, &j); err != nil {
				return client.IgnoreNotFound(err)
			}
			if p := j.Labels[wellknown.LabelVerify]; p != "" {
				return f.Reconcile(ctx, j.Namespace, p)
			}
		}
		return nil
	}
	return fmt.Errorf("%w: the verify function handles ApiServerSource, %s and %s events, not %q", events.ErrUnsupported, events.Resync, events.Ping, e.Type())
}

// Resync reconciles every policy that asks for verification.
func (f *Function) Resync(ctx context.Context) error {
	var list snapv1.SnapshotPolicyList
	if err := f.Client.List(ctx, &list); err != nil {
		return fmt.Errorf("list snapshot policies: %w", err)
	}
	var errs []error
	for _, p := range list.Items {
		if p.Spec.Verification != nil {
			errs = append(errs, f.Reconcile(ctx, p.Namespace, p.Name))
		}
	}
	return errors.Join(errs...)
}

// Reconcile checks one policy's tiers in each of its repositories.
func (f *Function) Reconcile(ctx context.Context, ns, name string) error {
	var p snapv1.SnapshotPolicy
	if err := f.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &p); err != nil {
		return client.IgnoreNotFound(err)
	}
	v := p.Spec.Verification
	if v == nil || (v.Quick == nil && v.Deep == nil) || p.DeletionTimestamp != nil || p.Spec.Suspend {
		return nil
	}
	paused, _, err := repository.SuspendedRepositories(ctx, f.Client, &p)
	if err != nil {
		return err
	}
	requested, err := requestedAt(&p)
	if err != nil {
		if f.Recorder != nil {
			f.Recorder.Event(&p, corev1.EventTypeWarning, "InvalidVerifyRequest", err.Error())
		}
		requested = nil
	}
	latest, err := f.latestBackups(ctx, &p)
	if err != nil {
		return err
	}
	var errs []error
	if repository.ProjectionEnabled(p.Spec.CredentialProjection) {
		// Credentials copied for finished verify Jobs go now.
		errs = append(errs, projection.Sweep(ctx, f.Client, p.Namespace, f.now()))
	}
	for _, ref := range validate.PolicyRefs(&p) {
		ref = ref.Qualified(p.Namespace)
		if slices.Contains(paused, validate.RepoKey(ref, p.Namespace)) {
			continue // a suspended repository is not read
		}
		for _, tier := range []string{kernel.Quick, kernel.Deep} {
			if (tier == kernel.Quick && v.Quick == nil) || (tier == kernel.Deep && v.Deep == nil) {
				continue
			}
			errs = append(errs, f.tier(ctx, &p, ref, tier, latest[validate.RepoKey(ref, p.Namespace)], requested))
		}
	}
	return errors.Join(errs...)
}

// tier starts or settles one tier's run in one repository.
func (f *Function) tier(ctx context.Context, p *snapv1.SnapshotPolicy, ref snapv1.RepositoryRef, tier string, latest *snapv1.Snapshot, requested *time.Time) error {
	log := host.Log(ctx).WithValues("policy", p.Namespace+"/"+p.Name, "tier", tier, "repository", validate.RepoKey(ref, p.Namespace))
	run := findRun(p, ref, tier)
	if run != nil && run.Phase == phaseRunning {
		return f.observe(ctx, p, ref, tier, run)
	}
	if latest == nil {
		return nil // gated: nothing to verify until a backup exists
	}
	repo, err := repository.Get(ctx, f.Client, f.Namespace, ref, p.Namespace)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	spec, err := tierSchedule(p, tier, repo)
	if err != nil {
		return f.record(ctx, p, ref, tier, func(r *snapv1.VerificationRun) {
			r.Phase, r.Message = phaseFailed, fmt.Sprintf("the %s verification schedule is invalid: %v", tier, err)
		})
	}
	var last *time.Time
	if run != nil {
		last = &run.Slot.Time
	}
	d, err := kernel.Due(spec, last, requested, f.now())
	if err != nil || !d.Due {
		return err
	}
	if repo.Status.Phase != snapv1.RepositoryReady {
		log.Info("verification due but the repository is not Ready; waiting", "phase", repo.Status.Phase)
		return nil
	}
	job, cm, err := f.build(ctx, p, ref, tier, latest, repo, d.Slot)
	if err != nil && !errors.Is(err, privilege.ErrNotPermitted) {
		return err // the namespace could not be read: the next event retries
	}
	if err == nil {
		if msg := repository.CopyRefused(ctx, f.Client, repo, p.Namespace, repository.ProjectionEnabled(p.Spec.CredentialProjection), "SnapshotPolicy "+p.Name); msg != "" {
			err = errors.New(msg)
		}
	}
	if err == nil {
		if err = projection.Apply(ctx, f.Client, job, repo.Homes(), true, ""); err != nil && !errors.Is(err, projection.ErrSource) {
			return err // transient: the next event retries
		}
	}
	if err != nil {
		return f.record(ctx, p, ref, tier, func(r *snapv1.VerificationRun) {
			r.Slot, r.Phase, r.Message = metav1.NewTime(d.Slot), phaseFailed, err.Error()
		})
	}
	if err := host.CreateWorkSpec(ctx, f.Client, cm); err != nil {
		return err
	}
	if err := f.Client.Create(ctx, job); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create the verify job: %w", err)
	}
	log.Info("verification started", "job", job.Name, "slot", d.Slot, "reason", d.Reason, "snapshot", latest.Status.Snapshot.KopiaSnapshotID)
	return f.record(ctx, p, ref, tier, func(r *snapv1.VerificationRun) {
		r.Slot, r.Phase, r.Job = metav1.NewTime(d.Slot), phaseRunning, job.Name
		r.KopiaSnapshotID, r.CompletedAt, r.Files, r.Bytes, r.Errors = latest.Status.Snapshot.KopiaSnapshotID, nil, nil, nil, nil
		r.Message = fmt.Sprintf("%s verification of kopia snapshot %s started (%s)", tier, latest.Status.Snapshot.KopiaSnapshotID, d.Reason)
	})
}

// observe writes the result a finished verify mover reported, and settles
// a run whose mover ended without reporting.
func (f *Function) observe(ctx context.Context, p *snapv1.SnapshotPolicy, ref snapv1.RepositoryRef, tier string, run *snapv1.VerificationRun) error {
	var j batchv1.Job
	err := f.Client.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: run.Job}, &j)
	if err == nil && !host.Owned(&j, p) {
		// the run's Job name is in status, which movers write
		err = apierrors.NewNotFound(batchv1.Resource("jobs"), run.Job)
	}
	msg := ""
	switch {
	case apierrors.IsNotFound(err):
		msg = fmt.Sprintf("the verify job %s disappeared before reporting", run.Job)
	case err != nil:
		return err
	default:
		if c, done := jobwatch.Finished(&j); done {
			why, err := jobwatch.ApplyReport(ctx, f.Client, &j, p.UID, mover.OpVerify)
			if err != nil {
				return err
			}
			if why == "" {
				return f.announce(ctx, p, ref, tier, run.Job)
			}
			msg = fmt.Sprintf("the verify job %s ended (%s) without a result (%s): %s %s", j.Name, c.Reason, why, c.Message, jobwatch.PodMessage(ctx, f.Client, &j))
		} else if wedged, why := jobwatch.Wedged(ctx, f.Client, &j, f.now()); wedged {
			_ = f.Client.Delete(ctx, &j, client.PropagationPolicy(metav1.DeletePropagationBackground))
			msg = why
		}
	}
	if msg == "" {
		return nil
	}
	// Re-read: the mover may have reported between our read and now.
	return f.record(ctx, p, ref, tier, func(r *snapv1.VerificationRun) {
		if r.Phase != phaseRunning || r.Job != run.Job {
			return
		}
		now := metav1.NewTime(f.now())
		r.Phase, r.Message, r.CompletedAt = phaseFailed, msg, &now
	})
}

const (
	phaseRunning = "Running"
	phaseFailed  = "Failed"
)

func findRun(p *snapv1.SnapshotPolicy, ref snapv1.RepositoryRef, tier string) *snapv1.VerificationRun {
	key := validate.RepoKey(ref, p.Namespace)
	for i := range p.Status.VerificationRuns {
		r := &p.Status.VerificationRuns[i]
		if r.Tier == tier && validate.RepoKey(r.Repository, p.Namespace) == key {
			return r
		}
	}
	return nil
}

// record updates (or adds) one run entry and the Verified condition.
func (f *Function) record(ctx context.Context, p *snapv1.SnapshotPolicy, ref snapv1.RepositoryRef, tier string, mutate func(*snapv1.VerificationRun)) error {
	var failed *snapv1.VerificationRun
	err := statuspatch.Update(ctx, f.Client, client.ObjectKeyFromObject(p), func() *snapv1.SnapshotPolicy { return &snapv1.SnapshotPolicy{} },
		func(live *snapv1.SnapshotPolicy) error {
			if live.UID != p.UID {
				return statuspatch.Skip
			}
			r := findRun(live, ref, tier)
			if r == nil {
				live.Status.VerificationRuns = append(live.Status.VerificationRuns, snapv1.VerificationRun{Tier: tier, Repository: ref})
				r = &live.Status.VerificationRuns[len(live.Status.VerificationRuns)-1]
			}
			before := *r.DeepCopy()
			mutate(r)
			failed = nil
			if r.Phase == phaseFailed && before.Phase != phaseFailed {
				meta.SetStatusCondition(&live.Status.Conditions, metav1.Condition{Type: wellknown.ConditionVerified, Status: metav1.ConditionFalse,
					Reason: "VerificationFailed", Message: r.Message, ObservedGeneration: live.Generation})
				failed = r.DeepCopy()
			}
			*p = *live.DeepCopy()
			return nil
		})
	if err != nil || failed == nil {
		return err
	}
	f.tellFailed(ctx, p, failed)
	return nil
}

// announce tells of a run the mover reported as failed: the report is
// applied to status by the mover's reporter, so the function re-reads the
// run it observed (same Job) and sends the Kubernetes Event and the
// CloudEvent a failure recorded by the function itself gets.
func (f *Function) announce(ctx context.Context, p *snapv1.SnapshotPolicy, ref snapv1.RepositoryRef, tier, job string) error {
	var live snapv1.SnapshotPolicy
	if err := f.Client.Get(ctx, client.ObjectKeyFromObject(p), &live); err != nil {
		return client.IgnoreNotFound(err)
	}
	r := findRun(&live, ref, tier)
	if live.UID != p.UID || r == nil || r.Job != job || r.Phase != phaseFailed {
		return nil
	}
	f.tellFailed(ctx, &live, r)
	return nil
}

// tellFailed records the Warning Event and sends the CloudEvent of a
// failed run, once its failure is stored (not on a status write's retry).
// A sink that cannot be reached loses the CloudEvent; the condition, the
// metrics and the Kubernetes Event still say it.
func (f *Function) tellFailed(ctx context.Context, p *snapv1.SnapshotPolicy, r *snapv1.VerificationRun) {
	if f.Recorder != nil {
		f.Recorder.Event(p, corev1.EventTypeWarning, "VerificationFailed", r.Message)
	}
	if err := f.emitFailed(ctx, p, r); err != nil {
		host.Log(ctx).Error(err, "could not send the verification failed event", "policy", p.Namespace+"/"+p.Name)
	}
}

// emitFailed sends dev.snapflow.verification.failed for one failed run. Its
// id names the policy, tier, repository and slot, so a retry is the same
// event and the next run's failure a new one.
func (f *Function) emitFailed(ctx context.Context, p *snapv1.SnapshotPolicy, r *snapv1.VerificationRun) error {
	if f.Emitter == nil {
		return nil
	}
	repo := validate.RepoKey(r.Repository, p.Namespace)
	slot := r.Slot.UTC().Format(time.RFC3339)
	data := events.VerificationFailedData{Namespace: p.Namespace, Policy: p.Name, UID: string(p.UID), Tier: r.Tier, Repository: repo,
		Slot: slot, KopiaSnapshotID: r.KopiaSnapshotID, Job: r.Job, Message: r.Message}
	e, err := events.New(fmt.Sprintf("%s/verification-failed/%s/%s/%s", p.UID, r.Tier, repo, slot), events.VerificationFailed, p.Namespace+"/"+p.Name, data)
	if err != nil {
		return err
	}
	return f.Emitter.Emit(ctx, e)
}

// requestedAt reads the verify-requested annotation.
func requestedAt(p *snapv1.SnapshotPolicy) (*time.Time, error) {
	v := p.Annotations[wellknown.AnnotationVerifyRequested]
	if v == "" {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return nil, fmt.Errorf("annotation %s=%q is not an RFC3339 time (e.g. %s); the request is ignored", wellknown.AnnotationVerifyRequested, v, time.Now().UTC().Format(time.RFC3339))
	}
	return &t, nil
}

// latestBackups finds, per repository key, the newest finished Snapshot of
// the policy that holds a kopia snapshot.
func (f *Function) latestBackups(ctx context.Context, p *snapv1.SnapshotPolicy) (map[string]*snapv1.Snapshot, error) {
	var list snapv1.SnapshotList
	if err := f.Client.List(ctx, &list, client.InNamespace(p.Namespace), client.MatchingLabels{wellknown.LabelConfig: p.Name}); err != nil {
		return nil, fmt.Errorf("list the Snapshots of %s: %w", p.Name, err)
	}
	out := map[string]*snapv1.Snapshot{}
	taken := snapshot.TakenAt
	for i := range list.Items {
		s := &list.Items[i]
		if !snapshot.HasData(s) || s.Status.Resolved == nil || s.Status.Resolved.Repository == nil {
			continue
		}
		key := validate.RepoKey(*s.Status.Resolved.Repository, s.Namespace)
		if cur := out[key]; cur == nil || taken(s).After(taken(cur)) || (taken(s).Equal(taken(cur)) && s.Name > cur.Name) {
			out[key] = s
		}
	}
	return out, nil
}

// tierSchedule resolves a tier's cron with the repository's timezone and
// jitter defaults; nil when the tier has no schedule (request-only).
func tierSchedule(p *snapv1.SnapshotPolicy, tier string, repo *repository.Object) (*schedule.Spec, error) {
	var cs snapv1.CronSpec
	switch v := p.Spec.Verification; tier {
	case kernel.Quick:
		switch {
		case v.Quick.Schedule != nil:
			cs = *v.Quick.Schedule
		case v.Quick.Cron != "":
			cs = snapv1.CronSpec{Cron: v.Quick.Cron, Jitter: v.Quick.Jitter, Timezone: v.Quick.Timezone}
		default:
			return nil, nil
		}
	case kernel.Deep:
		cs = v.Deep.Schedule
	}
	if cs.Cron == "" {
		return nil, nil
	}
	var defaults []schedule.Defaults
	if sd := repo.Spec.ScheduleDefaults; sd != nil {
		defaults = append(defaults, schedule.Defaults{Timezone: sd.Timezone, Jitter: sd.Jitter})
	}
	res, err := schedule.Resolve(cs.Cron, cs.Timezone, cs.Jitter, defaults, p.Namespace+"/"+p.Name+"/"+tier, string(p.UID)+"/"+tier)
	if err != nil {
		return nil, err
	}
	return &res.Spec, nil
}
