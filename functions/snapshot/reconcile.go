package snapshot

import (
	"context"
	"errors"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/events"
	"github.com/snapflow/snapflow/functions/host"
	"github.com/snapflow/snapflow/internal/conditions"
	"github.com/snapflow/snapflow/internal/execgrant"
	"github.com/snapflow/snapflow/internal/jobwatch"
	"github.com/snapflow/snapflow/internal/kopia"
	"github.com/snapflow/snapflow/internal/mover"
	"github.com/snapflow/snapflow/internal/moverjob"
	"github.com/snapflow/snapflow/internal/privilege"
	"github.com/snapflow/snapflow/internal/projection"
	"github.com/snapflow/snapflow/internal/repository"
	"github.com/snapflow/snapflow/internal/statuspatch"
	"github.com/snapflow/snapflow/internal/validate"
	"github.com/snapflow/snapflow/internal/volumepolicy"
)

// Reasons on the Snapshot's conditions.
const (
	ReasonWaitingForRepository = wellknown.ReasonWaitingForRepository
	ReasonWaitingForSlot       = "WaitingForSlot"
	ReasonSlotAcquired         = "SlotAcquired"
	ReasonInvalidSpec          = wellknown.ReasonFailedValidation
	ReasonStaging              = "Staging"
	ReasonMoverStarted         = "MoverStarted"
	ReasonMoverPodWedged       = "MoverPodWedged"
	// ReasonMoverCannotStart: a repository's bootstrap pod waits on something to fix.
	ReasonMoverCannotStart = "MoverCannotStart"
	ReasonNotPermitted     = wellknown.ReasonPrivilegedMoverNotPermitted
	ReasonSourceNotFound   = "SourceNotFound"
	ReasonSourceNotBound   = "SourceNotBound"
	// ReasonSourceInUse: copyMethod Direct on a ReadWriteOncePod claim a
	// running pod holds; no second pod can mount it.
	ReasonSourceInUse       = "SourceInUse"
	ReasonIdentityCollision = wellknown.ReasonIdentityCollision
	// ReasonRunningHooks: a beforeSnapshot hook (a runJob) is still running.
	ReasonRunningHooks = "RunningHooks"
	// ReasonGroupHooks: a member of a cut VolumeGroupSnapshot runs no hooks;
	// they ran once, in the member that cut it.
	ReasonGroupHooks = "HooksRanForGroup"
	// ReasonGlobalSectionsIgnored: the global volume policies carry
	// sections other than volumePolicies, which never apply.
	ReasonGlobalSectionsIgnored = "GlobalVolumePolicySectionsIgnored"
	ReasonRepositoryReclaiming  = wellknown.ReasonRepositoryReclaiming
)

// notOurs says the snapshot function leaves s alone: its deletion is the
// cleanup function's, an unknown phase is a newer snapflow's, and a
// Snapshot without a policy has nothing to run.
func notOurs(s *snapv1.Snapshot) bool {
	return s.DeletionTimestamp != nil || !s.Status.Phase.IsKnown() || s.Spec.PolicyRef == nil
}

// ReconcileSnapshot moves one Snapshot forward by at most one step per call
// kind: resolve, stage, start the mover, observe the end, finalize.
func (f *Function) ReconcileSnapshot(ctx context.Context, ns, name string) error {
	var s snapv1.Snapshot
	if err := f.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &s); err != nil {
		return client.IgnoreNotFound(err)
	}
	if notOurs(&s) {
		return nil
	}
	if s.Status.Phase.IsTerminal() {
		if s.Status.Phase == snapv1.SnapshotDiscovered || finalized(&s) {
			return f.syncPin(ctx, &s)
		}
		return f.finalize(ctx, &s)
	}
	if why, ok := s.Annotations[wellknown.AnnotationCancelRequested]; ok {
		return f.cancel(ctx, &s, why)
	}
	if s.Status.Job != nil && s.Status.Job.Name != "" {
		if err := f.thawCloned(ctx, &s); err != nil {
			// Observing the mover matters more; the next event thaws.
			host.Log(ctx).Error(err, "could not resume the workload of a cloned run yet", "snapshot", s.Namespace+"/"+s.Name)
		}
		return f.observeJob(ctx, &s)
	}
	if pol, err := f.policyOf(ctx, &s); err != nil {
		return err
	} else if pol != nil && needsExpansion(&s, pol) {
		return f.hold(ctx, &s, gate{cond: wellknown.ConditionReady, reason: ReasonInvalidSpec, fatal: true,
			message: fmt.Sprintf("SnapshotPolicy %s expands to several (PVC, repository) pairs, so a Snapshot must pin spec.source and/or spec.repository; run `snapflow snapshot now --policy %s` or send a %s event to expand it", pol.Name, pol.Name, events.SnapshotRequested)})
	}
	return f.start(ctx, &s)
}

