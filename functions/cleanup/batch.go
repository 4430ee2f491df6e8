package cleanup

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/functions/host"
	kernel "github.com/snapflow/snapflow/internal/cleanup"
	"github.com/snapflow/snapflow/internal/jobwatch"
	"github.com/snapflow/snapflow/internal/mover"
	"github.com/snapflow/snapflow/internal/moverjob"
	"github.com/snapflow/snapflow/internal/privilege"
	"github.com/snapflow/snapflow/internal/projection"
	"github.com/snapflow/snapflow/internal/repository"
)

func leaseName(repo *repoState) string { return "snapflow-delete-" + poolKey(repo.ref) }

// leaseKey is the repository's deletion Lease, in snapflow's own namespace
// for every repository: the Lease records which Job a batch is, and a
// tenant who may write Leases in a Repository's namespace must not be able
// to change that record.
func (f *Function) leaseKey(repo *repoState) client.ObjectKey {
	return client.ObjectKey{Namespace: f.Namespace, Name: leaseName(repo)}
}

// settleBatch looks at the repository's batch Job: it returns the Job while
// one runs; once it finished it removes it and frees the Lease.
func (f *Function) settleBatch(ctx context.Context, repo *repoState, pool map[types.UID]*snapv1.Snapshot) (*batchv1.Job, map[types.UID]bool, error) {
	if repo.missing {
		return nil, nil, nil
	}
	var lease coordv1.Lease
	err := f.Client.Get(ctx, f.leaseKey(repo), &lease)
	if apierrors.IsNotFound(err) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	holder := ""
	if lease.Spec.HolderIdentity != nil {
		holder = *lease.Spec.HolderIdentity
	}
	if holder == "" {
		return nil, nil, nil
	}
	var job batchv1.Job
	var released map[types.UID]bool
	err = f.Client.Get(ctx, client.ObjectKey{Namespace: repo.homeNS, Name: holder}, &job)
	switch {
	case err == nil && !jobwatch.Done(&job):
		return &job, nil, nil
	case err != nil && !apierrors.IsNotFound(err):
		return nil, nil, err
	case err != nil:
		// Gone before it was settled: its members go into the next batch.
		if err := f.unbatch(ctx, pool, holder, nil); err != nil {
			return nil, nil, err
		}
	case err == nil && !ownBatch(&lease, &job) && !job.GetDeletionTimestamp().IsZero():
		return &job, nil, nil // going: the next pass starts the batch again
	case err == nil && !ownBatch(&lease, &job):
		// Not the Job the Lease recorded: one placed first under the
		// batch's name, or one a delivery created and stopped before it
		// recorded. Nothing it reports is trusted; the members stay and go
		// into the next batch (a kopia snapshot deleted already counts as
		// done). A look-alike of ours is removed for that batch; any other
		// Job is its owner's, and the repository's deletions wait for it.
		if job.Labels[wellknown.LabelManagedBy] != wellknown.ManagedByValue || job.Labels[wellknown.LabelOp] != wellknown.OpDeleteBatch {
			msg := fmt.Sprintf("Job %s/%s, which snapflow did not create, holds the name of this repository's next deletion batch; its deletions wait until that Job is deleted", job.Namespace, job.Name)
			host.Log(ctx).Info(msg)
			if f.Recorder != nil && repo.obj != nil {
				f.Recorder.Event(repo.obj, corev1.EventTypeWarning, "DeletionBatchBlocked", msg)
			}
			return &job, nil, nil
		}
		host.Log(ctx).Info("deletion batch Job not recorded on the Lease; nothing it reports is trusted, its members go into the next batch", "job", job.Name)
		if err := f.removeBatch(ctx, &job); err != nil {
			return nil, nil, err
		}
		if err := f.unbatch(ctx, pool, job.Name, nil); err != nil {
			return nil, nil, err
		}
	case err == nil:
		// Released before the Job is reaped: its pod's message is the only
		// record of what it deleted.
		if released, err = f.releaseFinished(ctx, &job, pool, repo.ref); err != nil {
			return nil, nil, err
		}
		if msg := failedMessage(&job); msg != "" {
			host.Log(ctx).Info("deletion batch failed; its unfinished members go into the next batch", "job", job.Name, "reason", msg)
		}
		if err := f.removeBatch(ctx, &job); err != nil {
			return nil, nil, err
		}
		if err := f.unbatch(ctx, pool, job.Name, released); err != nil {
			return nil, nil, err
		}
	}
	// Free the Lease (optimistic: a concurrent holder change wins).
	lease.Spec.HolderIdentity = nil
	delete(lease.Annotations, wellknown.AnnotationBatchJobUID)
	if err := f.Client.Update(ctx, &lease); err != nil && !apierrors.IsConflict(err) {
		return nil, nil, err
	}
	return nil, released, nil
}

