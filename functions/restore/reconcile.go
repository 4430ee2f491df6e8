package restore

import (
	"context"
	"errors"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/functions/host"
	"github.com/snapflow/snapflow/functions/snapshot"
	"github.com/snapflow/snapflow/internal/conditions"
	"github.com/snapflow/snapflow/internal/execgrant"
	"github.com/snapflow/snapflow/internal/jobwatch"
	"github.com/snapflow/snapflow/internal/mover"
	"github.com/snapflow/snapflow/internal/moverjob"
	"github.com/snapflow/snapflow/internal/privilege"
	"github.com/snapflow/snapflow/internal/projection"
	"github.com/snapflow/snapflow/internal/repository"
	kernel "github.com/snapflow/snapflow/internal/restore"
	"github.com/snapflow/snapflow/internal/statuspatch"
	"github.com/snapflow/snapflow/internal/validate"
)

// Reasons on the Restore's conditions.
const (
	ReasonInvalidSpec          = "FailedValidation"
	ReasonWaitingForSnapshot   = "WaitingForSnapshot"
	ReasonWaitingForRepository = "WaitingForRepository"
	ReasonTargetNotFound       = "TargetNotFound"
	ReasonTargetConflict       = "TargetConflict"
	ReasonNotPermitted         = "PrivilegedMoverNotPermitted"
	ReasonMoverStarted         = "MoverStarted"
	ReasonUnsupported          = "Unsupported"
	ReasonSnapshotMissing      = "SnapshotMissing"
	// ReasonExecNotGranted: a streamExec restore may not exec into its
	// workload.
	ReasonExecNotGranted = "ExecNotGranted"
	// ReasonSourceNotAllowed: the Restore's author may not read its source
	// in another namespace.
	ReasonSourceNotAllowed = "SourceNotAllowed"
)

// Reconcile moves one Restore forward: resolve, prepare the target, start
// the mover, observe its end, publish the result.
func (f *Function) Reconcile(ctx context.Context, ns, name string) error {
	var rs snapv1.Restore
	if err := f.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &rs); err != nil {
		return client.IgnoreNotFound(err)
	}
	if rs.DeletionTimestamp != nil || !rs.Status.Phase.IsKnown() {
		return nil
	}
	if rs.Status.Phase.IsTerminal() {
		if finalized(&rs) {
			return nil
		}
		return f.finalize(ctx, &rs)
	}
	jobName := moverjob.Name(rs.Name, string(rs.UID))
	var job batchv1.Job
	switch err := f.Client.Get(ctx, client.ObjectKey{Namespace: rs.Namespace, Name: jobName}, &job); {
	case err == nil:
		return f.observe(ctx, &rs, &job)
	case !apierrors.IsNotFound(err):
		return err
	}
	return f.start(ctx, &rs, jobName)
}