// policyOf reads the Snapshot's policy, or nil when it does not exist (the
// run then waits with a condition saying so).
func (f *Function) policyOf(ctx context.Context, s *snapv1.Snapshot) (*snapv1.SnapshotPolicy, error) {
	ns := s.Namespace
	if s.Spec.PolicyRef.Namespace != "" {
		ns = s.Spec.PolicyRef.Namespace
	}
	var p snapv1.SnapshotPolicy
	if err := f.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: s.Spec.PolicyRef.Name}, &p); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return &p, nil
}

// start resolves the run, checks the gates and creates the mover Job.
func (f *Function) start(ctx context.Context, s *snapv1.Snapshot) error {
	log := host.Log(ctx).WithValues("snapshot", s.Namespace+"/"+s.Name)
	plan, problem, err := f.plan(ctx, s)
	if err != nil {
		return err
	}
	if problem != nil {
		return f.hold(ctx, s, *problem)
	}
	// A run holding a slot claim of this repository is past its gates and
	// may be in its hooks with the workload frozen: it goes on. Only the
	// privilege gate and a reclaiming maintenance still stop it.
	claim := claimOf(s)
	claimed := claim != nil && claim.Pool == poolKey(plan.repo)
	if !claimed && plan.repo.Spec.Suspend {
		return f.hold(ctx, s, gate{cond: wellknown.ConditionReady, reason: wellknown.ReasonRepositorySuspended,
			message: fmt.Sprintf("%s is suspended (spec.suspend: true); this run starts once it is resumed", plan.repo.Key())})
	}
	if plan.skip {
		return f.skipRun(ctx, s, plan)
	}
	// Gates, in order: repository ready, preflight checks, mover permitted,
	// no reclaiming maintenance, a slot free.
	if !claimed && plan.repo.Status.Phase != snapv1.RepositoryReady {
		msg := fmt.Sprintf("waiting for %s to be Ready (phase %q)", plan.repo.Key(), plan.repo.Status.Phase)
		if c := meta.FindStatusCondition(plan.repo.Status.Conditions, wellknown.ConditionReady); c != nil && c.Message != "" {
			msg += ": " + c.Message
		}
		return f.hold(ctx, s, gate{cond: wellknown.ConditionReady, reason: ReasonWaitingForRepository, message: msg})
	}
	if !claimed {
		if held, err := f.preflightHolds(ctx, s, plan); held || err != nil {
			return err
		}
	}
	// Before hooks or staging: a refused run must not freeze the app.
	if err := host.Permit(ctx, f.Client, s.Namespace, plan.escalations); errors.Is(err, privilege.ErrNotPermitted) {
		return f.hold(ctx, s, gate{cond: wellknown.ConditionMoverPermitted, reason: ReasonNotPermitted, message: err.Error()})
	} else if err != nil {
		return err
	}
	plan.privilegedAllowed = len(plan.escalations) > 0
	jobName := moverjob.Name(s.Name, string(s.UID))
	var existing batchv1.Job
	err = f.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: jobName}, &existing)
	switch {
	case err == nil && isMoverJob(&existing, s):
		// A duplicate event raced us past the status write: adopt the Job.
		return f.markStarted(ctx, s, plan, jobName)
	case err == nil:
		return f.failRun(ctx, s, "MoverJobNameTaken", fmt.Sprintf("job %s, which is not this Snapshot's mover, has the name its mover Job needs; delete it and create a new Snapshot", jobName), "")
	case !apierrors.IsNotFound(err):
		return err
	}
	if held, msg, err := f.reclaiming(ctx, plan.repo); err != nil {
		return err
	} else if held {
		log.Info("parked: the repository is being reclaimed", "message", msg)
		return f.hold(ctx, s, gate{cond: wellknown.ConditionReady, reason: ReasonRepositoryReclaiming, message: msg})
	}
	// Claim the slot before the hooks freeze the workload, so a frozen run
	// is never parked and the caps hold while runs are in their hooks.
	if !claimed {
		held, msg, err := f.takeSlot(ctx, s, plan)
		if err != nil {
			return err
		}
		if held {
			log.Info("parked: no repository slot", "message", msg)
			return f.hold(ctx, s, gate{cond: wellknown.ConditionRepositorySlotAvailable, reason: ReasonWaitingForSlot, message: msg})
		}
	}
	if frozen, err := f.beforeHooks(ctx, s, plan); err != nil || !frozen {
		return err
	}
	ready, err := f.stage(ctx, s, plan)
	if err != nil || !ready {
		return err
	}
	// A cancel or another outcome may have landed while this delivery ran
	// the hooks and staged: no mover starts for a run that has ended.
	var live snapv1.Snapshot
	if err := f.Client.Get(ctx, client.ObjectKeyFromObject(s), &live); err != nil {
		return client.IgnoreNotFound(err)
	}
	if _, cancelled := live.Annotations[wellknown.AnnotationCancelRequested]; cancelled || live.Status.Phase.IsTerminal() || live.UID != s.UID {
		return nil
	}
	if err := f.createJob(ctx, s, plan, jobName); errors.Is(err, projection.ErrSource) {
		return f.failRun(ctx, s, kopia.ClassInvalidConfig, err.Error(), "")
	} else if errors.Is(err, moverjob.ErrSourceInUse) {
		return f.failRun(ctx, s, ReasonSourceInUse, err.Error(), "")
	} else if errors.Is(err, privilege.ErrNotPermitted) {
		return f.hold(ctx, s, gate{cond: wellknown.ConditionMoverPermitted, reason: ReasonNotPermitted, message: err.Error()})
	} else if errors.Is(err, execgrant.ErrGrant) {
		return f.hold(ctx, s, gate{cond: wellknown.ConditionMoverPermitted, reason: ReasonExecNotGranted, message: err.Error()})
	} else if err != nil {
		return err
	}
	log.Info("mover job created", "job", jobName)
	if plan.ignoredGlobal != "" && f.Recorder != nil {
		// Once per run, as Velero warns once per Backup.
		f.Recorder.Event(s, corev1.EventTypeWarning, ReasonGlobalSectionsIgnored, plan.ignoredGlobal)
	}
	if c := plan.inheritCondition(s.Generation); c != nil && c.Status == metav1.ConditionFalse && f.Recorder != nil {
		f.Recorder.Event(s, corev1.EventTypeWarning, c.Reason, c.Message)
	}
	return f.markStarted(ctx, s, plan, jobName)
}

