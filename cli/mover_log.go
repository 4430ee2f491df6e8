package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/snapflow/snapflow/internal/kopia"
	"github.com/snapflow/snapflow/internal/mover"
)

// loggingReporter prints what the mover reports, so the pod log tells the
// same story as the status.
type loggingReporter struct {
	mover.Reporter
	w io.Writer
	// progress takes the progress lines: the pod log only, not the tail
	// a failure keeps, which they would crowd out.
	progress io.Writer
	// started is when the run began, for the rate in progress lines.
	started time.Time
}

func (l *loggingReporter) Started(ctx context.Context, at time.Time) error {
	l.started = at
	return l.Reporter.Started(ctx, at)
}

// Progress prints a line the functions read back into status.progress
// (the mover has no credentials to write it itself).
func (l *loggingReporter) Progress(ctx context.Context, p kopia.Progress) error {
	fmt.Fprintln(l.progress, mover.BackupProgress(l.startedAt(), time.Now(), p))
	return l.Reporter.Progress(ctx, p)
}

func (l *loggingReporter) startedAt() time.Time {
	if l.started.IsZero() {
		l.started = time.Now()
	}
	return l.started
}

func (l *loggingReporter) SnapshotDone(ctx context.Context, r mover.Result) error {
	s := r.Snapshot.Stats
	fmt.Fprintf(l.w, "mover: snapshot %s (unchanged=%v): %d new, %d modified, %d unchanged, %d failed files; %d bytes total, %d uploaded\n",
		r.Snapshot.ID, r.Snapshot.Unchanged, s.FilesNew, s.FilesModified, s.FilesUnchanged, s.FilesFailed, s.SizeBytes, s.BytesNew)
	return l.Reporter.SnapshotDone(ctx, r)
}

func (l *loggingReporter) BootstrapDone(ctx context.Context, r mover.BootstrapResult) error {
	fmt.Fprintf(l.w, "mover: repository %s ready (created=%v, %d snapshots)\n", r.UniqueID, r.Created, r.Usage.Snapshots)
	return l.Reporter.BootstrapDone(ctx, r)
}

func (l *loggingReporter) Failed(ctx context.Context, f mover.Failure, at time.Time) error {
	fmt.Fprintf(l.w, "mover: %s: %s\n", f.Class, f.Message)
	if f.Hint != "" {
		fmt.Fprintf(l.w, "mover: hint: %s\n", f.Hint)
	}
	return l.Reporter.Failed(ctx, f, at)
}

func (l *loggingReporter) DeleteDone(ctx context.Context, res []mover.MemberResult) error {
	for _, r := range res {
		state := "deleted"
		if !r.Deleted {
			state = "failed: " + r.Message
		}
		fmt.Fprintf(l.w, "mover: %s/%s kopia snapshot %s %s\n", r.Member.Namespace, r.Member.Name, r.Member.SnapshotID, state)
	}
	return l.Reporter.DeleteDone(ctx, res)
}

func (l *loggingReporter) RestoreResolved(ctx context.Context, r mover.RestoreResolution) (mover.RestoreResolution, error) {
	got, err := l.Reporter.RestoreResolved(ctx, r)
	if err == nil && got.SnapshotID != "" && r.SnapshotID != "" {
		fmt.Fprintf(l.w, "mover: resolved kopia snapshot %s (%s)\n", got.SnapshotID, got.Source)
	}
	return got, err
}

func (l *loggingReporter) RestoreProgress(ctx context.Context, st kopia.RestoreStats) error {
	fmt.Fprintln(l.progress, mover.RestoreProgressLine(l.startedAt(), time.Now(), st))
	return l.Reporter.RestoreProgress(ctx, st)
}

func (l *loggingReporter) RestoreDone(ctx context.Context, r mover.RestoreResult) error {
	fmt.Fprintf(l.w, "mover: %s\n", r.Message)
	return l.Reporter.RestoreDone(ctx, r)
}

func (l *loggingReporter) VerifyDone(ctx context.Context, r mover.VerifyReport) error {
	verdict := "passed"
	if !r.Passed {
		verdict = "FAILED"
	}
	fmt.Fprintf(l.w, "mover: verification %s: %s\n", verdict, r.Message)
	return l.Reporter.VerifyDone(ctx, r)
}

func (l *loggingReporter) MaintenanceDone(ctx context.Context, r mover.MaintenanceReport) error {
	fmt.Fprintf(l.w, "mover: %s\n", r.Message)
	return l.Reporter.MaintenanceDone(ctx, r)
}

func (l *loggingReporter) PinDone(ctx context.Context, oldID, newID string, pinned bool) error {
	fmt.Fprintf(l.w, "mover: kopia snapshot %s is now %s (pinned=%v)\n", oldID, newID, pinned)
	return l.Reporter.PinDone(ctx, oldID, newID, pinned)
}