func (f *Function) start(ctx context.Context, rs *snapv1.Restore, jobName string) error {
	log := host.Log(ctx).WithValues("restore", rs.Namespace+"/"+rs.Name)
	// The webhook's rules, again: it may have been bypassed.
	if res := validate.Restore(rs, validate.Options{}); !res.OK() {
		return f.fail(ctx, rs, ReasonInvalidSpec, fmt.Sprintf("the Restore is invalid: %v", res.Errs))
	}
	if rs.Spec.Target.StreamExec != nil {
		if msg, err := f.streamRefused(ctx, rs); err != nil {
			return err
		} else if msg != "" {
			return f.fail(ctx, rs, ReasonExecNotGranted, msg)
		}
	}
	if msg, err := f.sourceRefused(ctx, rs); err != nil {
		return err
	} else if msg != "" {
		return f.fail(ctx, rs, ReasonSourceNotAllowed, msg)
	}
	out, err := f.pinned(ctx, rs)
	if err != nil {
		return err
	}
	switch {
	case out.invalid != "":
		return f.fail(ctx, rs, ReasonInvalidSpec, out.invalid)
	case out.wait != "":
		return f.hold(ctx, rs, ReasonWaitingForSnapshot, out.wait)
	}
	res := out.res
	if res.missing != "" && kernel.OnMissing(rs) != "Continue" {
		return f.fail(ctx, rs, ReasonSnapshotMissing, res.missing+" (spec.policy.onMissingSnapshot is Fail; set it to Continue to complete with nothing restored)")
	}
	// The repository may come from a Snapshot's or this Restore's status,
	// which movers write: read only from one this namespace may use.
	if msg := repository.AccessProblem(ctx, f.Client, rs.Namespace, res.repo); msg != "" {
		return f.fail(ctx, rs, "RepositoryNotAllowed", msg)
	}
	// The repository is read before the target is made, so consent to copy
	// its credentials is checked before any side effect; a missing one is
	// waited for below, after the target, as before.
	var repo *repository.Object
	var repoErr error
	if res.missing == "" || rs.Spec.Target.Populator != nil {
		repo, repoErr = repository.Get(ctx, f.Client, f.Namespace, res.repo, rs.Namespace)
		if repoErr != nil && !apierrors.IsNotFound(repoErr) {
			return repoErr
		}
		if repoErr == nil {
			if msg := repository.ProjectionRefused(repo, rs.Namespace, repository.ProjectionEnabled(rs.Spec.CredentialProjection), "Restore "+rs.Name); msg != "" {
				return f.fail(ctx, rs, ReasonInvalidSpec, msg)
			}
		}
	}
	tgt, reason, msg, err := f.target(ctx, rs)
	if err != nil || reason != "" {
		if err == nil {
			if reason == ReasonTargetConflict {
				return f.fail(ctx, rs, reason, msg)
			}
			err = f.hold(ctx, rs, reason, msg)
		}
		return err
	}
	pvc := tgt.mount
	if res.missing != "" && rs.Spec.Target.Populator == nil {
		return f.completeEmpty(ctx, rs, res, pvc)
	}
	// A populated PVC with nothing to restore still needs its volume: the
	// mover runs, writes nothing, and the empty prime is handed over.
	if apierrors.IsNotFound(repoErr) {
		return f.hold(ctx, rs, ReasonWaitingForRepository, fmt.Sprintf("%s %s does not exist; the restore starts once it exists and is Ready", res.repo.Kind, res.repo.Name))
	}
	if repo.Status.Phase != snapv1.RepositoryReady {
		return f.hold(ctx, rs, ReasonWaitingForRepository, fmt.Sprintf("waiting for %s to be Ready (phase %q)", repo.Key(), repo.Status.Phase))
	}
	mv, inherited, err := f.moverFor(ctx, rs, res.recorded, repo.Spec.MoverDefaults)
	if err != nil {
		return err
	}
	job, cm, err := f.build(ctx, rs, res, repo, mv, tgt, jobName)
	if errors.Is(err, privilege.ErrNotPermitted) {
		return f.hold(ctx, rs, ReasonNotPermitted, err.Error())
	} else if err != nil {
		return f.fail(ctx, rs, ReasonInvalidSpec, err.Error())
	}
	if err := projection.Apply(ctx, f.Client, job, repo.Homes(), true, ""); errors.Is(err, projection.ErrSource) {
		return f.fail(ctx, rs, ReasonInvalidSpec, err.Error())
	} else if err != nil {
		return err
	}
	if err := host.CreateWorkSpec(ctx, f.Client, cm); err != nil {
		return err
	}
	if tgt.exec != nil {
		// Granted last, so that no refusal above leaves it behind.
		err := execgrant.Ensure(ctx, f.Client, execgrant.Grant{Name: jobName, Namespace: rs.Namespace, Pod: tgt.exec.Pod, Owner: job.OwnerReferences[0],
			ImagePullSecrets: snapshot.PullSecrets(ctx, f.Client, rs.Namespace, f.MoverServiceAccount)})
		if errors.Is(err, execgrant.ErrGrant) {
			return f.hold(ctx, rs, ReasonExecNotGranted, err.Error())
		} else if err != nil {
			return err
		}
	}
	if err := f.Client.Create(ctx, job); err != nil && !apierrors.IsAlreadyExists(err) {
		if tgt.exec != nil {
			err = errors.Join(err, execgrant.Revoke(ctx, f.Client, rs.Namespace, jobName))
		}
		return fmt.Errorf("create the mover job: %w", err)
	}
	log.Info("restore mover job created", "job", jobName, "snapshot", res.snapshotID, "pvc", pvc)
	return f.update(ctx, rs, func(st *snapv1.RestoreStatus, gen int64) {
		if st.Phase.IsTerminal() {
			return
		}
		pin(st, rs, res, f.now())
		st.Phase = snapv1.RestoreRestoring
		if res.snapshotID == "" {
			st.Phase = snapv1.RestoreResolving
		}
		st.Target = tgt.status.DeepCopy()
		st.ObservedGeneration = gen
		msg := "restore in progress (job " + jobName + ")"
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: wellknown.ConditionReady, Status: metav1.ConditionFalse, Reason: ReasonMoverStarted, Message: msg, ObservedGeneration: gen})
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: wellknown.ConditionReconciling, Status: metav1.ConditionTrue, Reason: ReasonMoverStarted, Message: msg, ObservedGeneration: gen})
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: wellknown.ConditionStalled, Status: metav1.ConditionFalse, Reason: ReasonMoverStarted, ObservedGeneration: gen})
		if inherited != nil {
			inherited.ObservedGeneration = gen
			meta.SetStatusCondition(&st.Conditions, *inherited)
		}
	})
}