// gate is a reason a run cannot start yet (or, when fatal, ever).
type gate struct {
	cond, reason, message string
	fatal                 bool
}

// hold records why a run waits (Pending) or fails validation (Failed).
func (f *Function) hold(ctx context.Context, s *snapv1.Snapshot, g gate) error {
	return f.updateStatus(ctx, s, func(st *snapv1.SnapshotStatus, gen int64) {
		frozen := quiesced(st)
		pending(st, s)
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: g.cond, Status: metav1.ConditionFalse, Reason: g.reason, Message: g.message, ObservedGeneration: gen})
		if c := meta.FindStatusCondition(st.Conditions, wellknown.ConditionRepositorySlotAvailable); c != nil && c.Reason == ReasonSlotClaimed && !frozen {
			// A run waiting for something else gives its slot back, unless
			// its hooks may have frozen the workload.
			meta.RemoveStatusCondition(&st.Conditions, wellknown.ConditionRepositorySlotAvailable)
		}
		if g.fatal {
			st.Phase = snapv1.SnapshotFailed
			st.Failure = &snapv1.Failure{Class: g.reason, Message: g.message}
			meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: wellknown.ConditionStalled, Status: metav1.ConditionTrue, Reason: g.reason, Message: g.message, ObservedGeneration: gen})
		}
		if g.cond != wellknown.ConditionReady {
			meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: wellknown.ConditionReady, Status: metav1.ConditionFalse, Reason: g.reason, Message: g.message, ObservedGeneration: gen})
		}
	})
}

// pending marks a run that has not started yet: Pending, with its origin.
func pending(st *snapv1.SnapshotStatus, s *snapv1.Snapshot) {
	if st.Phase == "" {
		st.Phase = snapv1.SnapshotPending
	}
	if st.Origin == "" {
		st.Origin = originOf(s)
	}
}