// unbatch takes the members a finished batch did not release out of it, so
// the next batch counts as another attempt even when it has the same
// members and so the same name (kopiur_snapshot_deletion_failures_total).
func (f *Function) unbatch(ctx context.Context, pool map[types.UID]*snapv1.Snapshot, job string, released map[types.UID]bool) error {
	var errs []error
	for uid, s := range pool {
		if released[uid] || s.Status.Cleanup == nil || s.Status.Cleanup.Batch != job {
			continue
		}
		errs = append(errs, client.IgnoreNotFound(f.patchSnapshot(ctx, s, func(st *snapv1.SnapshotStatus, _ int64) {
			if st.Cleanup != nil && st.Cleanup.Batch == job {
				st.Cleanup.Batch = ""
			}
		})))
	}
	return errors.Join(errs...)
}

// ownBatch says whether job is the one the Lease's holder created: its UID
// is the one recorded when it was created. A Job found by the holder's name
// alone proves nothing.
func ownBatch(lease *coordv1.Lease, job *batchv1.Job) bool {
	uid := lease.Annotations[wellknown.AnnotationBatchJobUID]
	return uid != "" && uid == string(job.UID)
}

// removeBatch deletes a finished batch Job (that very Job: UID
// precondition), its work spec and the credentials projected for it.
func (f *Function) removeBatch(ctx context.Context, job *batchv1.Job) error {
	if err := f.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground), client.Preconditions{UID: &job.UID}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	// The work spec, only if it is snapflow's (that very one: UID
	// precondition): a ConfigMap of that name is otherwise its owner's.
	var cm corev1.ConfigMap
	err := f.Client.Get(ctx, client.ObjectKey{Namespace: job.Namespace, Name: job.Name}, &cm)
	switch {
	case err == nil && cm.Labels[wellknown.LabelManagedBy] == wellknown.ManagedByValue:
		if err := f.Client.Delete(ctx, &cm, client.Preconditions{UID: &cm.UID}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	case err != nil && !apierrors.IsNotFound(err):
		return err
	}
	return projection.Reap(ctx, f.Client, job.Namespace, job.Name)
}

// recordBatch writes the UID of the batch Job just created onto the Lease
// its name holds, the proof settleBatch asks for.
func (f *Function) recordBatch(ctx context.Context, repo *repoState, job *batchv1.Job) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var lease coordv1.Lease
		if err := f.Client.Get(ctx, f.leaseKey(repo), &lease); err != nil {
			return err
		}
		if h := lease.Spec.HolderIdentity; h == nil || *h != job.Name || lease.Annotations[wellknown.AnnotationBatchJobUID] == string(job.UID) {
			return nil
		}
		metav1.SetMetaDataAnnotation(&lease.ObjectMeta, wellknown.AnnotationBatchJobUID, string(job.UID))
		return f.Client.Update(ctx, &lease)
	})
}

