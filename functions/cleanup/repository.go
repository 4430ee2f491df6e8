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
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/events"
	"github.com/snapflow/snapflow/functions/runtime"
	"github.com/snapflow/snapflow/functions/snapshot"
	"github.com/snapflow/snapflow/internal/deletion"
	"github.com/snapflow/snapflow/internal/jobwatch"
	"github.com/snapflow/snapflow/internal/mover"
	"github.com/snapflow/snapflow/internal/moverjob"
	"github.com/snapflow/snapflow/internal/privilege"
	"github.com/snapflow/snapflow/internal/projection"
	"github.com/snapflow/snapflow/internal/statuspatch"
)

func hasFinalizer(s *snapv1.Snapshot) bool {
	return controllerutil.ContainsFinalizer(s, wellknown.FinalizerSnapshotCleanup)
}

// repoOf is the repository a Snapshot's data lives in, as pinned at run
// time; none for a run that never got a mover Job nor a kopia snapshot
// (one that only claimed a slot has nothing there).
func repoOf(s *snapv1.Snapshot) (snapv1.RepositoryRef, bool) {
	if s.Status.Resolved == nil || s.Status.Resolved.Repository == nil {
		return snapv1.RepositoryRef{}, false
	}
	if s.Status.Job == nil && (s.Status.Snapshot == nil || s.Status.Snapshot.KopiaSnapshotID == "") {
		return snapv1.RepositoryRef{}, false
	}
	return s.Status.Resolved.Repository.Qualified(s.Namespace), true
}

func poolKey(r snapv1.RepositoryRef) string { return snapshot.PoolKey(r.Kind, r.Namespace, r.Name) }

func repoFromLabels(j *batchv1.Job) snapv1.RepositoryRef {
	r := snapv1.RepositoryRef{Kind: snapv1.RepositoryKind(j.Labels[wellknown.LabelRepositoryKind]), Name: j.Labels[wellknown.LabelRepository], Namespace: j.Labels[wellknown.LabelRepositoryNamespace]}
	if r.Kind == "" {
		r.Kind = snapv1.KindRepository
	}
	return r
}

// deletingRepos lists the repositories that have Snapshots waiting on cleanup.
func (f *Function) deletingRepos(ctx context.Context) ([]snapv1.RepositoryRef, error) {
	var list snapv1.SnapshotList
	if err := f.Client.List(ctx, &list); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []snapv1.RepositoryRef
	for i := range list.Items {
		s := &list.Items[i]
		if s.DeletionTimestamp == nil || !hasFinalizer(s) {
			continue
		}
		r, ok := repoOf(s)
		if !ok {
			if err := f.reconcileSnapshot(ctx, s.Namespace, s.Name); err != nil {
				return nil, err
			}
			continue
		}
		if !seen[poolKey(r)] {
			seen[poolKey(r)] = true
			out = append(out, r)
		}
	}
	return out, nil
}

// repoState is what one pass over a repository needs to know of it.
type repoState struct {
	ref       snapv1.RepositoryRef
	obj       client.Object
	spec      *snapv1.RepositorySpec
	status    *snapv1.RepositoryStatus
	homeNS    string // where its Secrets and volumes live and batches run
	missing   bool
	breaker   deletion.Breaker
	badAckMsg string
}

func (f *Function) readRepo(ctx context.Context, ref snapv1.RepositoryRef) (*repoState, error) {
	st := &repoState{ref: ref}
	if ref.Kind == snapv1.KindClusterRepository {
		var cr snapv1.ClusterRepository
		err := f.Client.Get(ctx, client.ObjectKey{Name: ref.Name}, &cr)
		if apierrors.IsNotFound(err) {
			st.missing = true
			return st, nil
		}
		if err != nil {
			return nil, err
		}
		st.obj, st.spec, st.status, st.homeNS = &cr, &cr.Spec.RepositorySpec, &cr.Status, f.Namespace
	} else {
		var r snapv1.Repository
		err := f.Client.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, &r)
		if apierrors.IsNotFound(err) {
			st.missing = true
			return st, nil
		}
		if err != nil {
			return nil, err
		}
		st.obj, st.spec, st.status, st.homeNS = &r, &r.Spec, &r.Status, r.Namespace
	}
	st.breaker, st.badAckMsg = deletion.BreakerOf(st.spec, st.obj.GetAnnotations(), f.now())
	return st, nil
}