func originOf(s *snapv1.Snapshot) snapv1.Origin {
	o, _ := validate.Origin(s)
	return o
}

func (f *Function) markStarted(ctx context.Context, s *snapv1.Snapshot, p *runPlan, jobName string) error {
	ended := false
	err := f.updateStatus(ctx, s, func(st *snapv1.SnapshotStatus, gen int64) {
		if ended = st.Phase.IsTerminal() && st.Job == nil; ended {
			return // cancelled or failed while its Job was being made
		}
		if !st.Phase.IsTerminal() && st.Phase != snapv1.SnapshotRunning {
			st.Phase = snapv1.SnapshotRunning
		}
		if st.Origin == "" {
			st.Origin = originOf(s)
		}
		st.ObservedGeneration = gen
		st.Job = &snapv1.JobRef{Name: jobName, Attempts: 1}
		st.Resolved = p.resolved()
		st.Recorded = p.recorded()
		st.VolumePolicies = []snapv1.VolumePolicyDecision{p.decision}
		for _, c := range []string{wellknown.ConditionRepositorySlotAvailable, wellknown.ConditionMoverPermitted} {
			meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: c, Status: metav1.ConditionTrue, Reason: ReasonSlotAcquired, Message: "the mover job " + jobName + " was created", ObservedGeneration: gen})
		}
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: wellknown.ConditionReady, Status: metav1.ConditionFalse, Reason: ReasonMoverStarted, Message: "backup in progress (job " + jobName + ")", ObservedGeneration: gen})
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: wellknown.ConditionStalled, Status: metav1.ConditionFalse, Reason: ReasonMoverStarted, ObservedGeneration: gen})
		// A pinned identity keeps the condition that named its pod.
		if c := p.inheritCondition(gen); c != nil && (p.workload == nil || !p.workload.Pinned) {
			meta.SetStatusCondition(&st.Conditions, *c)
		}
	})
	if err != nil || !ended {
		return err
	}
	// Nobody would watch this mover: stop it.
	host.Log(ctx).Info("stopping a mover created for a run that had ended", "snapshot", s.Namespace+"/"+s.Name, "job", jobName)
	if err := f.stopMover(ctx, s); err != nil {
		return err
	}
	return f.revokeExec(ctx, s)
}

// revokeExec ends a stream run's exec grant, found under the run's fixed
// name (never one read from status).
func (f *Function) revokeExec(ctx context.Context, s *snapv1.Snapshot) error {
	return execgrant.Revoke(ctx, f.Client, s.Namespace, moverjob.Name(s.Name, string(s.UID)))
}

// updateStatus re-reads the Snapshot and writes mutate's change; s is
// refreshed with what was written.
func (f *Function) updateStatus(ctx context.Context, s *snapv1.Snapshot, mutate func(*snapv1.SnapshotStatus, int64)) error {
	return statuspatch.Update(ctx, f.Client, client.ObjectKeyFromObject(s), func() *snapv1.Snapshot { return &snapv1.Snapshot{} },
		func(live *snapv1.Snapshot) error {
			if live.UID != s.UID {
				return statuspatch.Skip // a new object under the old name
			}
			mutate(&live.Status, live.Generation)
			*s = *live.DeepCopy()
			return nil
		})
}

// observeJob settles a run whose mover ended without reporting (killed,
// never started, out of retries) and fails wedged pods.
func (f *Function) observeJob(ctx context.Context, s *snapv1.Snapshot) error {
	var j batchv1.Job
	err := f.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: s.Status.Job.Name}, &j)
	if err == nil && !isMoverJob(&j, s) {
		// status.job is writable by movers: a Job this Snapshot did not make
		// is neither judged nor deleted.
		err = apierrors.NewNotFound(batchv1.Resource("jobs"), s.Status.Job.Name)
	}
	if apierrors.IsNotFound(err) {
		return f.failRun(ctx, s, "MoverJobMissing", fmt.Sprintf("the mover job %s disappeared before reporting a result; create a new Snapshot to retry", s.Status.Job.Name), "")
	}
	if err != nil {
		return err
	}
	if c, done := jobwatch.Finished(&j); done {
		// The mover's result is in its pod's termination message; without
		// one, it died before it could report.
		why, err := jobwatch.ApplyReport(ctx, f.Client, &j, s.UID, mover.OpSnapshot)
		if err != nil || why == "" {
			return err
		}
		if c.Type == batchv1.JobFailed {
			return f.failRun(ctx, s, "Mover"+c.Reason, fmt.Sprintf("the mover job failed (%s): %s; %s", c.Reason, c.Message, why), jobwatch.PodMessage(ctx, f.Client, &j))
		}
		return f.failRun(ctx, s, "MoverReportedNothing", "the mover job completed without a result for this Snapshot: "+why, jobwatch.PodMessage(ctx, f.Client, &j))
	}
	if wedged, msg := jobwatch.Wedged(ctx, f.Client, &j, f.now()); wedged {
		_ = f.Client.Delete(ctx, &j, client.PropagationPolicy(metav1.DeletePropagationBackground))
		return f.failRun(ctx, s, ReasonMoverPodWedged, msg, "")
	}
	return f.observeProgress(ctx, s, &j)
}