// pinned returns the pinned resolution when there is one: a Restore is
// resolved once and never again, even if newer snapshots appear.
func (f *Function) pinned(ctx context.Context, rs *snapv1.Restore) (outcome, error) {
	r := rs.Status.Resolved
	if r == nil || r.Repository == nil {
		return f.resolve(ctx, rs)
	}
	res := &resolution{repo: *r.Repository, snapshotID: r.KopiaSnapshotID, snapshot: r.SnapshotRef, identity: r.Identity}
	if res.snapshotID == "" {
		// Pinned as a query for the mover (identity without snapshotID).
		fresh, err := f.resolve(ctx, rs)
		if err != nil || fresh.res == nil {
			return fresh, err
		}
		res.query = fresh.res.query
	}
	if res.snapshot != nil {
		var s snapv1.Snapshot
		if err := f.Client.Get(ctx, client.ObjectKey{Namespace: res.snapshot.Namespace, Name: res.snapshot.Name}, &s); err == nil {
			res.recorded = s.Status.Recorded
		}
	}
	return outcome{res: res}, nil
}

// pin records the resolution in status, once.
func pin(st *snapv1.RestoreStatus, rs *snapv1.Restore, res *resolution, now time.Time) {
	st.SourceKind = kernel.SourceKind(rs)
	if st.Resolved != nil && st.Resolved.Repository != nil {
		return
	}
	repo := res.repo
	at := metav1.NewTime(now)
	st.Resolved = &snapv1.RestoreResolved{Repository: &repo, SnapshotRef: res.snapshot, Identity: res.identity, KopiaSnapshotID: res.snapshotID}
	if res.snapshotID != "" {
		st.Resolved.Resolution, st.Resolved.PinnedAt = "Snapshot", &at
	}
}

// targetPlan is the PVC the mover writes into and what status reports,
// or the command a streamExec restore pipes into.
type targetPlan struct {
	mount  string
	exec   *mover.ExecWork
	status snapv1.RestoreTargetStatus
}

// target makes sure the PVC to restore into exists; a reason says why the
// restore waits (or, for a conflict, fails).
func (f *Function) target(ctx context.Context, rs *snapv1.Restore) (*targetPlan, string, string, error) {
	t := rs.Spec.Target
	if t.StreamExec != nil {
		return f.streamTarget(ctx, rs)
	}
	if t.Populator != nil {
		user, reason, msg, err := f.populated(ctx, rs)
		if err != nil || reason != "" {
			return nil, reason, msg, err
		}
		prime, err := f.ensurePrime(ctx, rs, user)
		if err != nil {
			return nil, "", "", err
		}
		return &targetPlan{mount: prime, status: snapv1.RestoreTargetStatus{PVCPrime: prime, PVCRef: user.Name}}, "", "", nil
	}
	name, reason, msg, err := f.ownTarget(ctx, rs)
	if err != nil || reason != "" {
		return nil, reason, msg, err
	}
	return &targetPlan{mount: name, status: snapv1.RestoreTargetStatus{PVCRef: name}}, "", "", nil
}

// ownTarget is target.pvcRef (which must exist) or target.pvc (created).
func (f *Function) ownTarget(ctx context.Context, rs *snapv1.Restore) (string, string, string, error) {
	t := rs.Spec.Target
	if t.PVCRef != nil {
		var pvc corev1.PersistentVolumeClaim
		if err := f.Client.Get(ctx, client.ObjectKey{Namespace: rs.Namespace, Name: t.PVCRef.Name}, &pvc); err != nil {
			if apierrors.IsNotFound(err) {
				return "", ReasonTargetNotFound, fmt.Sprintf("PVC %s/%s (spec.target.pvcRef) does not exist; create it, or use spec.target.pvc to have the restore create one", rs.Namespace, t.PVCRef.Name), nil
			}
			return "", "", "", err
		}
		return pvc.Name, "", "", nil
	}
	want := t.PVC
	var pvc corev1.PersistentVolumeClaim
	err := f.Client.Get(ctx, client.ObjectKey{Namespace: rs.Namespace, Name: want.Name}, &pvc)
	switch {
	case err == nil && pvc.Labels[wellknown.LabelRestoreUID] == string(rs.UID):
		return pvc.Name, "", "", nil
	case err == nil:
		return "", ReasonTargetConflict, fmt.Sprintf("PVC %s/%s already exists and was not created by this Restore; restoring into it needs spec.target.pvcRef (which may overwrite its files), or pick another name in spec.target.pvc.name", rs.Namespace, want.Name), nil
	case !apierrors.IsNotFound(err):
		return "", "", "", err
	}
	modes := []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	if len(want.AccessModes) > 0 {
		modes = modes[:0]
		for _, m := range want.AccessModes {
			modes = append(modes, corev1.PersistentVolumeAccessMode(m))
		}
	}
	pvc = corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: rs.Namespace, Name: want.Name, Labels: map[string]string{
			wellknown.LabelManagedBy: wellknown.ManagedByValue, wellknown.LabelRestore: rs.Name, wellknown.LabelRestoreUID: string(rs.UID)}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: modes, StorageClassName: want.StorageClassName,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: *want.Capacity}},
		},
	}
	// No owner reference: the restored data must outlive the Restore object.
	if err := f.Client.Create(ctx, &pvc); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", "", "", fmt.Errorf("create PVC %s/%s: %w", rs.Namespace, want.Name, err)
	}
	return want.Name, "", "", nil
}