// reconcileRepository is one pass over every deleting Snapshot of a repository.
func (f *Function) reconcileRepository(ctx context.Context, ref snapv1.RepositoryRef) error {
	var list snapv1.SnapshotList
	if err := f.Client.List(ctx, &list); err != nil {
		return err
	}
	var members []*snapv1.Snapshot
	for i := range list.Items {
		s := &list.Items[i]
		if r, ok := repoOf(s); ok && s.DeletionTimestamp != nil && hasFinalizer(s) && poolKey(r) == poolKey(ref) {
			members = append(members, s)
		}
	}
	repo, err := f.readRepo(ctx, ref)
	if err != nil {
		return err
	}
	pool := map[types.UID]*snapv1.Snapshot{}
	for _, s := range members {
		pool[s.UID] = s
	}
	batch, released, err := f.settleBatch(ctx, repo, pool)
	if err != nil {
		return err
	}
	var toDelete []*snapv1.Snapshot
	var pending []deletion.Pending
	byName := map[string]*snapv1.Snapshot{}
	gone := map[string]bool{} // namespace → terminating, read once per pass
	for _, s := range members {
		if released[s.UID] {
			continue
		}
		facts, err := f.facts(ctx, s, repo, gone)
		if err != nil {
			return err
		}
		d := deletion.Classify(s, facts)
		switch {
		case d.Action == deletion.Release:
			if err := f.release(ctx, s, d.Reason, d.Message); err != nil {
				return err
			}
		default:
			// The repository comes from status, which movers write: delete
			// only from one the Snapshot's namespace may use, on the live
			// Repository or ClusterRepository.
			if msg := snapshot.AccessProblem(ctx, f.Client, s.Namespace, ref); msg != "" {
				if err := f.markDeleting(ctx, s, metav1.ConditionFalse, "RepositoryNotAllowed",
					fmt.Sprintf("%s; its kopia snapshot is not deleted. Annotate this Snapshot with %s to release it and keep the data", msg, wellknown.AnnotationSkipSnapshotCleanup)); err != nil {
					return err
				}
				continue
			}
			if c := meta.FindStatusCondition(s.Status.Conditions, wellknown.ConditionDeletionHeld); c != nil && c.Reason == mover.ReasonSnapshotNotOwned {
				continue // the mover found the data is another namespace's: retrying cannot help
			}
			toDelete = append(toDelete, s)
			key := s.Namespace + "/" + s.Name
			byName[key] = s
			if d.External {
				pending = append(pending, deletion.Pending{Name: key, DeletedAt: s.DeletionTimestamp.Time})
			}
		}
	}
	held := map[string]bool{}
	for _, n := range repo.breaker.Held(pending) {
		held[n] = true
	}
	if err := f.reportBreaker(ctx, repo, pending, held, byName); err != nil {
		return err
	}
	if repo.missing {
		// The repository is gone: deleting is impossible, releasing would
		// lose track of data that may still exist. Say so and wait.
		for _, s := range toDelete {
			if err := f.markDeleting(ctx, s, metav1.ConditionFalse, "RepositoryMissing",
				fmt.Sprintf("%s %s does not exist, so its kopia snapshot cannot be deleted; recreate it, or annotate this Snapshot with %s to release it and keep the data", repo.ref.Kind, repo.ref.Name, wellknown.AnnotationSkipSnapshotCleanup)); err != nil {
				return err
			}
		}
		return nil
	}
	if repo.spec.Suspend && batch == nil {
		// A suspended repository's data is not touched: deletions wait
		// for the resume (a batch already running is let finish).
		for _, s := range toDelete {
			if err := f.markDeleting(ctx, s, metav1.ConditionFalse, snapshot.ReasonRepositorySuspended,
				fmt.Sprintf("%s %s is suspended (spec.suspend: true), so its kopia snapshot is deleted once it is resumed; annotate this Snapshot with %s to release it now and keep the data", repo.ref.Kind, repo.ref.Name, wellknown.AnnotationSkipSnapshotCleanup)); err != nil {
				return err
			}
		}
		return nil
	}
	if repo.status.Phase == snapv1.RepositoryDegraded && batch == nil {
		// A probe could not open the repository, or found other storage
		// there: a deletion would fail, or find nothing and release
		// Snapshots whose data is still in the real one. Wait for a probe
		// to open it again.
		msg := fmt.Sprintf("%s %s is Degraded, so its kopia snapshot is not deleted yet", repo.ref.Kind, repo.ref.Name)
		if c := meta.FindStatusCondition(repo.status.Conditions, wellknown.ConditionReady); c != nil && c.Message != "" {
			msg += ": " + c.Message
		}
		for _, s := range toDelete {
			if err := f.markDeleting(ctx, s, metav1.ConditionFalse, "RepositoryDegraded", msg); err != nil {
				return err
			}
		}
		return nil
	}
	var ready []*snapv1.Snapshot
	for _, s := range toDelete {
		if !held[s.Namespace+"/"+s.Name] {
			ready = append(ready, s)
		}
	}
	if batch != nil || len(ready) == 0 {
		return nil // one batch at a time per repository
	}
	return f.startBatch(ctx, repo, ready)
}