// releaseFinished releases the members a finished batch deleted, as its own
// pod reported them in its termination message, matched against the work
// spec this function wrote (the one the Job pins, not an edit made since).
// A Snapshot's status is never enough: whoever may write status in its
// namespace could have written it.
// pool holds the repository's deleting Snapshots, just listed; release
// re-reads each before it removes the finalizer.
func (f *Function) releaseFinished(ctx context.Context, job *batchv1.Job, pool map[types.UID]*snapv1.Snapshot, ref snapv1.RepositoryRef) (map[types.UID]bool, error) {
	ended, err := jobwatch.Terminated(ctx, f.Client, job, "mover")
	if errors.Is(err, mover.ErrReportMismatch) {
		host.Log(ctx).Info("deletion batch report not read; nothing released", "job", job.Name, "reason", err.Error())
		return nil, nil
	}
	if err != nil || ended == nil {
		return nil, err
	}
	msg, exited0 := ended.Message, ended.ExitCode == 0
	spec, err := jobwatch.WorkSpec(ctx, f.Client, job)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil && !errors.Is(err, mover.ErrReportMismatch):
		return nil, err
	case err != nil || spec.Delete == nil:
		host.Log(ctx).Info("deletion batch has no work spec of snapflow's; nothing released", "job", job.Name)
		return nil, nil
	}
	members := spec.Delete.Members
	// Only a deleting member of this repository's pool, and one its
	// namespace may use: the work spec is not proof of either.
	allowed := map[string]bool{} // by namespace: one access check each
	vouched := func(m mover.DeleteMember) *snapv1.Snapshot {
		s, ok := pool[types.UID(m.UID)]
		if !ok || s.Namespace != m.Namespace || s.Name != m.Name {
			return nil
		}
		may, checked := allowed[s.Namespace]
		if !checked {
			may = repository.AccessProblem(ctx, f.Client, s.Namespace, ref) == ""
			allowed[s.Namespace] = may
		}
		if !may {
			return nil
		}
		return s
	}
	released := map[types.UID]bool{}
	if exited0 { // a crashed mover's message may be its log
		done, err := mover.ParseDeleted(msg, len(members))
		if err != nil {
			host.Log(ctx).Info("deletion batch reported members it did not have; nothing released", "job", job.Name, "error", err.Error())
			return nil, nil
		}
		for _, i := range done {
			m := members[i]
			s := vouched(m)
			if s == nil {
				continue
			}
			if err := f.release(ctx, s, kernel.ReasonDeleted, "kopia snapshot "+m.SnapshotID+" deleted by batch job "+job.Name); err != nil {
				return nil, err
			}
			released[s.UID] = true
		}
	}
	// Why the rest were not deleted goes on their own status, for the
	// members vouched for only (the others are blanked, keeping indexes).
	// The work is this function's delete batch whatever the ConfigMap,
	// which a tenant may edit in its own namespace, says.
	rep, err := jobwatch.ReportOf(ended)
	if errors.Is(err, mover.ErrNoReport) || errors.Is(err, mover.ErrReportMismatch) {
		return released, nil
	} else if err != nil {
		return nil, err
	}
	own := &mover.WorkSpec{Operation: mover.OpDelete, Target: mover.Target{Kind: string(ref.Kind), Namespace: ref.Namespace, Name: ref.Name},
		Delete: &mover.DeleteWork{Members: make([]mover.DeleteMember, len(members))}}
	for i, m := range members {
		if s := vouched(m); s != nil && !released[s.UID] {
			own.Delete.Members[i] = m
		}
	}
	if err := rep.Apply(ctx, f.Client, own); err != nil && !errors.Is(err, mover.ErrReportMismatch) {
		return nil, err
	}
	return released, nil
}

func failedMessage(j *batchv1.Job) string {
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
			return c.Reason + ": " + c.Message
		}
	}
	return ""
}

// startBatch takes the Lease and creates one delete Job for up to MaxBatch
// members, once the quiet window after the newest deletion has passed.
func (f *Function) startBatch(ctx context.Context, repo *repoState, ready []*snapv1.Snapshot) error {
	sort.Slice(ready, func(i, j int) bool {
		if !ready[i].DeletionTimestamp.Equal(ready[j].DeletionTimestamp) {
			return ready[i].DeletionTimestamp.Before(ready[j].DeletionTimestamp)
		}
		return ready[i].Namespace+"/"+ready[i].Name < ready[j].Namespace+"/"+ready[j].Name
	})
	// Deletion timestamps have whole seconds: the newest may be up to a
	// second later than it reads, so count the window from the upper bound.
	newest := ready[len(ready)-1].DeletionTimestamp.Add(time.Second)
	if len(ready) < f.maxBatch() && f.now().Sub(newest) < f.window() {
		return nil // more may come: the next event or resync fires the batch
	}
	if len(ready) > f.maxBatch() {
		ready = ready[:f.maxBatch()]
	}
	h := sha256.New()
	for _, s := range ready {
		fmt.Fprintf(h, "%s\x00", s.UID)
	}
	name := "snapdel-" + poolKey(repo.ref)[:10] + "-" + hex.EncodeToString(h.Sum(nil))[:8]
	work, mounts, err := repository.Work(repo.ref, repo.obj, repo.spec)
	if err != nil {
		return err
	}
	var members []mover.DeleteMember
	for _, s := range ready {
		members = append(members, mover.DeleteMember{Namespace: s.Namespace, Name: s.Name, UID: string(s.UID), SnapshotID: s.Status.Snapshot.KopiaSnapshotID})
	}
	labels := map[string]string{wellknown.LabelOp: wellknown.OpDeleteBatch, wellknown.LabelRepository: repo.ref.Name, wellknown.LabelRepositoryKind: string(repo.ref.Kind)}
	if repo.ref.Namespace != "" {
		labels[wellknown.LabelRepositoryNamespace] = repo.ref.Namespace
	}
	params := moverjob.Params{
		Name: name, Namespace: repo.homeNS, Labels: labels,
		Image: f.MoverImage, ServiceAccount: f.MoverServiceAccount,
		Work: mover.WorkSpec{Operation: mover.OpDelete, Repository: work,
			Target: mover.Target{Kind: string(repo.ref.Kind), Namespace: repo.ref.Namespace, Name: repo.ref.Name, UID: string(repo.obj.GetUID())},
			Delete: &mover.DeleteWork{Members: members}},
		PasswordSecret: repo.spec.Encryption.PasswordSecretRef.Name, PasswordKey: repo.spec.Encryption.PasswordSecretRef.Key,
		CredentialsSecret: mounts.Credentials, CABundle: mounts.CABundle,
		RepositoryClaim: mounts.RepoClaim, RepositoryNFS: mounts.RepoNFS, RepositoryHost: mounts.HostPath,
		RepositoryHostTrusted: mounts.HostTrusted,
		Defaults:              repo.spec.MoverDefaults,
	}
	job, cm, err := host.BuildMoverJob(ctx, f.Client, params)
	if errors.Is(err, privilege.ErrNotPermitted) {
		// The data stays and so do the finalizers: the safe side.
		for _, s := range ready {
			if f.Recorder != nil {
				f.Recorder.Event(s, corev1.EventTypeWarning, "DeletionNotPermitted", "the kopia data cannot be deleted yet: "+err.Error())
			}
		}
		host.Log(ctx).Info("deletion batch refused by the privilege gate", "repository", repo.ref.Name, "reason", err.Error())
		return nil
	} else if err != nil {
		return err
	}
	// The repository's one deletion slot, taken only for a Job that can run.
	acquired, err := f.acquire(ctx, repo, name)
	if err != nil || !acquired {
		return err
	}
	// Deletion Jobs are reaped by this function, not by TTL: their outcome is read first.
	job.Spec.TTLSecondsAfterFinished = nil
	job.OwnerReferences, cm.OwnerReferences = nil, nil
	// A ClusterRepository may name Secrets outside snapflow's namespace;
	// its owner gave them to snapflow, so they are copied without asking.
	ro := repository.Object{Ref: repo.ref, Namespace: repo.homeNS, Spec: repo.spec}
	if err := projection.Apply(ctx, f.Client, job, ro.Homes(), true, ""); err != nil {
		return err
	}
	if err := host.CreateWorkSpec(ctx, f.Client, cm); err != nil {
		return err
	}
	// A Job already there under the name is not recorded: it is either
	// this batch's, made by a delivery that stopped before recording, or
	// someone else's; settleBatch treats both as untrusted.
	if err := f.Client.Create(ctx, job); err == nil {
		if err := f.recordBatch(ctx, repo, job); err != nil {
			return err
		}
	} else if !apierrors.IsAlreadyExists(err) {
		return err
	}
	var errs []error
	for _, s := range ready {
		errs = append(errs, f.noteBatch(ctx, s, name))
	}
	host.Log(ctx).Info("deletion batch started", "job", name, "repository", repo.ref.Name, "members", len(ready))
	return errors.Join(errs...)
}