// observe writes the result a finished mover reported, settles a run whose
// mover ended without reporting, and fails wedged pods.
func (f *Function) observe(ctx context.Context, rs *snapv1.Restore, j *batchv1.Job) error {
	if c, done := jobwatch.Finished(j); done {
		why, err := jobwatch.ApplyReport(ctx, f.Client, j, rs.UID, mover.OpRestore)
		if err != nil || why == "" {
			return err
		}
		if c.Type == batchv1.JobFailed {
			return f.failTail(ctx, rs, "Mover"+c.Reason, fmt.Sprintf("the mover job failed (%s): %s; %s", c.Reason, c.Message, why), jobwatch.PodMessage(ctx, f.Client, j))
		}
		return f.failTail(ctx, rs, "MoverReportedNothing", "the mover job completed without a result for this Restore: "+why, jobwatch.PodMessage(ctx, f.Client, j))
	}
	if wedged, msg := jobwatch.Wedged(ctx, f.Client, j, f.now()); wedged {
		_ = f.Client.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground))
		return f.fail(ctx, rs, "MoverPodWedged", msg)
	}
	return f.observeProgress(ctx, rs, j)
}

// observeProgress copies the running mover's newest progress line into
// status.progress, at most every mover.ProgressRefresh. Progress is only
// shown: a failure to read or write it is logged, never the event's error.
func (f *Function) observeProgress(ctx context.Context, rs *snapv1.Restore, j *batchv1.Job) error {
	if rs.Status.Phase.IsTerminal() || !host.Owned(j, rs) {
		return nil
	}
	p, ok := jobwatch.Progress(ctx, f.Client, f.Logs, j, f.now())
	if !ok || (rs.Status.Progress != nil && !p.Replaces(rs.Status.Progress.ObservedAt)) {
		return nil
	}
	err := f.update(ctx, rs, func(st *snapv1.RestoreStatus, _ int64) {
		if st.Phase.IsTerminal() || (st.Progress != nil && !p.Replaces(st.Progress.ObservedAt)) {
			return
		}
		st.Progress = p.RestoreProgress()
	})
	if err != nil {
		host.Log(ctx).Info("progress not recorded", "restore", rs.Namespace+"/"+rs.Name, "error", err.Error())
	}
	return nil
}

// hold records why a restore waits.
func (f *Function) hold(ctx context.Context, rs *snapv1.Restore, reason, msg string) error {
	return f.update(ctx, rs, func(st *snapv1.RestoreStatus, gen int64) {
		if st.Phase == "" {
			st.Phase = snapv1.RestorePending
		}
		st.SourceKind = kernel.SourceKind(rs)
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: wellknown.ConditionReady, Status: metav1.ConditionFalse, Reason: reason, Message: msg, ObservedGeneration: gen})
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: wellknown.ConditionReconciling, Status: metav1.ConditionTrue, Reason: reason, Message: msg, ObservedGeneration: gen})
	})
}

func (f *Function) fail(ctx context.Context, rs *snapv1.Restore, class, msg string) error {
	return f.failTail(ctx, rs, class, msg, "")
}

func (f *Function) failTail(ctx context.Context, rs *snapv1.Restore, class, msg, tail string) error {
	now := metav1.NewTime(f.now())
	return f.update(ctx, rs, func(st *snapv1.RestoreStatus, gen int64) {
		if st.Phase.IsTerminal() {
			return // the mover reported after all
		}
		st.Phase = snapv1.RestoreFailed
		st.SourceKind = kernel.SourceKind(rs)
		st.ObservedGeneration = gen
		st.Failure = &snapv1.Failure{Class: class, Message: msg, StderrTail: tail}
		if tail != "" {
			st.LogTail = tail
		}
		if st.Timing == nil {
			st.Timing = &snapv1.Timing{}
		}
		st.Timing.EndTime = &now
	})
}

