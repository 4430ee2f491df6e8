// Package jobwatch reads the state of mover and hook Jobs the way every
// function needs it: finished or not, why a pod ended, and whether a Job's
// pod never started.
package jobwatch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/mover"
	"github.com/snapflow/snapflow/internal/moverjob"
)

// Done says whether j completed or failed.
func Done(j *batchv1.Job) bool {
	_, ok := Finished(j)
	return ok
}

// Finished returns the condition that ended j, if any.
func Finished(j *batchv1.Job) (batchv1.JobCondition, bool) {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return c, true
		}
	}
	return batchv1.JobCondition{}, false
}

// Live says whether j holds a concurrency slot: not finished, not suspended.
func Live(j *batchv1.Job) bool {
	return !Done(j) && (j.Spec.Suspend == nil || !*j.Spec.Suspend)
}

// PodMessage is the termination message of j's newest pod.
func PodMessage(ctx context.Context, c client.Client, j *batchv1.Job) string {
	msg, _, _ := TerminationMessage(ctx, c, j, "")
	return msg
}

// TerminationMessage is the termination message of j's latest pod (of its
// container named container, any when ""), and whether that container
// exited 0. It reads only pods that run j's template (runsJob): a pod that
// merely carries the job-name label and a controller reference could have
// been made by anyone in the namespace.
func TerminationMessage(ctx context.Context, c client.Client, j *batchv1.Job, container string) (string, bool, error) {
	t, err := Terminated(ctx, c, j, container)
	if t == nil || err != nil {
		return "", false, err
	}
	return t.Message, t.ExitCode == 0, nil
}

// Terminated is how the container of j's latest pod ended (nil while none
// has ended with a message, or with container named). Only pods that run
// j's template count; when j controls pods but none runs it, the error
// wraps mover.ErrReportMismatch and says why.
func Terminated(ctx context.Context, c client.Client, j *batchv1.Job, container string) (*corev1.ContainerStateTerminated, error) {
	if j.Labels[wellknown.LabelManagedBy] != wellknown.ManagedByValue {
		// Admission lets only snapflow's functions create a Job with this
		// label (admission.MoverJobProblem): a Job found under a mover's
		// name without it is someone else's, whatever its pods say.
		return nil, fmt.Errorf("%w: job %s is not labelled %s=%s, so it is not snapflow's and what its pods report is not read",
			mover.ErrReportMismatch, j.Name, wellknown.LabelManagedBy, wellknown.ManagedByValue)
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(j.Namespace), client.MatchingLabels{"job-name": j.Name}); err != nil {
		return nil, fmt.Errorf("list the pods of job %s: %w", j.Name, err)
	}
	last := newest(pods.Items, func(p *corev1.Pod) bool { return runsJob(p, j) })
	if last == nil {
		// Said, not skipped in silence: admission that rewrites a mover's
		// command or image makes every report unreadable.
		if odd := newest(pods.Items, func(p *corev1.Pod) bool { return metav1.IsControlledBy(p, j) }); odd != nil {
			return nil, fmt.Errorf("%w: pod %s of job %s does not run the job's template, so what it reports is not read: %s", mover.ErrReportMismatch, odd.Name, j.Name, templateMismatch(odd, j))
		}
		return nil, nil
	}
	for _, cs := range last.Status.ContainerStatuses {
		if container != "" && cs.Name != container {
			continue
		}
		if t := cs.State.Terminated; t != nil && (t.Message != "" || container != "") {
			return t, nil
		}
	}
	return nil, nil
}

// Wedged says whether no pod of j has started within its startup deadline,
// and if so, a message saying what to check.
func Wedged(ctx context.Context, c client.Client, j *batchv1.Job, now time.Time) (bool, string) {
	deadline := moverjob.PodStartupDeadline(j)
	if j.CreationTimestamp.IsZero() || now.Sub(j.CreationTimestamp.Time) < deadline {
		// Without a creation time the Job's age is unknown: never call it wedged.
		return false, ""
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(j.Namespace), client.MatchingLabels{"job-name": j.Name}); err != nil {
		return false, ""
	}
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodPending && p.Status.Phase != "" {
			return false, ""
		}
	}
	why := "no pod was created"
	if len(pods.Items) > 0 {
		why = "its pod is still Pending"
		if w := waitingReason(&pods.Items[0]); w != "" {
			why += ": " + w
		}
	}
	return true, fmt.Sprintf("the mover job %s did not start within %s (%s); check scheduling, image pulls and volume attachment", j.Name, deadline, why)
}

