package cleanup

import (
	"context"
	"fmt"
	"sort"

	batchv1 "k8s.io/api/batch/v1"
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
	"github.com/snapflow/snapflow/functions/host"
	kernel "github.com/snapflow/snapflow/internal/cleanup"
	"github.com/snapflow/snapflow/internal/mover"
	"github.com/snapflow/snapflow/internal/repository"
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

func poolKey(r snapv1.RepositoryRef) string { return repository.PoolKey(r.Kind, r.Namespace, r.Name) }

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
	breaker   kernel.Breaker
	badAckMsg string
}

func (f *Function) readRepo(ctx context.Context, ref snapv1.RepositoryRef) (*repoState, error) {
	st := &repoState{ref: ref}
	r, err := repository.Get(ctx, f.Client, f.Namespace, ref, ref.Namespace)
	if apierrors.IsNotFound(err) {
		st.missing = true
		return st, nil
	}
	if err != nil {
		return nil, err
	}
	st.obj, st.spec, st.status, st.homeNS = r.Obj, r.Spec, r.Status, r.Namespace
	st.breaker, st.badAckMsg = kernel.BreakerOf(st.spec, st.obj.GetAnnotations(), f.now())
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
	var pending []kernel.Pending
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
		d := kernel.Classify(s, facts)
		switch d.Action {
		case kernel.Release:
			if err := f.release(ctx, s, d.Reason, d.Message); err != nil {
				return err
			}
		default:
			// The repository comes from status, which movers write: delete
			// only from one the Snapshot's namespace may use, on the live
			// Repository or ClusterRepository.
			if msg := repository.AccessProblem(ctx, f.Client, s.Namespace, ref); msg != "" {
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
				pending = append(pending, kernel.Pending{Name: key, DeletedAt: s.DeletionTimestamp.Time})
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
			if err := f.markDeleting(ctx, s, metav1.ConditionFalse, wellknown.ReasonRepositorySuspended,
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
func (f *Function) facts(ctx context.Context, s *snapv1.Snapshot, repo *repoState, gone map[string]bool) (kernel.Facts, error) {
	var fa kernel.Facts
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
	// The exporter reads a deletion's outcome from the Snapshot's last
	// state (the finalizer's removal is never seen): where the condition
	// would say otherwise (a batch was to delete data that is now kept,
	// or the breaker tripped while the batch that deleted it ran), say
	// what happened first.
	c := meta.FindStatusCondition(s.Status.Conditions, wellknown.ConditionDeletionHeld)
	deleting := c != nil && (c.Reason == wellknown.ReasonDeletionInProgress || c.Reason == kernel.ReasonDeleted)
	if (reason == kernel.ReasonDeleted) != deleting {
		err := statuspatch.Update(ctx, f.Client, client.ObjectKeyFromObject(s), func() *snapv1.Snapshot { return &snapv1.Snapshot{} },
			func(live *snapv1.Snapshot) error {
				if live.UID != s.UID {
					return statuspatch.Skip
				}
				meta.SetStatusCondition(&live.Status.Conditions, metav1.Condition{Type: wellknown.ConditionDeletionHeld, Status: metav1.ConditionFalse,
					Reason: reason, Message: msg, ObservedGeneration: live.Generation})
				return nil
			})
		if err != nil {
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
		if reason == kernel.ReasonRetainedOnSchedule || reason == kernel.ReasonRetainedOnPolicy || reason == kernel.ReasonRetainedOnNamespace {
			typ = corev1.EventTypeWarning
		}
		f.Recorder.Event(s, typ, reason, msg)
	}
	host.Log(ctx).Info("released snapshot", "snapshot", s.Namespace+"/"+s.Name, "reason", reason)
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
			host.Log(ctx).Error(err, "could not send the deletion held event", "snapshot", s.Namespace+"/"+s.Name)
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
func (f *Function) reportBreaker(ctx context.Context, repo *repoState, pending []kernel.Pending, held map[string]bool, byName map[string]*snapv1.Snapshot) error {
	if repo.missing {
		return nil
	}
	if repo.badAckMsg != "" && f.Recorder != nil {
		f.Recorder.Event(repo.obj, corev1.EventTypeWarning, "InvalidMassDeletionAck", repo.badAckMsg)
	}
	var cmd string
	if len(held) > 0 {
		cmd = kernel.AckCommand(repo.ref, repo.homeNS, pending)
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
		if err := f.markDeleting(ctx, s, metav1.ConditionTrue, kernel.ReasonBreaker, msg); err != nil {
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
	return repository.UpdateStatus(ctx, f.Client, f.Namespace, repo.ref, repo.ref.Namespace, func(live *repository.Object) error {
		meta.SetStatusCondition(&live.Status.Conditions, metav1.Condition{Type: wellknown.ConditionMassDeletionHeld, Status: status, Reason: reason, Message: msg, ObservedGeneration: live.Obj.GetGeneration()})
		return nil
	})
}