func (f *Function) noteBatch(ctx context.Context, s *snapv1.Snapshot, job string) error {
	return f.patchSnapshot(ctx, s, func(st *snapv1.SnapshotStatus, gen int64) {
		st.Phase = snapv1.SnapshotDeleting
		if st.Cleanup == nil {
			st.Cleanup = &snapv1.CleanupStatus{}
		}
		if st.Cleanup.Batch != job {
			st.Cleanup.Batch = job
			st.Cleanup.Attempts++
		}
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: wellknown.ConditionDeletionHeld, Status: metav1.ConditionFalse, Reason: wellknown.ReasonDeletionInProgress,
			Message: "kopia snapshot " + s.Status.Snapshot.KopiaSnapshotID + " is being deleted by batch job " + job, ObservedGeneration: gen})
	})
}

// acquire takes the repository's deletion Lease for job; false when another
// batch holds it.
func (f *Function) acquire(ctx context.Context, repo *repoState, job string) (bool, error) {
	now := metav1.NewMicroTime(f.now())
	var lease coordv1.Lease
	err := f.Client.Get(ctx, f.leaseKey(repo), &lease)
	if apierrors.IsNotFound(err) {
		key := f.leaseKey(repo)
		lease = coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name,
			Labels: map[string]string{wellknown.LabelManagedBy: wellknown.ManagedByValue}},
			Spec: coordv1.LeaseSpec{HolderIdentity: &job, AcquireTime: &now}}
		if err := f.Client.Create(ctx, &lease); err != nil {
			if apierrors.IsAlreadyExists(err) {
				return false, nil
			}
			return false, err
		}
		return true, nil
	}
	if err != nil {
		return false, err
	}
	if h := lease.Spec.HolderIdentity; h != nil && *h != "" {
		// Held already, for this batch by another delivery or for another:
		// either way its record stays as it is.
		return *h == job, nil
	}
	lease.Spec.HolderIdentity, lease.Spec.AcquireTime = &job, &now
	delete(lease.Annotations, wellknown.AnnotationBatchJobUID)
	if err := f.Client.Update(ctx, &lease); err != nil {
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}