// Waiting is why the latest pod of j cannot start its containers (a
// missing Secret or ConfigMap, an image that does not pull, no node that
// fits), or "" while nothing says so. Unlike Wedged it needs no deadline:
// it reports what the kubelet or the scheduler already said.
func Waiting(ctx context.Context, c client.Client, j *batchv1.Job) string {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(j.Namespace), client.MatchingLabels{"job-name": j.Name}); err != nil {
		return ""
	}
	latest := newest(pods.Items, func(p *corev1.Pod) bool {
		return metav1.IsControlledBy(p, j) && (p.Status.Phase == corev1.PodPending || p.Status.Phase == "")
	})
	if latest == nil {
		return ""
	}
	return waitingReason(latest)
}

// cannotStart are the waiting reasons that need someone to act.
var cannotStart = map[string]bool{"CreateContainerConfigError": true, "CreateContainerError": true, "ErrImagePull": true,
	"ImagePullBackOff": true, "InvalidImageName": true, "ErrImageNeverPull": true}

// waitingReason is what keeps a Pending pod from starting, as its
// containers or the scheduler say: not the Ready=False every pod shows
// while its containers are being created.
func waitingReason(p *corev1.Pod) string {
	for _, cs := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if w := cs.State.Waiting; w != nil && cannotStart[w.Reason] {
			return fmt.Sprintf("container %s: %s: %s", cs.Name, w.Reason, w.Message)
		}
	}
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Message != "" {
			return cond.Message
		}
	}
	return ""
}

// Report reads what j's mover found: the report in the termination message
// of j's latest pod (only pods j controls), with the work spec the function
// wrote for it (WorkSpec).
// A report counts only from a mover that exited 0, or with
// mover.ExitReported or mover.ExitRetryable for a failure it recorded (the
// latter read once the Job gave up retrying): any other exit is a crash,
// whose message may be its log. It returns mover.ErrNoReport when the mover
// left none, and an error wrapping mover.ErrReportMismatch when what it
// left cannot be used.
func Report(ctx context.Context, c client.Client, j *batchv1.Job) (*mover.Report, *mover.WorkSpec, error) {
	rep, err := Reported(ctx, c, j)
	if err != nil {
		return nil, nil, err
	}
	spec, err := WorkSpec(ctx, c, j)
	if err != nil {
		return nil, nil, err
	}
	return rep, spec, nil
}

// WorkSpec reads the work spec j's mover was started with: the ConfigMap of
// j's name, which must be snapflow's and match the digest j's pod template
// pins. The ConfigMap sits in the run's namespace, so whoever may write
// ConfigMaps there can change it after the mover read it. A spec that is
// not the pinned one is an error wrapping mover.ErrReportMismatch; a
// missing ConfigMap is the API server's NotFound.
func WorkSpec(ctx context.Context, c client.Client, j *batchv1.Job) (*mover.WorkSpec, error) {
	var cm corev1.ConfigMap
	if err := c.Get(ctx, client.ObjectKey{Namespace: j.Namespace, Name: j.Name}, &cm); err != nil {
		return nil, fmt.Errorf("read the work spec of job %s: %w", j.Name, err)
	}
	if cm.Labels[wellknown.LabelManagedBy] != wellknown.ManagedByValue {
		return nil, fmt.Errorf("%w: configmap %s/%s is not snapflow's", mover.ErrReportMismatch, cm.Namespace, cm.Name)
	}
	if !moverjob.Pinned(j, cm.Data[mover.WorkSpecKey]) {
		return nil, fmt.Errorf("%w: configmap %s/%s changed after job %s started", mover.ErrReportMismatch, cm.Namespace, cm.Name, j.Name)
	}
	spec, err := mover.Parse([]byte(cm.Data[mover.WorkSpecKey]))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", mover.ErrReportMismatch, err)
	}
	return spec, nil
}

// Reported is the report in the termination message of j's latest pod, as
// Report reads it, without the work spec.
func Reported(ctx context.Context, c client.Client, j *batchv1.Job) (*mover.Report, error) {
	t, err := Terminated(ctx, c, j, "mover")
	if err != nil {
		return nil, err
	}
	return ReportOf(t)
}

// ReportOf is the report a mover container that ended as t left (t nil:
// not ended), under the exit-code rules of Report.
func ReportOf(t *corev1.ContainerStateTerminated) (*mover.Report, error) {
	if t == nil || (t.ExitCode != 0 && !mover.ReportedFailure(t.ExitCode)) {
		return nil, mover.ErrNoReport
	}
	rep, err := mover.ParseReport(t.Message)
	if err != nil {
		return nil, err
	}
	if failed := rep.Failed(); failed != mover.ReportedFailure(t.ExitCode) {
		return nil, fmt.Errorf("%w: a mover that exited %d reports failed=%v", mover.ErrReportMismatch, t.ExitCode, failed)
	}
	return rep, nil
}