// observeProgress copies the running mover's newest progress line into
// status.progress, at most every mover.ProgressRefresh. Progress is only
// shown: a failure to read or write it is logged, never the event's error.
func (f *Function) observeProgress(ctx context.Context, s *snapv1.Snapshot, j *batchv1.Job) error {
	if s.Status.Phase != snapv1.SnapshotRunning {
		return nil
	}
	p, ok := jobwatch.Progress(ctx, f.Client, f.Logs, j, f.now())
	if !ok || (s.Status.Progress != nil && !p.Replaces(s.Status.Progress.ObservedAt)) {
		return nil
	}
	err := f.updateStatus(ctx, s, func(st *snapv1.SnapshotStatus, _ int64) {
		if st.Phase != snapv1.SnapshotRunning || st.Job == nil || st.Job.Name != j.Name {
			return
		}
		if st.Progress != nil && !p.Replaces(st.Progress.ObservedAt) {
			return
		}
		st.Progress = p.SnapshotProgress()
	})
	if err != nil {
		host.Log(ctx).Info("progress not recorded", "snapshot", s.Namespace+"/"+s.Name, "error", err.Error())
	}
	return nil
}

// skipRun ends a run whose only volume a volume policy skips: nothing is
// backed up, and the status says which rule decided so.
func (f *Function) skipRun(ctx context.Context, s *snapv1.Snapshot, p *runPlan) error {
	now := metav1.NewTime(f.now())
	return f.updateStatus(ctx, s, func(st *snapv1.SnapshotStatus, gen int64) {
		if st.Phase.IsTerminal() {
			return
		}
		st.Phase = snapv1.SnapshotSucceeded
		if st.Origin == "" {
			st.Origin = originOf(s)
		}
		st.ObservedGeneration = gen
		st.Resolved = p.resolved()
		st.VolumePolicies = []snapv1.VolumePolicyDecision{p.decision}
		st.Timing = &snapv1.Timing{StartTime: &now, EndTime: &now, DurationSeconds: ptr(int64(0))}
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: wellknown.ConditionReconciling, Status: metav1.ConditionFalse, Reason: ReasonSkipped, Message: p.decision.Message, ObservedGeneration: gen})
	})
}

func (f *Function) failRun(ctx context.Context, s *snapv1.Snapshot, class, msg, tail string) error {
	now := metav1.NewTime(f.now())
	return f.updateStatus(ctx, s, func(st *snapv1.SnapshotStatus, gen int64) {
		if st.Phase.IsTerminal() {
			return // the mover reported after all
		}
		st.Phase, st.Progress = snapv1.SnapshotFailed, nil // no longer running
		st.Failure = &snapv1.Failure{Class: class, Message: msg, StderrTail: tail, Retryable: true}
		if tail != "" {
			st.LogTail = tail
		}
		if st.Timing == nil {
			st.Timing = &snapv1.Timing{}
		}
		st.Timing.EndTime = &now
	})
}

// ReasonCancelled: the run was asked to stop (AnnotationCancelRequested).
const ReasonCancelled = "Cancelled"

// Cancelled reports whether the snapshot function ended the run because
// it was asked to stop (status, which the annotation alone cannot write).
func Cancelled(s *snapv1.Snapshot) bool {
	return s.Status.Phase == snapv1.SnapshotFailed && s.Status.Failure != nil && s.Status.Failure.Class == ReasonCancelled
}

