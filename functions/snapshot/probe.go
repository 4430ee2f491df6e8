package snapshot

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/health"
	"github.com/snapflow/snapflow/internal/jobwatch"
	"github.com/snapflow/snapflow/internal/mover"
	"github.com/snapflow/snapflow/internal/moverjob"
	"github.com/snapflow/snapflow/internal/projection"
	"github.com/snapflow/snapflow/internal/repository"
)

const (
	opProbe        = "probe"
	opClusterProbe = "cluster-probe"
)

// probe re-checks a connected repository on spec.health.probe.interval
// with a mover Job that opens it (never creating one), so a rotated
// password, a vanished bucket or replaced storage turns it Degraded, and
// backups and restores wait with the reason instead of each failing. Each
// due time names its own Job, so a redelivered event finds the Job it
// started rather than starting another.
func (f *Function) probe(ctx context.Context, r *repository.Object) error {
	s := health.FromSpec(r.Spec.Health)
	if !s.Enabled {
		return nil
	}
	due := health.Due(s, r.Status, f.retryBase())
	if f.now().Before(due) {
		return nil
	}
	// The due time goes into the hashed part: a long repository name
	// would cut it off the readable part.
	jobName := moverjob.Name(r.Ref.Name+"-probe", fmt.Sprintf("%s/%d", r.Obj.GetUID(), due.Unix()))
	var job batchv1.Job
	err := f.Client.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: jobName}, &job)
	switch {
	case apierrors.IsNotFound(err):
		return f.startProbe(ctx, r, jobName, s)
	case err != nil:
		return err
	}
	if !jobwatch.Done(&job) {
		return nil
	}
	// Seen now, on the clock that computes the next due time (the Job's
	// own condition times come from another).
	res := health.Result{Job: job.Name, At: f.now()}
	out, why, err := jobwatch.ProbeReport(ctx, f.Client, &job, r.Obj.GetUID())
	res.Generation = out.Generation
	switch {
	case err != nil:
		return err
	case why != "":
		res.Class, res.Message = "ProbeFailed", fmt.Sprintf("probe job %s ended without a usable report (%s): %s", job.Name, why, jobwatch.PodMessage(ctx, f.Client, &job))
	case out.Failure != nil:
		res.Class, res.Message, res.Hint = out.Failure.Class, out.Failure.Message, out.Failure.Hint
	default:
		res.UniqueID, res.Snapshots, res.Bytes = out.Opened.UniqueID, out.Opened.Usage.Snapshots, out.Opened.Usage.LogicalBytes
	}
	if err := f.recordProbe(ctx, r, s, res); err != nil {
		return err
	}
	return f.removeProbe(ctx, r, &job)
}

// removeProbe deletes a recorded probe's credential copies, work spec and
// Job: one a day per repository would otherwise pile up (a
// ClusterRepository's have no owner to be collected with).
func (f *Function) removeProbe(ctx context.Context, r *repository.Object, job *batchv1.Job) error {
	if r.Homes().Needed(r.Namespace) {
		if err := projection.Reap(ctx, f.Client, r.Namespace, job.Name); err != nil {
			return err
		}
	}
	objs := []client.Object{job}
	var cm corev1.ConfigMap
	switch err := f.Client.Get(ctx, client.ObjectKey{Namespace: job.Namespace, Name: job.Name}, &cm); {
	case err == nil:
		objs = append(objs, &cm)
	case !apierrors.IsNotFound(err):
		return err
	}
	for _, obj := range objs {
		if !f.isProbeOf(obj, r) {
			continue // not this repository's probe: leave it
		}
		opts := []client.DeleteOption{client.PropagationPolicy(metav1.DeletePropagationBackground)}
		if uid := obj.GetUID(); uid != "" {
			opts = append(opts, client.Preconditions{UID: &uid}) // the one read, not a namesake made since
		}
		if err := f.Client.Delete(ctx, obj, opts...); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("delete probe object %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
		}
	}
	return nil
}

// isProbeOf says whether snapflow made obj for a probe of r: its labels,
// and for a namespaced Repository its controller reference too.
func (f *Function) isProbeOf(obj client.Object, r *repository.Object) bool {
	l := obj.GetLabels()
	if l[wellknown.LabelManagedBy] != wellknown.ManagedByValue || l[wellknown.LabelOp] != probeOp(r) || l[wellknown.LabelRepository] != r.Ref.Name {
		return false
	}
	return r.Ref.Kind == snapv1.KindClusterRepository || metav1.IsControlledBy(obj, r.Obj)
}

// probeOp is the op label of r's probe Jobs: a ClusterRepository's differs,
// so a Job event finds its way back to the cluster-scoped object.
func probeOp(r *repository.Object) string {
	if r.Ref.Kind == snapv1.KindClusterRepository {
		return opClusterProbe
	}
	return opProbe
}

func (f *Function) startProbe(ctx context.Context, r *repository.Object, jobName string, s health.Settings) error {
	// The Job outlives its end long enough for its result to be read even
	// where moverDefaults ask for a short TTL; removeProbe deletes it then.
	job, cm, _, refused, err := f.repositoryJob(ctx, r, jobName, probeOp(r), mover.WorkSpec{Operation: mover.OpProbe}, probeMinTTL)
	if err != nil {
		return err
	}
	if refused != nil {
		// A probe that cannot even start (its credentials gone, the
		// namespace's opt-in withdrawn) is a failed probe, counted once
		// under the name its Job would have had.
		return f.recordProbe(ctx, r, s, health.Result{Job: jobName, At: f.now(), Class: refused.Reason, Message: refused.Message})
	}
	return f.createRepositoryJob(ctx, job, cm)
}

// probeMinTTL is the least time a finished probe Job is kept, in seconds.
const probeMinTTL = 3600

// recordProbe writes a probe's outcome and tells a change of readiness as
// a Kubernetes Event.
func (f *Function) recordProbe(ctx context.Context, r *repository.Object, s health.Settings, res health.Result) error {
	var changed, msg string
	err := f.updateRepoStatus(ctx, r, func(st *snapv1.RepositoryStatus, gen int64) {
		// A probe speaks for the generation it was started at, and only
		// while that generation is connected: a spec changed meanwhile has
		// a bootstrap of its own to pass.
		if !connectedAt(st, gen) || (res.Generation != 0 && res.Generation != gen) {
			changed = ""
			return
		}
		before := st.Phase
		health.Record(st, gen, s, res)
		changed = health.Transition(before, st.Phase)
		if c := meta.FindStatusCondition(st.Conditions, wellknown.ConditionReady); c != nil {
			msg = c.Message // what Degraded means for runs, or the recovery
		}
	})
	if err != nil || changed == "" || f.Recorder == nil {
		return err
	}
	kind := corev1.EventTypeWarning
	if changed == health.ReasonRecovered {
		kind = corev1.EventTypeNormal
	}
	f.Recorder.Event(r.Obj, kind, "Repository"+changed, msg)
	return nil
}