// ApplyReport writes the report of j's finished mover onto its target,
// which must be the object of UID owner and the work op (the work spec is
// a ConfigMap in the target's namespace, which its tenant may edit: the
// caller's own object and operation are what count). It is how a mover's
// result reaches status, since movers hold no Kubernetes credentials. It
// returns a reason when there is no report to apply (the mover died first,
// or the report does not fit its work), and an error only when the API
// server failed.
func ApplyReport(ctx context.Context, c client.Client, j *batchv1.Job, owner types.UID, op string) (string, error) {
	rep, spec, why, err := ownReport(ctx, c, j, owner, op)
	if why != "" || err != nil {
		return why, err
	}
	if err := rep.Apply(ctx, c, spec); errors.Is(err, mover.ErrReportMismatch) || errors.Is(err, mover.ErrTargetReplaced) {
		return err.Error(), nil
	} else if err != nil {
		return "", err
	}
	return "", nil
}

// ProbeReport reads the outcome of j's finished probe of the repository of
// UID owner. Like ApplyReport it returns a reason instead when there is no
// usable report, and an error only when the API server failed.
func ProbeReport(ctx context.Context, c client.Client, j *batchv1.Job, owner types.UID) (mover.ProbeOutcome, string, error) {
	rep, spec, why, err := ownReport(ctx, c, j, owner, mover.OpProbe)
	if why != "" || err != nil {
		return mover.ProbeOutcome{}, why, err
	}
	out, err := rep.ProbeResult(spec)
	if err != nil {
		return mover.ProbeOutcome{}, err.Error(), nil
	}
	return out, "", nil
}

// ownReport reads j's report and work spec, and accepts them only as the
// op work of the object of UID owner (the caller's own object and
// operation count, never what the tenant-editable work spec claims). A
// reason instead means there is nothing usable; an error, that the API
// server failed.
func ownReport(ctx context.Context, c client.Client, j *batchv1.Job, owner types.UID, op string) (*mover.Report, *mover.WorkSpec, string, error) {
	rep, spec, err := Report(ctx, c, j)
	switch {
	case errors.Is(err, mover.ErrNoReport):
		return nil, nil, "the mover left no report", nil
	case errors.Is(err, mover.ErrReportMismatch) || apierrors.IsNotFound(err):
		return nil, nil, err.Error(), nil
	case err != nil:
		return nil, nil, "", err
	}
	if spec.Target.UID != string(owner) || spec.Operation != op {
		return nil, nil, fmt.Sprintf("%s: the work spec of job %s is not the %s work of this object", mover.ErrReportMismatch, j.Name, op), nil
	}
	return rep, spec, "", nil
}

// LogReader reads the end of a container's log (pods/log).
type LogReader interface {
	Tail(ctx context.Context, namespace, pod, container string) (string, error)
}

// logTail bounds what is read of a mover's log for its progress: the
// newest progress line is among its last lines. A read that takes longer
// than logTimeout (an unreachable node) is given up: it would hold up the
// function's other events.
const (
	logTailLines = 40
	logTailBytes = 64 << 10
	logTimeout   = 5 * time.Second
)

// KubeLogs reads pod logs through the API server, which asks the kubelet.
type KubeLogs struct{ Pods corev1client.PodsGetter }

// Tail returns the last lines of the container's log.
func (k KubeLogs) Tail(ctx context.Context, namespace, pod, container string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, logTimeout)
	defer cancel()
	lines, limit := int64(logTailLines), int64(logTailBytes)
	rc, err := k.Pods.Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{Container: container, TailLines: &lines, LimitBytes: &limit}).Stream(ctx)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, logTailBytes))
	return string(b), err
}

// Progress is the newest progress line in the log of j's running mover
// pod. Nothing comes back while no pod of j runs, or when its log cannot be
// read: progress is shown, never acted on. Lines stamped after now (with a
// minute for clock skew) are ignored.
func Progress(ctx context.Context, c client.Client, logs LogReader, j *batchv1.Job, now time.Time) (mover.Progress, bool) {
	if logs == nil {
		return mover.Progress{}, false
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(j.Namespace), client.MatchingLabels{"job-name": j.Name}); err != nil {
		return mover.Progress{}, false
	}
	running := newest(pods.Items, func(p *corev1.Pod) bool { return runsJob(p, j) && p.Status.Phase == corev1.PodRunning })
	if running == nil {
		return mover.Progress{}, false
	}
	log, err := logs.Tail(ctx, running.Namespace, running.Name, moverjob.ContainerName)
	if err != nil {
		return mover.Progress{}, false
	}
	return mover.LastProgress(log, now.Add(time.Minute))
}
