package snapshot

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
	"github.com/snapflow/snapflow/internal/health"
	"github.com/snapflow/snapflow/internal/jobwatch"
	"github.com/snapflow/snapflow/internal/mover"
	"github.com/snapflow/snapflow/internal/moverjob"
	"github.com/snapflow/snapflow/internal/privilege"
	"github.com/snapflow/snapflow/internal/projection"
	"github.com/snapflow/snapflow/internal/repository"
)

const (
	opBootstrap        = "bootstrap"
	opClusterBootstrap = "cluster-bootstrap"
	// DefaultRepositoryRetry is how long a Failed repository waits before
	// its second connect attempt (a fixed Secret is picked up then); later
	// attempts back off (nextConnect).
	DefaultRepositoryRetry = time.Minute
)

// ReconcileRepository connects to (and creates, when asked) a repository by
// running a bootstrap mover Job whenever the spec is new to it, and retries a
// Failed one with backoff between RepositoryRetry and RepositoryRetryMax.
func (f *Function) ReconcileRepository(ctx context.Context, kind snapv1.RepositoryKind, ns, name string) error {
	r, err := f.getRepository(ctx, snapv1.RepositoryRef{Kind: kind, Name: name}, ns)
	if err != nil {
		return client.IgnoreNotFound(err)
	}
	if f.settled(r) {
		return nil
	}
	gen := r.Obj.GetGeneration()
	jobNS := r.Namespace
	jobName := moverjob.Name(fmt.Sprintf("%s-connect-%d", name, gen), string(r.Obj.GetUID()))
	var job batchv1.Job
	err = f.Client.Get(ctx, client.ObjectKey{Namespace: jobNS, Name: jobName}, &job)
	switch {
	case apierrors.IsNotFound(err):
		if connectedAt(r.Status, gen) {
			return f.connected(ctx, r) // the Job was collected since
		}
		return f.startBootstrap(ctx, r, jobName)
	case err != nil:
		return err
	}
	if !jobwatch.Done(&job) {
		if connectedAt(r.Status, gen) {
			return nil
		}
		return f.bootstrapWaits(ctx, r, &job)
	}
	// Once connected at this generation the report is in status; later
	// events on the finished Job need not read it again.
	if !connectedAt(r.Status, gen) {
		why, err := jobwatch.ApplyReport(ctx, f.Client, &job, r.Obj.GetUID(), mover.OpBootstrap)
		if err != nil {
			return err
		}
		if why == "" { // the report is on the repository's status now
			if r, err = f.getRepository(ctx, snapv1.RepositoryRef{Kind: kind, Name: name}, ns); err != nil {
				return client.IgnoreNotFound(err)
			}
		}
	}
	if r.Homes().Needed(jobNS) {
		if err := projection.Reap(ctx, f.Client, jobNS, job.Name); err != nil {
			return err
		}
	}
	failedJob := false
	for _, c := range job.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
			failedJob = true
		}
	}
	if connectedAt(r.Status, gen) {
		return f.connected(ctx, r)
	}
	if failedJob && r.Status.Phase != snapv1.RepositoryFailed {
		// The mover died before reporting: say so.
		msg := fmt.Sprintf("the bootstrap job %s failed without a report: %s", job.Name, jobwatch.PodMessage(ctx, f.Client, &job))
		if err := f.updateRepoStatus(ctx, r, func(st *snapv1.RepositoryStatus, gen int64) {
			st.Phase = snapv1.RepositoryFailed
			st.ObservedGeneration = gen
			meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: wellknown.ConditionReady, Status: metav1.ConditionFalse, Reason: "BootstrapFailed", Message: msg, ObservedGeneration: gen})
		}); err != nil {
			return err
		}
	}
	done := finishTime(&job)
	if done.IsZero() {
		return nil
	}
	// Computed from the live status, so a late or concurrent event cannot
	// wind the count back.
	var next *snapv1.ConnectStatus
	if err := f.updateRepoStatus(ctx, r, func(st *snapv1.RepositoryStatus, _ int64) {
		next = nextConnect(st.Connect, gen, done, f.retryBase(), f.retryCeiling())
		st.Connect = next
	}); err != nil || next == nil {
		return err
	}
	if !f.now().Before(next.NextAttemptAt.Time) {
		// Retry with a fresh Job of the same name; only this attempt's Job,
		// never a retry another event started meanwhile.
		uid := job.UID
		err := f.Client.Delete(ctx, &job, client.PropagationPolicy(metav1.DeletePropagationBackground), client.Preconditions{UID: &uid})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return err
		}
	}
	return nil
}