// facts reads whether the Snapshot's schedule, policy and namespace still
// exist, and what its repository says of namespace deletion.
func (f *Function) facts(ctx context.Context, s *snapv1.Snapshot, repo *repoState, gone map[string]bool) (deletion.Facts, error) {
	var fa deletion.Facts
	if repo.spec != nil && repo.ref.Kind == snapv1.KindClusterRepository {
		// Delete is refused on a Repository, which goes with the
		// namespace; one stored before that rule is treated as Orphan.
		fa.OnNamespaceDelete = repo.spec.OnNamespaceDelete
	}
	if g, read := gone[s.Namespace]; read {
		fa.NamespaceGone = g
	} else {
		var ns corev1.Namespace
		switch err := f.Client.Get(ctx, client.ObjectKey{Name: s.Namespace}, &ns); {
		case apierrors.IsNotFound(err):
			fa.NamespaceGone = true
		case err != nil:
			return fa, fmt.Errorf("read namespace %s to tell a namespace deletion apart: %w", s.Namespace, err)
		default:
			fa.NamespaceGone = ns.DeletionTimestamp != nil
		}
		gone[s.Namespace] = fa.NamespaceGone
	}
	if name := s.Labels[wellknown.LabelSchedule]; name != "" {
		var sched snapv1.SnapshotSchedule
		err := f.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: name}, &sched)
		switch {
		case apierrors.IsNotFound(err):
			fa.ScheduleGone = true
		case err != nil:
			return fa, err
		default:
			uid := s.Labels[wellknown.LabelScheduleUID]
			fa.ScheduleGone = sched.DeletionTimestamp != nil || (uid != "" && uid != string(sched.UID))
		}
	}
	if s.Spec.PolicyRef != nil {
		ns := s.Namespace
		if s.Spec.PolicyRef.Namespace != "" {
			ns = s.Spec.PolicyRef.Namespace
		}
		var p snapv1.SnapshotPolicy
		err := f.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: s.Spec.PolicyRef.Name}, &p)
		switch {
		case apierrors.IsNotFound(err):
			fa.PolicyGone = true
		case err != nil:
			return fa, err
		default:
			fa.PolicyGone = p.DeletionTimestamp != nil
			if p.Spec.Deletion != nil {
				fa.PolicyOnDelete = p.Spec.Deletion.OnPolicyDelete
			}
		}
	}
	return fa, nil
}