// cancel stops a run that was asked to: its mover Job goes (found by the
// name the run gives it, deleted only if the run made it), and the run
// ends Failed, so finalize runs its afterSnapshot hooks on the next event.
func (f *Function) cancel(ctx context.Context, s *snapv1.Snapshot, why string) error {
	if s.Status.Job != nil && s.Status.Job.Name != "" {
		// A mover that already finished has written a kopia snapshot (or
		// failed on its own): its report is taken, not thrown away with
		// the Job, or the data would be in the repository untracked.
		var j batchv1.Job
		if err := f.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: s.Status.Job.Name}, &j); err == nil && host.Owned(&j, s) {
			if _, done := jobwatch.Finished(&j); done {
				return f.observeJob(ctx, s)
			}
			// The mover may have ended with its report before the Job
			// controller marked the Job: stopping it now would throw
			// the report away. The Job's end is an event; it is
			// observed then.
			t, err := jobwatch.Terminated(ctx, f.Client, &j, moverjob.ContainerName)
			if err != nil && !errors.Is(err, mover.ErrReportMismatch) {
				return err
			}
			// No time limit: the mover has written its snapshot, and
			// stopping it would leave that data untracked. Only a Job
			// controller that is down leaves the Job unmarked, and then
			// no Job of the cluster finishes either.
			if t != nil && (t.ExitCode == 0 || t.ExitCode == mover.ExitReported) {
				host.Log(ctx).Info("cancel waits: the mover has already reported", "snapshot", s.Namespace+"/"+s.Name, "exitCode", t.ExitCode)
				return nil
			}
		}
	}
	if h := s.Status.Hooks; h != nil && h.PreCompletedAt == nil {
		for _, r := range h.Results {
			if r.List == ListBefore && r.Running {
				// A beforeSnapshot hook is running (in another delivery, or
				// as a Job): thawing now could come before its freeze. Its
				// end is an event, which cancels then.
				host.Log(ctx).Info("cancel waits for a running beforeSnapshot hook", "snapshot", s.Namespace+"/"+s.Name)
				return nil
			}
		}
	}
	if err := f.stopMover(ctx, s); err != nil {
		return err
	}
	host.Log(ctx).Info("cancelled", "snapshot", s.Namespace+"/"+s.Name, "why", why)
	now := metav1.NewTime(f.now())
	return f.updateStatus(ctx, s, func(st *snapv1.SnapshotStatus, _ int64) {
		if st.Phase.IsTerminal() {
			return
		}
		st.Phase, st.Progress = snapv1.SnapshotFailed, nil
		st.Failure = &snapv1.Failure{Class: ReasonCancelled, Message: "the run was cancelled: " + why}
		if st.Timing == nil {
			st.Timing = &snapv1.Timing{}
		}
		st.Timing.EndTime = &now
	})
}

// stopMover deletes the run's mover Job, if the run made it, with its pod
// (a Job's own default would orphan the pod and leave the mover running).
func (f *Function) stopMover(ctx context.Context, s *snapv1.Snapshot) error {
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: jobNameOf(s)}}
	if _, err := host.DeleteOwned(ctx, f.Client, job, s, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !errors.Is(err, host.ErrNotOwned) {
		return fmt.Errorf("stop the mover Job %s: %w", job.Name, err)
	}
	return nil
}

// finalized says whether the function already published a terminal run.
// Finished reports whether a run has ended and been finalized: its
// afterSnapshot hooks ran and its outcome is published.
func Finished(s *snapv1.Snapshot) bool { return s.Status.Phase.IsTerminal() && finalized(s) }

func finalized(s *snapv1.Snapshot) bool {
	c := meta.FindStatusCondition(s.Status.Conditions, wellknown.ConditionReady)
	return c != nil && c.ObservedGeneration == s.Generation && (c.Reason == string(s.Status.Phase))
}