func (f *Function) retryBase() time.Duration {
	if f.RepositoryRetry > 0 {
		return f.RepositoryRetry
	}
	return DefaultRepositoryRetry
}

func (f *Function) retryCeiling() time.Duration {
	ceiling := f.RepositoryRetryMax
	if ceiling <= 0 {
		ceiling = DefaultRepositoryRetryMax
	}
	return max(f.retryBase(), ceiling)
}

// bootstrapWaits says on Ready why a bootstrap's mover cannot start (a
// password Secret that does not exist, an image that does not pull), which
// would otherwise show only on the pod until the Job's deadline; the Job
// goes on, so the repository connects once someone fixes it.
func (f *Function) bootstrapWaits(ctx context.Context, r *repository.Object, job *batchv1.Job) error {
	why := jobwatch.Waiting(ctx, f.Client, job)
	return f.updateRepoStatus(ctx, r, func(st *snapv1.RepositoryStatus, gen int64) {
		if st.Phase == snapv1.RepositoryReady {
			return // the generation connected before still serves
		}
		c := meta.FindStatusCondition(st.Conditions, wellknown.ConditionReady)
		switch {
		case why != "":
			meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: wellknown.ConditionReady, Status: metav1.ConditionFalse, Reason: ReasonMoverCannotStart,
				Message: fmt.Sprintf("bootstrap job %s cannot start its mover, and waits: %s", job.Name, why), ObservedGeneration: gen})
		case c != nil && c.Reason == ReasonMoverCannotStart:
			meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: wellknown.ConditionReady, Status: metav1.ConditionFalse, Reason: "Connecting",
				Message: "bootstrap job " + job.Name + " connects to the repository", ObservedGeneration: gen})
		}
	})
}

// settled says ReconcileRepository has nothing to do for r, from r alone:
// it is being deleted or suspended, or it connected at its generation with
// no retry state left, no health probe due, and (a ClusterRepository) no
// credentials projected into other namespaces to reap after its Job. The
// resync skips such repositories without reading them again: it re-read
// each one and its connect Job every pass.
func (f *Function) settled(r *repository.Object) bool {
	if r.Obj.GetDeletionTimestamp() != nil || r.Spec.Suspend {
		return true
	}
	if !connectedAt(r.Status, r.Obj.GetGeneration()) || r.Status.Connect != nil {
		return false
	}
	if s := health.FromSpec(r.Spec.Health); s.Enabled && !f.now().Before(health.Due(s, r.Status, f.retryBase())) {
		return false
	}
	return !r.Homes().Needed(r.Namespace)
}

// connectedAt says the bootstrap of generation gen succeeded: the
// repository is Ready, or was and a probe has found it Degraded since.
func connectedAt(st *snapv1.RepositoryStatus, gen int64) bool {
	return (st.Phase == snapv1.RepositoryReady || st.Phase == snapv1.RepositoryDegraded) && st.ObservedGeneration == gen
}

// connected drops the retry state of a repository that connected and
// probes it when a probe is due.
func (f *Function) connected(ctx context.Context, r *repository.Object) error {
	if r.Status.Connect != nil {
		if err := f.updateRepoStatus(ctx, r, func(st *snapv1.RepositoryStatus, _ int64) { st.Connect = nil }); err != nil {
			return err
		}
	}
	return f.probe(ctx, r)
}

