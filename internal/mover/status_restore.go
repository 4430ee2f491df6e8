package mover

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/kopia"
)

func (k *KubeReporter) isRestore() bool { return k.Target.Kind == "Restore" }

// updateRestore applies mutate to the live Restore and writes its status.
func (k *KubeReporter) updateRestore(ctx context.Context, mutate func(*snapv1.Restore) error) error {
	return update(ctx, k, &snapv1.Restore{}, mutate)
}

func (k *KubeReporter) restoreStarted(ctx context.Context, at time.Time) error {
	return k.updateRestore(ctx, func(rs *snapv1.Restore) error {
		if rs.Status.Phase.IsTerminal() {
			return ErrAlreadyFinished
		}
		rs.Status.Phase = snapv1.RestoreRestoring
		if rs.Status.Resolved == nil || rs.Status.Resolved.KopiaSnapshotID == "" {
			rs.Status.Phase = snapv1.RestoreResolving
		}
		if rs.Status.Timing == nil {
			rs.Status.Timing = &snapv1.Timing{}
		}
		if rs.Status.Timing.StartTime == nil {
			t := metav1.NewTime(at)
			rs.Status.Timing.StartTime = &t
		}
		meta.SetStatusCondition(&rs.Status.Conditions, metav1.Condition{Type: wellknown.ConditionReconciling, Status: metav1.ConditionTrue,
			Reason: string(rs.Status.Phase), Message: "the mover is running", ObservedGeneration: rs.Generation})
		return nil
	})
}

// RestoreResolved pins the first resolution; later calls read it back.
func (k *KubeReporter) RestoreResolved(ctx context.Context, r RestoreResolution) (RestoreResolution, error) {
	var out RestoreResolution
	err := k.updateRestore(ctx, func(rs *snapv1.Restore) error {
		res := rs.Status.Resolved
		if res != nil && res.KopiaSnapshotID != "" {
			out = RestoreResolution{SnapshotID: res.KopiaSnapshotID}
			if id := res.Identity; id != nil {
				out.Source = kopia.Source{Username: id.Username, Hostname: id.Hostname, Path: id.SourcePath}
			}
			if res.PinnedAt != nil {
				out.PinnedAt = res.PinnedAt.Time
			}
			return errNoChange
		}
		if r.SnapshotID == "" {
			return errNoChange
		}
		if res == nil {
			res = &snapv1.RestoreResolved{}
			rs.Status.Resolved = res
		}
		at := metav1.NewTime(r.PinnedAt)
		res.Resolution, res.KopiaSnapshotID, res.PinnedAt = "Snapshot", r.SnapshotID, &at
		res.Identity = &snapv1.Identity{Username: r.Source.Username, Hostname: r.Source.Hostname, SourcePath: r.Source.Path}
		rs.Status.Phase = snapv1.RestoreRestoring
		out = r
		return nil
	})
	if err == errNoChange {
		err = nil
	}
	return out, err
}

// RestoreProgress records running totals in status.progress.
func (k *KubeReporter) RestoreProgress(ctx context.Context, st kopia.RestoreStats) error {
	return k.updateRestore(ctx, func(rs *snapv1.Restore) error {
		rs.Status.Progress = &snapv1.RestoreProgress{BytesRestored: ptr(st.Bytes), FilesRestored: ptr(st.Files)}
		meta.SetStatusCondition(&rs.Status.Conditions, metav1.Condition{Type: wellknown.ConditionReconciling, Status: metav1.ConditionTrue,
			Reason: "Restoring", Message: fmt.Sprintf("%d files (%d bytes) restored so far", st.Files, st.Bytes), ObservedGeneration: rs.Generation})
		return nil
	})
}

// RestoreDone writes the terminal result of a restore.
func (k *KubeReporter) RestoreDone(ctx context.Context, r RestoreResult) error {
	return k.updateRestore(ctx, func(rs *snapv1.Restore) error {
		rs.Status.Phase = snapv1.RestoreCompleted
		if r.SnapshotID == "" {
			if rs.Status.Resolved == nil {
				rs.Status.Resolved = &snapv1.RestoreResolved{}
			}
			rs.Status.Resolved.Resolution = "NoSnapshot"
		}
		rs.Status.Progress = RestoreProgressLine(r.Start, r.End, r.Stats).Done()
		endTiming(&rs.Status.Timing, r.End)
		rs.Status.Failure, rs.Status.LogTail = nil, ""
		meta.SetStatusCondition(&rs.Status.Conditions, metav1.Condition{Type: wellknown.ConditionReconciling, Status: metav1.ConditionFalse,
			Reason: string(snapv1.RestoreCompleted), Message: r.Message, ObservedGeneration: rs.Generation})
		return nil
	})
}

func (k *KubeReporter) restoreFailed(ctx context.Context, f Failure, at time.Time, tail string) error {
	return k.updateRestore(ctx, func(rs *snapv1.Restore) error {
		if rs.Status.Phase.IsTerminal() {
			return nil
		}
		rs.Status.Phase = snapv1.RestoreFailed
		rs.Status.Failure = &snapv1.Failure{Class: f.Class, Message: f.Message, Retryable: f.Retryable, RetryHint: f.Hint, StderrTail: tail}
		rs.Status.LogTail = tail
		endTiming(&rs.Status.Timing, at)
		meta.SetStatusCondition(&rs.Status.Conditions, metav1.Condition{Type: wellknown.ConditionReconciling, Status: metav1.ConditionFalse,
			Reason: f.Class, Message: f.Message, ObservedGeneration: rs.Generation})
		return nil
	})
}