// release removes the finalizer, with an event saying what happened to the data.
func (f *Function) release(ctx context.Context, s *snapv1.Snapshot, reason, msg string) error {
	if c := meta.FindStatusCondition(s.Status.Conditions, wellknown.ConditionDeletionHeld); reason != deletion.ReasonDeleted && c != nil && c.Reason == wellknown.ReasonDeletionInProgress {
		// A batch was to delete this data and now it is kept: say so
		// first, as the exporter reads a deletion's outcome from the
		// Snapshot's last state.
		if err := f.patchSnapshot(ctx, s, func(st *snapv1.SnapshotStatus, gen int64) {
			meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: wellknown.ConditionDeletionHeld, Status: metav1.ConditionFalse, Reason: reason, Message: msg, ObservedGeneration: gen})
		}); err != nil {
			return client.IgnoreNotFound(err)
		}
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var live snapv1.Snapshot
		if err := f.Client.Get(ctx, client.ObjectKeyFromObject(s), &live); err != nil {
			return err
		}
		if live.UID != s.UID || !controllerutil.RemoveFinalizer(&live, wellknown.FinalizerSnapshotCleanup) {
			return nil
		}
		return f.Client.Update(ctx, &live)
	})
	if err != nil {
		return client.IgnoreNotFound(err)
	}
	if f.Recorder != nil {
		typ := corev1.EventTypeNormal
		if reason == deletion.ReasonRetainedOnSchedule || reason == deletion.ReasonRetainedOnPolicy || reason == deletion.ReasonRetainedOnNamespace {
			typ = corev1.EventTypeWarning
		}
		f.Recorder.Event(s, typ, reason, msg)
	}
	runtime.Log(ctx).Info("released snapshot", "snapshot", s.Namespace+"/"+s.Name, "reason", reason)
	return nil
}

func (f *Function) markDeleting(ctx context.Context, s *snapv1.Snapshot, held metav1.ConditionStatus, reason, msg string) error {
	// Every caller keeps the data for now (the breaker holds, the other
	// reasons wait): a hold that starts, or changes its reason, is
	// announced, before the condition is written.
	if was := meta.FindStatusCondition(s.Status.Conditions, wellknown.ConditionDeletionHeld); was == nil || was.Reason != reason {
		// The id names the condition this hold replaces, so a hold that
		// ends and comes back is a new event, and a retry the same one.
		since := int64(0)
		if was != nil {
			since = was.LastTransitionTime.Unix()
		}
		if err := f.emitHeld(ctx, s, fmt.Sprintf("%s/held/%s/%d", s.UID, reason, since), reason, msg); err != nil {
			// An unreachable sink must not stop deletions: the condition,
			// the metrics and the Kubernetes Event still say it.
			runtime.Log(ctx).Error(err, "could not send the deletion held event", "snapshot", s.Namespace+"/"+s.Name)
		}
	}
	return f.patchSnapshot(ctx, s, func(st *snapv1.SnapshotStatus, gen int64) {
		st.Phase = snapv1.SnapshotDeleting
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: wellknown.ConditionDeletionHeld, Status: held, Reason: reason, Message: msg, ObservedGeneration: gen})
	})
}

// emitHeld sends dev.snapflow.deletion.held for a hold that starts now.
func (f *Function) emitHeld(ctx context.Context, s *snapv1.Snapshot, id, reason, msg string) error {
	if f.Emitter == nil {
		return nil
	}
	data := events.DeletionHeldData{Namespace: s.Namespace, Name: s.Name, UID: string(s.UID), Policy: s.Labels[wellknown.LabelConfig], Reason: reason, Message: msg}
	e, err := events.New(id, events.DeletionHeld, s.Namespace+"/"+s.Name, data)
	if err != nil {
		return err
	}
	return f.Emitter.Emit(ctx, e)
}

func (f *Function) patchSnapshot(ctx context.Context, s *snapv1.Snapshot, mutate func(*snapv1.SnapshotStatus, int64)) error {
	return statuspatch.Update(ctx, f.Client, client.ObjectKeyFromObject(s), func() *snapv1.Snapshot { return &snapv1.Snapshot{} },
		func(live *snapv1.Snapshot) error {
			mutate(&live.Status, live.Generation)
			return nil
		})
}