func finishTime(j *batchv1.Job) time.Time {
	var t time.Time
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.LastTransitionTime.After(t) {
			t = c.LastTransitionTime.Time
		}
	}
	return t
}

func (f *Function) startBootstrap(ctx context.Context, r *repository.Object, jobName string) error {
	op := opBootstrap
	if r.Ref.Kind == snapv1.KindClusterRepository {
		op = opClusterBootstrap
	}
	job, cm, backend, refused, err := f.repositoryJob(ctx, r, jobName, op, mover.WorkSpec{Operation: mover.OpBootstrap},
		// A finished Job paces the retries (ReconcileRepository deletes it
		// when the next attempt is due): a short TTL must not start one early.
		int32(f.retryCeiling()/time.Second))
	if err != nil {
		return err
	}
	if refused != nil {
		// Stays refused until the spec, the namespace's opt-in or the
		// Secrets change; each of those events starts the bootstrap again.
		return f.updateRepoStatus(ctx, r, func(st *snapv1.RepositoryStatus, gen int64) {
			st.Phase = snapv1.RepositoryFailed
			st.ObservedGeneration = gen
			meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: wellknown.ConditionReady, Status: metav1.ConditionFalse, Reason: refused.Reason, Message: refused.Message, ObservedGeneration: gen})
			if refused.Reason == "UnsupportedBackend" {
				meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: wellknown.ConditionStalled, Status: metav1.ConditionTrue, Reason: refused.Reason, Message: refused.Message, ObservedGeneration: gen})
			}
		})
	}
	if err := f.createRepositoryJob(ctx, job, cm); err != nil {
		return err
	}
	return f.updateRepoStatus(ctx, r, func(st *snapv1.RepositoryStatus, gen int64) {
		if st.Phase == "" || st.Phase == snapv1.RepositoryPending {
			st.Phase = snapv1.RepositoryInitializing
		}
		st.Backend = backend
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: wellknown.ConditionReconciling, Status: metav1.ConditionTrue, Reason: "Connecting",
			Message: "bootstrap job " + jobName + " connects to the repository", ObservedGeneration: gen})
	})
}

// refusal is why a repository's mover Job cannot be made, as a condition
// reason and message.
type refusal struct{ Reason, Message string }

