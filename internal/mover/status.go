package mover

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/kopia"
	"github.com/snapflow/snapflow/internal/statuspatch"
)

// ErrAlreadyFinished means the target already holds a terminal result: a
// retried or duplicated mover must not run a finished Snapshot again.
var ErrAlreadyFinished = errors.New("the target already finished")

// ErrTargetReplaced means the target was deleted and recreated under the
// same name since the work spec was written.
var ErrTargetReplaced = errors.New("the target was replaced since this work spec was written")

// errNoChange ends an update without writing.
var errNoChange = errors.New("no change")

// KubeReporter writes the mover's observations onto the target's status
// subresource, re-reading on conflict so it never clobbers other writers.
type KubeReporter struct {
	Client client.Client
	Target Target
	// Delete is set for a delete run: its failures are recorded on the
	// members, not on the repository.
	Delete *DeleteWork
	// Verify is set for a verification run: results go to the policy.
	Verify *VerifyWork
	// Pin is set for a pin run, which works on a finished Snapshot.
	Pin *PinWork
	// Maintenance is set for a maintenance run of a Maintenance.
	Maintenance *MaintenanceWork
	// LogTail returns the last lines of the mover's log for status.logTail.
	LogTail func() string
}

func (k *KubeReporter) key() types.NamespacedName {
	return types.NamespacedName{Namespace: k.Target.Namespace, Name: k.Target.Name}
}

// update applies mutate to the live target and writes its status with a
// merge patch, re-reading on conflict. A missing or replaced target is an
// error: the mover must not report into the void.
func update[T client.Object](ctx context.Context, k *KubeReporter, obj T, mutate func(T) error) error {
	if k.Target.UID == "" {
		// Only a UID pins the object the work was for.
		return fmt.Errorf("%w: target %s %s names no UID", ErrReportMismatch, k.Target.Kind, k.key())
	}
	err := statuspatch.Patch(ctx, k.Client, k.key(), func() T { return obj.DeepCopyObject().(T) }, func(live T) error {
		if string(live.GetUID()) != k.Target.UID {
			return ErrTargetReplaced
		}
		return mutate(live)
	})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("read %s %s: %w", k.Target.Kind, k.key(), err)
	}
	return err
}

// updateSnapshot applies mutate to the live Snapshot and writes its status.
func (k *KubeReporter) updateSnapshot(ctx context.Context, mutate func(*snapv1.Snapshot) error) error {
	return update(ctx, k, &snapv1.Snapshot{}, mutate)
}

func (k *KubeReporter) updateRepository(ctx context.Context, mutate func(*snapv1.RepositoryStatus, int64)) error {
	// A bootstrap connects with one generation's spec: its result says
	// nothing about a later one.
	stale := func(gen int64) bool { return k.Target.Generation != 0 && gen != k.Target.Generation }
	var err error
	if k.Target.Kind == string(snapv1.KindClusterRepository) {
		err = update(ctx, k, &snapv1.ClusterRepository{}, func(r *snapv1.ClusterRepository) error {
			if stale(r.Generation) {
				return errNoChange
			}
			mutate(&r.Status, r.Generation)
			return nil
		})
	} else {
		err = update(ctx, k, &snapv1.Repository{}, func(r *snapv1.Repository) error {
			if stale(r.Generation) {
				return errNoChange
			}
			mutate(&r.Status, r.Generation)
			return nil
		})
	}
	if errors.Is(err, errNoChange) {
		return nil
	}
	return err
}

func (k *KubeReporter) isSnapshot() bool { return k.Target.Kind == "Snapshot" }

// ReasonSnapshotNotOwned holds a deleting Snapshot whose status names a
// kopia snapshot of another namespace in a shared repository.
const ReasonSnapshotNotOwned = "SnapshotNotOwned"