// completeEmpty ends a restore that found nothing under onMissingSnapshot:
// Continue. The target PVC exists (empty), so a workload can start fresh.
func (f *Function) completeEmpty(ctx context.Context, rs *snapv1.Restore, res *resolution, pvc string) error {
	now := metav1.NewTime(f.now())
	return f.update(ctx, rs, func(st *snapv1.RestoreStatus, gen int64) {
		if st.Phase.IsTerminal() {
			return
		}
		repo := res.repo
		st.Phase, st.SourceKind, st.ObservedGeneration = snapv1.RestoreCompleted, kernel.SourceKind(rs), gen
		st.Resolved = &snapv1.RestoreResolved{Resolution: "NoSnapshot", Repository: &repo, PinnedAt: &now}
		st.Target = &snapv1.RestoreTargetStatus{PVCRef: pvc}
		st.Timing = &snapv1.Timing{StartTime: &now, EndTime: &now}
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: wellknown.ConditionReconciling, Status: metav1.ConditionFalse, Reason: "NoSnapshot",
			Message: "nothing restored: " + res.missing + " (onMissingSnapshot: Continue)", ObservedGeneration: gen})
	})
}

// update re-reads the Restore and writes mutate's change; rs is refreshed.
func (f *Function) update(ctx context.Context, rs *snapv1.Restore, mutate func(*snapv1.RestoreStatus, int64)) error {
	return statuspatch.Update(ctx, f.Client, client.ObjectKeyFromObject(rs), func() *snapv1.Restore { return &snapv1.Restore{} },
		func(live *snapv1.Restore) error {
			if live.UID != rs.UID {
				return statuspatch.Skip
			}
			mutate(&live.Status, live.Generation)
			*rs = *live.DeepCopy()
			return nil
		})
}

// finalized says whether the function already published a terminal result.
func finalized(rs *snapv1.Restore) bool {
	c := meta.FindStatusCondition(rs.Status.Conditions, wellknown.ConditionReady)
	return c != nil && c.ObservedGeneration == rs.Generation && c.Reason == string(rs.Status.Phase)
}

// finalize publishes a finished restore: the work spec goes, the CloudEvent
// and a Kubernetes Event go out, and Ready tells the outcome.
func (f *Function) finalize(ctx context.Context, rs *snapv1.Restore) error {
	// A streamExec run's right to exec into its workload ends with it.
	if err := execgrant.Revoke(ctx, f.Client, rs.Namespace, moverjob.Name(rs.Name, string(rs.UID))); err != nil {
		return err
	}
	if rs.Spec.Target.Populator != nil && rs.Status.Phase == snapv1.RestoreCompleted {
		if done, err := f.handOver(ctx, rs); err != nil || !done {
			return err
		}
	}
	cm := &corev1.ConfigMap{}
	cm.Namespace, cm.Name = rs.Namespace, moverjob.Name(rs.Name, string(rs.UID))
	if err := f.Client.Delete(ctx, cm); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if repository.ProjectionEnabled(rs.Spec.CredentialProjection) {
		if err := projection.Reap(ctx, f.Client, rs.Namespace, cm.Name); err != nil {
			return err
		}
	}
	if err := f.emitResult(ctx, rs); err != nil {
		return err
	}
	phase := rs.Status.Phase
	status, evType, msg := metav1.ConditionTrue, corev1.EventTypeNormal, "restore completed"
	if c := meta.FindStatusCondition(rs.Status.Conditions, wellknown.ConditionReconciling); c != nil && c.Message != "" && phase == snapv1.RestoreCompleted {
		msg = c.Message
	}
	if phase == snapv1.RestoreFailed {
		status, evType, msg = metav1.ConditionFalse, corev1.EventTypeWarning, "restore failed"
		if fl := rs.Status.Failure; fl != nil {
			msg = fmt.Sprintf("restore failed (%s): %s", fl.Class, fl.Message)
			if fl.RetryHint != "" {
				msg += "; " + fl.RetryHint
			}
		}
	}
	if f.Recorder != nil {
		f.Recorder.Event(rs, evType, string(phase), msg)
	}
	return f.update(ctx, rs, func(st *snapv1.RestoreStatus, gen int64) {
		conditions.Settled(&st.Conditions, string(phase), status == metav1.ConditionTrue, msg, gen)
	})
}