// repositoryJob builds the mover Job and work spec that run ws (its
// operation and extra sections set) against r. ws.Repository and
// ws.Target are filled here; a bootstrap alone may create the repository.
func (f *Function) repositoryJob(ctx context.Context, r *repository.Object, jobName, op string, ws mover.WorkSpec, minTTL int32) (*batchv1.Job, *corev1.ConfigMap, string, *refusal, error) {
	work, mounts, err := repository.Work(r.Ref, r.Obj, r.Spec)
	if err != nil {
		return nil, nil, "", &refusal{"UnsupportedBackend", err.Error()}, nil
	}
	if ws.Operation != mover.OpBootstrap {
		work.Create = nil
	}
	kind := string(r.Ref.Kind)
	owner := metav1.OwnerReference{APIVersion: snapv1.GroupVersion.String(), Kind: kind, Name: r.Ref.Name, UID: r.Obj.GetUID(), Controller: ptr(true)}
	var owners metav1.OwnerReference
	if r.Ref.Kind == snapv1.KindRepository {
		owners = owner
	}
	ws.Repository = work
	ws.Target = mover.Target{Kind: kind, Namespace: r.Obj.GetNamespace(), Name: r.Ref.Name, UID: string(r.Obj.GetUID()), Generation: r.Obj.GetGeneration()}
	params := moverjob.Params{
		Name: jobName, Namespace: r.Namespace, Owner: owners,
		Labels: map[string]string{wellknown.LabelRepository: r.Ref.Name, wellknown.LabelOp: op},
		Image:  f.MoverImage, ServiceAccount: f.MoverServiceAccount,
		Work:           ws,
		PasswordSecret: r.Spec.Encryption.PasswordSecretRef.Name, PasswordKey: r.Spec.Encryption.PasswordSecretRef.Key,
		CredentialsSecret: mounts.Credentials, CABundle: mounts.CABundle,
		RepositoryClaim: mounts.RepoClaim, RepositoryNFS: mounts.RepoNFS, RepositoryHost: mounts.HostPath,
		RepositoryHostTrusted: mounts.HostTrusted,
		Defaults:              r.Spec.MoverDefaults, ActiveDeadline: moverjob.BootstrapActiveDeadline,
		MinTTLSecondsAfterFinished: minTTL,
	}
	// A probe opens the repository as its bootstrap does, so it gets the
	// same deadlines: a slow backend given more time must not time out.
	if b := r.Spec.Bootstrap; b != nil {
		params.FailurePolicy = b.FailurePolicy
	}
	job, cm, err := host.BuildMoverJob(ctx, f.Client, params)
	if errors.Is(err, privilege.ErrNotPermitted) {
		return nil, nil, "", &refusal{ReasonNotPermitted, err.Error()}, nil
	} else if err != nil {
		return nil, nil, "", nil, err
	}
	if r.Ref.Kind == snapv1.KindClusterRepository {
		// A namespaced Job cannot be owned by a cluster-scoped object here.
		job.OwnerReferences, cm.OwnerReferences = nil, nil
		// Its references may name other namespaces; the owner of the
		// ClusterRepository gave them to snapflow. Copies of finished
		// runs go first.
		if r.Homes().Needed(r.Namespace) {
			if err := projection.Sweep(ctx, f.Client, r.Namespace, f.now()); err != nil {
				return nil, nil, "", nil, err
			}
		}
		if err := projection.Apply(ctx, f.Client, job, r.Homes(), true, ""); errors.Is(err, projection.ErrSource) {
			return nil, nil, "", &refusal{"CredentialsMissing", err.Error()}, nil
		} else if err != nil {
			return nil, nil, "", nil, err
		}
	}
	return job, cm, work.Backend.Kind(), nil, nil
}

// createRepositoryJob creates a repository run's work spec and Job.
func (f *Function) createRepositoryJob(ctx context.Context, job *batchv1.Job, cm *corev1.ConfigMap) error {
	if err := f.Client.Create(ctx, cm); apierrors.IsAlreadyExists(err) {
		// A spec left by an earlier attempt under this name is replaced,
		// not updated: the function needs no right to rewrite ConfigMaps.
		if err := f.replaceWorkSpec(ctx, cm); err != nil {
			return err
		}
	} else if err != nil {
		return fmt.Errorf("create the work spec of job %s: %w", job.Name, err)
	}
	if err := f.Client.Create(ctx, job); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create job %s: %w", job.Name, err)
	}
	return nil
}

func (f *Function) updateRepoStatus(ctx context.Context, r *repository.Object, mutate func(*snapv1.RepositoryStatus, int64)) error {
	return repository.UpdateStatus(ctx, f.Client, f.Namespace, r.Ref, r.Obj.GetNamespace(), func(live *repository.Object) error {
		mutate(live.Status, live.Obj.GetGeneration())
		return nil
	})
}

// replaceWorkSpec deletes the work-spec ConfigMap under cm's name, if
// snapflow made it, and creates cm in its place.
func (f *Function) replaceWorkSpec(ctx context.Context, cm *corev1.ConfigMap) error {
	var old corev1.ConfigMap
	if err := f.Client.Get(ctx, client.ObjectKeyFromObject(cm), &old); err != nil && !apierrors.IsNotFound(err) {
		return err
	} else if err == nil {
		if old.Labels[wellknown.LabelManagedBy] != wellknown.ManagedByValue {
			return fmt.Errorf("configmap %s/%s, which snapflow did not make, is where a repository run's work spec goes: delete or rename it", old.Namespace, old.Name)
		}
		uid := old.UID
		if err := f.Client.Delete(ctx, &old, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return err
		}
	}
	if err := f.Client.Create(ctx, cm); err != nil {
		return fmt.Errorf("create work spec %s: %w", cm.Name, err)
	}
	return nil
}