// DeleteDone records why members were not deleted on their own Snapshots.
// What was deleted goes to the termination message only: the cleanup
// function releases on that, never on status a tenant's pod could write.
func (k *KubeReporter) DeleteDone(ctx context.Context, results []MemberResult) error {
	var errs []error
	for _, r := range results {
		m := r.Member
		key := types.NamespacedName{Namespace: m.Namespace, Name: m.Name}
		err := statuspatch.Update(ctx, k.Client, key, func() *snapv1.Snapshot { return &snapv1.Snapshot{} }, func(s *snapv1.Snapshot) error {
			if string(s.UID) != m.UID {
				return statuspatch.Skip // a new object under the old name: not ours to mark
			}
			if s.Status.Cleanup == nil {
				s.Status.Cleanup = &snapv1.CleanupStatus{}
			}
			if r.Deleted {
				if s.Status.Cleanup.Message == "" {
					return statuspatch.Skip
				}
				s.Status.Cleanup.Message = ""
			} else {
				s.Status.Cleanup.Message = r.Message
			}
			if r.Class == kopia.ClassSourceNotAllowed {
				// Not a failure to retry: the data is not this Snapshot's.
				meta.SetStatusCondition(&s.Status.Conditions, metav1.Condition{Type: wellknown.ConditionDeletionHeld, Status: metav1.ConditionFalse,
					Reason: ReasonSnapshotNotOwned, ObservedGeneration: s.Generation,
					Message: r.Message + "; annotate this Snapshot with " + wellknown.AnnotationSkipSnapshotCleanup + " to release it and keep the data"})
			}
			return nil
		})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("record deletion of %s/%s: %w", m.Namespace, m.Name, err))
		}
	}
	return errors.Join(errs...)
}

// Started marks the run as Running, or refuses when it already finished.
func (k *KubeReporter) Started(ctx context.Context, at time.Time) error {
	if k.Delete != nil || k.Pin != nil {
		return nil
	}
	if k.isRestore() {
		return k.restoreStarted(ctx, at)
	}
	if k.isMaintenance() {
		err := k.maintenanceStarted(ctx)
		if err == errNoChange {
			return nil
		}
		return err
	}
	if k.isPolicy() {
		err := k.verifyStarted(ctx)
		if err == errNoChange {
			return nil
		}
		return err
	}
	if !k.isSnapshot() {
		return k.updateRepository(ctx, func(st *snapv1.RepositoryStatus, _ int64) {
			if st.Phase != snapv1.RepositoryReady {
				st.Phase = snapv1.RepositoryInitializing
			}
		})
	}
	return k.updateSnapshot(ctx, func(s *snapv1.Snapshot) error {
		if s.Status.Phase.IsTerminal() {
			return ErrAlreadyFinished
		}
		s.Status.Phase = snapv1.SnapshotRunning
		if s.Status.Timing == nil {
			s.Status.Timing = &snapv1.Timing{}
		}
		if s.Status.Timing.StartTime == nil {
			t := metav1.NewTime(at)
			s.Status.Timing.StartTime = &t
		}
		meta.SetStatusCondition(&s.Status.Conditions, metav1.Condition{Type: wellknown.ConditionReconciling, Status: metav1.ConditionTrue,
			Reason: "Uploading", Message: "the mover is reading the source", ObservedGeneration: s.Generation})
		return nil
	})
}

// Progress records running totals in the Reconciling condition.
func (k *KubeReporter) Progress(ctx context.Context, p kopia.Progress) error {
	if !k.isSnapshot() {
		return nil
	}
	return k.updateSnapshot(ctx, func(s *snapv1.Snapshot) error {
		meta.SetStatusCondition(&s.Status.Conditions, metav1.Condition{Type: wellknown.ConditionReconciling, Status: metav1.ConditionTrue,
			Reason: "Uploading", ObservedGeneration: s.Generation,
			Message: fmt.Sprintf("%d files read (%d bytes), %d unchanged files skipped, %d bytes uploaded so far",
				p.FilesHashed, p.BytesHashed, p.FilesCached, p.BytesUploaded)})
		return nil
	})
}