// reportBreaker marks held Snapshots and the repository's MassDeletionHeld.
func (f *Function) reportBreaker(ctx context.Context, repo *repoState, pending []deletion.Pending, held map[string]bool, byName map[string]*snapv1.Snapshot) error {
	if repo.missing {
		return nil
	}
	if repo.badAckMsg != "" && f.Recorder != nil {
		f.Recorder.Event(repo.obj, corev1.EventTypeWarning, "InvalidMassDeletionAck", repo.badAckMsg)
	}
	var cmd string
	if len(held) > 0 {
		cmd = deletion.AckCommand(repo.ref, repo.homeNS, pending)
	}
	names := make([]string, 0, len(held))
	for n := range held {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		s := byName[n]
		was := meta.FindStatusCondition(s.Status.Conditions, wellknown.ConditionDeletionHeld)
		msg := fmt.Sprintf("%d deletions are pending for %s %s, at or over its deletionProtection.threshold of %d, so every one is held. If they are intended, release them with: %s",
			len(pending), repo.ref.Kind, repo.ref.Name, repo.breaker.Threshold, cmd)
		if err := f.markDeleting(ctx, s, metav1.ConditionTrue, deletion.ReasonBreaker, msg); err != nil {
			return err
		}
		if (was == nil || was.Status != metav1.ConditionTrue) && f.Recorder != nil {
			f.Recorder.Event(s, corev1.EventTypeWarning, "SnapshotDeletionHeld", msg)
		}
	}
	status, reason, msg := metav1.ConditionFalse, "BelowThreshold", fmt.Sprintf("%d external deletions pending (threshold %d)", len(pending), repo.breaker.Threshold)
	if len(held) > 0 {
		status, reason, msg = metav1.ConditionTrue, "ThresholdExceeded", fmt.Sprintf("%d external deletions pending, %d held (threshold %d); release with: %s", len(pending), len(held), repo.breaker.Threshold, cmd)
	}
	if c := meta.FindStatusCondition(repo.status.Conditions, wellknown.ConditionMassDeletionHeld); c == nil && status == metav1.ConditionFalse {
		return nil // never tripped: keep the status quiet
	} else if c != nil && c.Status == status && c.Message == msg {
		return nil
	}
	return client.IgnoreNotFound(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		live, err := f.readRepo(ctx, repo.ref)
		if err != nil || live.missing {
			return err
		}
		orig := live.obj.DeepCopyObject().(client.Object)
		meta.SetStatusCondition(&live.status.Conditions, metav1.Condition{Type: wellknown.ConditionMassDeletionHeld, Status: status, Reason: reason, Message: msg, ObservedGeneration: live.obj.GetGeneration()})
		return f.Client.Status().Patch(ctx, live.obj, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
	}))
}

func leaseName(repo *repoState) string { return "snapflow-delete-" + poolKey(repo.ref) }

// settleBatch looks at the repository's batch Job: it returns the Job while
// one runs; once it finished it removes it and frees the Lease.
func (f *Function) settleBatch(ctx context.Context, repo *repoState, pool map[types.UID]*snapv1.Snapshot) (*batchv1.Job, map[types.UID]bool, error) {
	if repo.missing {
		return nil, nil, nil
	}
	var lease coordv1.Lease
	err := f.Client.Get(ctx, client.ObjectKey{Namespace: repo.homeNS, Name: leaseName(repo)}, &lease)
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
	case err == nil:
		// Released before the Job is reaped: its pod's message is the only
		// record of what it deleted.
		if released, err = f.releaseFinished(ctx, &job, pool, repo.ref); err != nil {
			return nil, nil, err
		}
		if msg := failedMessage(&job); msg != "" {
			runtime.Log(ctx).Info("deletion batch failed; its unfinished members go into the next batch", "job", job.Name, "reason", msg)
		}
		if err := f.Client.Delete(ctx, &job, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
			return nil, nil, err
		}
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: job.Namespace, Name: job.Name}}
		if err := f.Client.Delete(ctx, cm); err != nil && !apierrors.IsNotFound(err) {
			return nil, nil, err
		}
		if err := projection.Reap(ctx, f.Client, job.Namespace, job.Name); err != nil {
			return nil, nil, err
		}
	}
	// Free the Lease (optimistic: a concurrent holder change wins).
	lease.Spec.HolderIdentity = nil
	if err := f.Client.Update(ctx, &lease); err != nil && !apierrors.IsConflict(err) {
		return nil, nil, err
	}
	return nil, released, nil
}