// finalize publishes a finished run: staged objects go, the CloudEvent and
// a Kubernetes Event go out, and Ready tells the outcome.
func (f *Function) finalize(ctx context.Context, s *snapv1.Snapshot) error {
	// A stream run's right to exec into its workload ends with the run,
	// before the slower cleanup below.
	if err := f.revokeExec(ctx, s); err != nil {
		return err
	}
	if err := f.unstage(ctx, s); err != nil {
		return err
	}
	if err := f.releaseGroup(ctx, s); err != nil {
		return err
	}
	if waiting, err := f.afterHooks(ctx, s, nil, false); err != nil || waiting {
		return err
	}
	if s.Status.Job != nil {
		// The work spec is named for the run, not taken from status (which
		// movers write), and deleted only if this Snapshot made it.
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: moverjob.Name(s.Name, string(s.UID))}}
		if err := deleteIfOwned(ctx, f.Client, cm, s, "work-spec ConfigMap"); err != nil {
			return err
		}
	}
	if s.Status.Job == nil {
		// A run that failed after its copies were made but before its Job
		// was recorded leaves them under the Job's deterministic name.
		if err := projection.Reap(ctx, f.Client, s.Namespace, jobNameOf(s)); err != nil {
			return err
		}
	} else if err := f.reapProjection(ctx, s); err != nil {
		return err
	}
	if err := f.emitResult(ctx, s); err != nil {
		return err
	}
	phase := s.Status.Phase
	status, msg := metav1.ConditionTrue, "backup finished"
	if s.Status.Snapshot != nil && s.Status.Snapshot.KopiaSnapshotID != "" {
		msg = "kopia snapshot " + s.Status.Snapshot.KopiaSnapshotID
	} else if vp := s.Status.VolumePolicies; len(vp) == 1 && vp[0].Action == volumepolicy.Skip {
		msg = "nothing backed up: " + vp[0].Message
	}
	evType := corev1.EventTypeNormal
	if phase == snapv1.SnapshotFailed {
		status, evType = metav1.ConditionFalse, corev1.EventTypeWarning
		msg = "backup failed"
		if fl := s.Status.Failure; fl != nil {
			msg = fmt.Sprintf("backup failed (%s): %s", fl.Class, fl.Message)
			if fl.RetryHint != "" {
				msg += "; " + fl.RetryHint
			}
		}
	}
	if f.Recorder != nil {
		f.Recorder.Event(s, evType, string(phase), msg)
	}
	return f.updateStatus(ctx, s, func(st *snapv1.SnapshotStatus, gen int64) {
		conditions.Settled(&st.Conditions, string(phase), status == metav1.ConditionTrue, msg, gen)
	})
}

// jobNameOf is the mover Job's name of a run, recorded or not yet.
func jobNameOf(s *snapv1.Snapshot) string {
	if s.Status.Job != nil && s.Status.Job.Name != "" {
		return s.Status.Job.Name
	}
	return moverjob.Name(s.Name, string(s.UID))
}

// reapProjection deletes the credentials copied for the run's mover and
// stamps status.cleanup.credsReapedAt.
func (f *Function) reapProjection(ctx context.Context, s *snapv1.Snapshot) error {
	r := s.Status.Resolved
	if r == nil || !repository.ProjectionEnabled(r.CredentialProjection) || (s.Status.Cleanup != nil && s.Status.Cleanup.CredsReapedAt != nil) {
		return nil
	}
	if err := projection.Reap(ctx, f.Client, s.Namespace, jobNameOf(s)); err != nil {
		return err
	}
	now := metav1.NewTime(f.now())
	return f.updateStatus(ctx, s, func(st *snapv1.SnapshotStatus, _ int64) {
		if st.Cleanup == nil {
			st.Cleanup = &snapv1.CleanupStatus{}
		}
		st.Cleanup.CredsReapedAt = &now
	})
}

// workSpec renders the mover's work spec for a plan.
func (p *runPlan) workSpec(s *snapv1.Snapshot) mover.WorkSpec {
	desc := s.Spec.Description
	if desc == "" {
		desc = "snapflow " + s.Namespace + "/" + s.Name
	}
	w := mover.WorkSpec{
		Operation:  mover.OpSnapshot,
		Target:     mover.Target{Kind: "Snapshot", Namespace: s.Namespace, Name: s.Name, UID: string(s.UID)},
		Repository: p.repoWork,
		Snapshot: &mover.SnapshotWork{
			Source: p.source, Policy: kopia.PolicyFromSpec(&p.policy.Spec), PolicyName: p.policy.Name,
			Tags: s.Spec.Tags, Description: desc, Pin: s.Spec.Pin, Meta: &p.meta,
			CustomParameters: p.custom, Stream: p.exec,
		},
	}
	moverjob.CacheBudgets(&w, p.cache())
	return w
}

// isMoverJob says whether j is the backup mover Job this Snapshot made:
// snapflow's, controlled by s, and labelled for the snapshot operation
// (a hook Job is snapflow's and s's too, but runs its author's spec).
func isMoverJob(j *batchv1.Job, s *snapv1.Snapshot) bool {
	return host.Owned(j, s) && j.Labels[wellknown.LabelOp] == mover.OpSnapshot
}