// SnapshotDone writes the terminal result of a snapshot.
func (k *KubeReporter) SnapshotDone(ctx context.Context, r Result) error {
	return k.updateSnapshot(ctx, func(s *snapv1.Snapshot) error {
		res := r.Snapshot
		// The totals are in status.stats now.
		s.Status.Progress = nil
		s.Status.Phase = snapv1.SnapshotSucceeded
		reason, msg := "Succeeded", fmt.Sprintf("kopia snapshot %s saved", res.ID)
		if res.Unchanged {
			s.Status.Phase = snapv1.SnapshotUnchanged
			reason, msg = "Unchanged", fmt.Sprintf("nothing changed since kopia snapshot %s, so no new snapshot was saved", res.ID)
		}
		s.Status.Snapshot = &snapv1.SnapshotRecord{KopiaSnapshotID: res.ID, Pinned: ptr(res.Pinned),
			Identity: &snapv1.Identity{Username: r.Source.Username, Hostname: r.Source.Hostname, SourcePath: r.Source.Path}}
		st := res.Stats
		s.Status.Stats = &snapv1.SnapshotStats{SizeBytes: &st.SizeBytes, BytesNew: &st.BytesNew, FilesNew: &st.FilesNew,
			FilesModified: &st.FilesModified, FilesUnchanged: &st.FilesUnchanged, FilesFailed: &st.FilesFailed}
		endTiming(&s.Status.Timing, r.End)
		s.Status.Failure = nil
		s.Status.LogTail = ""
		if res.Unchanged {
			s.Status.Stats.BytesNew = ptr(int64(0))
		}
		meta.SetStatusCondition(&s.Status.Conditions, metav1.Condition{Type: wellknown.ConditionReconciling, Status: metav1.ConditionFalse,
			Reason: reason, Message: msg, ObservedGeneration: s.Generation})
		return nil
	})
}

// BootstrapDone marks a repository Ready with what the engine found.
func (k *KubeReporter) BootstrapDone(ctx context.Context, r BootstrapResult) error {
	return k.updateRepository(ctx, func(st *snapv1.RepositoryStatus, gen int64) {
		st.Phase = snapv1.RepositoryReady
		st.ObservedGeneration = gen
		prev, same := st.StorageStats, st.UniqueID == r.UniqueID
		st.UniqueID = r.UniqueID
		st.Backend = r.Backend
		at := metav1.NewTime(r.At)
		st.StorageStats = &snapv1.StorageStats{SnapshotCount: ptr(r.Usage.Snapshots), TotalSize: ptr(r.Usage.LogicalBytes), LastObservedAt: &at}
		if prev != nil && same {
			// A spec edit that reconnects to the same kopia repository
			// keeps what its last full maintenance counted.
			st.StorageStats.StoredBytes, st.StorageStats.BlobCount, st.StorageStats.StoredObservedAt = prev.StoredBytes, prev.BlobCount, prev.StoredObservedAt
			st.StorageStats.ReclaimableBytes = prev.ReclaimableBytes
			st.StorageStats.IndexBlobCount = prev.IndexBlobCount
		}
		st.LastReverifyAt = &at
		st.Probe = nil // a new generation starts its health record afresh
		msg := "connected to the existing kopia repository " + r.UniqueID
		if r.Created {
			msg = "created kopia repository " + r.UniqueID
		}
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: wellknown.ConditionReady, Status: metav1.ConditionTrue, Reason: "Connected", Message: msg, ObservedGeneration: gen})
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: wellknown.ConditionBackendReachable, Status: metav1.ConditionTrue, Reason: "Connected", Message: "the backend answered", ObservedGeneration: gen})
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: wellknown.ConditionStalled, Status: metav1.ConditionFalse, Reason: "Connected", ObservedGeneration: gen})
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: wellknown.ConditionReconciling, Status: metav1.ConditionFalse, Reason: "Connected", Message: msg, ObservedGeneration: gen})
	})
}