// releaseFinished releases the members a finished batch deleted, as its own
// pod reported them in its termination message, matched against the work
// spec this function wrote. A Snapshot's status is never enough: whoever
// may write status in its namespace could have written it.
// pool holds the repository's deleting Snapshots, just listed; release
// re-reads each before it removes the finalizer.
func (f *Function) releaseFinished(ctx context.Context, job *batchv1.Job, pool map[types.UID]*snapv1.Snapshot, ref snapv1.RepositoryRef) (map[types.UID]bool, error) {
	ended, err := jobwatch.Terminated(ctx, f.Client, job, "mover")
	if err != nil || ended == nil {
		return nil, err
	}
	msg, exited0 := ended.Message, ended.ExitCode == 0
	var cm corev1.ConfigMap
	if err := f.Client.Get(ctx, client.ObjectKey{Namespace: job.Namespace, Name: job.Name}, &cm); apierrors.IsNotFound(err) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	spec, err := mover.Parse([]byte(cm.Data[mover.WorkSpecKey]))
	if err != nil || spec.Delete == nil || cm.Labels[wellknown.LabelManagedBy] != wellknown.ManagedByValue {
		runtime.Log(ctx).Info("deletion batch has no work spec of snapflow's; nothing released", "job", job.Name)
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
			may = snapshot.AccessProblem(ctx, f.Client, s.Namespace, ref) == ""
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
			runtime.Log(ctx).Info("deletion batch reported members it did not have; nothing released", "job", job.Name, "error", err.Error())
			return nil, nil
		}
		for _, i := range done {
			m := members[i]
			s := vouched(m)
			if s == nil {
				continue
			}
			if err := f.release(ctx, s, deletion.ReasonDeleted, "kopia snapshot "+m.SnapshotID+" deleted by batch job "+job.Name); err != nil {
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
	work, mounts, err := snapshot.RepositoryWork(repo.ref, repo.obj, repo.spec)
	if err != nil {
		return err
	}
	var members []mover.DeleteMember
	for _, s := range ready {
		members = append(members, mover.DeleteMember{Namespace: s.Namespace, Name: s.Name, UID: string(s.UID), SnapshotID: s.Status.Snapshot.KopiaSnapshotID})
	}
	labels := map[string]string{wellknown.LabelOp: opDelete, wellknown.LabelRepository: repo.ref.Name, wellknown.LabelRepositoryKind: string(repo.ref.Kind)}
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
	job, cm, err := runtime.BuildMoverJob(ctx, f.Client, params)
	if errors.Is(err, privilege.ErrNotPermitted) {
		// The data stays and so do the finalizers: the safe side.
		for _, s := range ready {
			if f.Recorder != nil {
				f.Recorder.Event(s, corev1.EventTypeWarning, "DeletionNotPermitted", "the kopia data cannot be deleted yet: "+err.Error())
			}
		}
		runtime.Log(ctx).Info("deletion batch refused by the privilege gate", "repository", repo.ref.Name, "reason", err.Error())
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
	ro := snapshot.RepositoryObject{Ref: repo.ref, Namespace: repo.homeNS, Spec: repo.spec}
	if err := projection.Apply(ctx, f.Client, job, ro.Homes(), true, ""); err != nil {
		return err
	}
	if err := f.Client.Create(ctx, cm); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	if err := f.Client.Create(ctx, job); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	var errs []error
	for _, s := range ready {
		errs = append(errs, f.noteBatch(ctx, s, name))
	}
	runtime.Log(ctx).Info("deletion batch started", "job", name, "repository", repo.ref.Name, "members", len(ready))
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
	err := f.Client.Get(ctx, client.ObjectKey{Namespace: repo.homeNS, Name: leaseName(repo)}, &lease)
	if apierrors.IsNotFound(err) {
		lease = coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: repo.homeNS, Name: leaseName(repo),
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
	if h := lease.Spec.HolderIdentity; h != nil && *h != "" && *h != job {
		return false, nil
	}
	lease.Spec.HolderIdentity, lease.Spec.AcquireTime = &job, &now
	if err := f.Client.Update(ctx, &lease); err != nil {
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}