// Failed writes a classified failure.
func (k *KubeReporter) Failed(ctx context.Context, f Failure, at time.Time) error {
	tail := ""
	if k.LogTail != nil {
		tail = k.LogTail()
	}
	if k.Delete != nil {
		var results []MemberResult
		for _, m := range k.Delete.Members {
			results = append(results, MemberResult{Member: m, Message: f.Class + ": " + f.Message})
		}
		return k.DeleteDone(ctx, results)
	}
	if k.isRestore() {
		return k.restoreFailed(ctx, f, at, tail)
	}
	if k.Pin != nil {
		return k.pinFailed(ctx, f)
	}
	if k.isPolicy() {
		return k.verifyFailed(ctx, f, at)
	}
	if k.isMaintenance() {
		return k.maintenanceFailed(ctx, f, at)
	}
	if !k.isSnapshot() {
		return k.updateRepository(ctx, func(st *snapv1.RepositoryStatus, gen int64) {
			st.Phase = snapv1.RepositoryFailed
			st.ObservedGeneration = gen
			msg := f.Message
			if f.Hint != "" {
				msg += " (" + f.Hint + ")"
			}
			meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: wellknown.ConditionReady, Status: metav1.ConditionFalse, Reason: f.Class, Message: msg, ObservedGeneration: gen})
			reach := metav1.ConditionTrue
			if f.Class == kopia.ClassUnreachable || f.Class == kopia.ClassBucketMissing {
				reach = metav1.ConditionFalse
			}
			meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: wellknown.ConditionBackendReachable, Status: reach, Reason: f.Class, Message: f.Message, ObservedGeneration: gen})
			meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: wellknown.ConditionStalled, Status: metav1.ConditionTrue, Reason: f.Class, Message: msg, ObservedGeneration: gen})
			meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: wellknown.ConditionReconciling, Status: metav1.ConditionFalse, Reason: f.Class, Message: msg, ObservedGeneration: gen})
		})
	}
	return k.updateSnapshot(ctx, func(s *snapv1.Snapshot) error {
		if s.Status.Phase.IsTerminal() {
			return nil
		}
		s.Status.Phase, s.Status.Progress = snapv1.SnapshotFailed, nil // no longer running
		s.Status.Failure = &snapv1.Failure{Class: f.Class, Message: f.Message, Retryable: f.Retryable, RetryHint: f.Hint, StderrTail: tail}
		s.Status.LogTail = tail
		endTiming(&s.Status.Timing, at)
		meta.SetStatusCondition(&s.Status.Conditions, metav1.Condition{Type: wellknown.ConditionReconciling, Status: metav1.ConditionFalse,
			Reason: f.Class, Message: f.Message, ObservedGeneration: s.Generation})
		return nil
	})
}

// endTiming records end on t (created when nil) and the whole-second
// duration since its start.
func endTiming(t **snapv1.Timing, end time.Time) {
	if *t == nil {
		*t = &snapv1.Timing{}
	}
	e := metav1.NewTime(end)
	(*t).EndTime = &e
	if (*t).StartTime != nil {
		d := int64(end.Sub((*t).StartTime.Time).Round(time.Second) / time.Second)
		(*t).DurationSeconds = &d
	}
}

func ptr[T any](v T) *T { return &v }

// PinDone moves the Snapshot to the rewritten kopia manifest.
func (k *KubeReporter) PinDone(ctx context.Context, oldID, newID string, pinned bool) error {
	return k.updateSnapshot(ctx, func(s *snapv1.Snapshot) error {
		if s.Status.Snapshot == nil || s.Status.Snapshot.KopiaSnapshotID != oldID {
			return nil // already moved by an earlier attempt
		}
		s.Status.Snapshot.KopiaSnapshotID, s.Status.Snapshot.Pinned = newID, ptr(pinned)
		meta.RemoveStatusCondition(&s.Status.Conditions, wellknown.ConditionKopiaPinned)
		return nil
	})
}

func (k *KubeReporter) pinFailed(ctx context.Context, f Failure) error {
	return k.updateSnapshot(ctx, func(s *snapv1.Snapshot) error {
		msg := fmt.Sprintf("setting the kopia pin to %v failed (%s): %s", k.Pin.Pin, f.Class, f.Message)
		meta.SetStatusCondition(&s.Status.Conditions, metav1.Condition{Type: wellknown.ConditionKopiaPinned, Status: metav1.ConditionFalse,
			Reason: f.Class, Message: msg, ObservedGeneration: s.Generation})
		return nil
	})
}
