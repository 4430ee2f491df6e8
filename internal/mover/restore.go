package mover

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/snapflow/snapflow/internal/kopia"
	"github.com/snapflow/snapflow/internal/restore"
)

// RestoreResolution is the snapshot a restore reads, pinned once.
type RestoreResolution struct {
	SnapshotID string
	Source     kopia.Source
	PinnedAt   time.Time
}

// RestoreResult is the outcome of a restore run.
type RestoreResult struct {
	Start, End time.Time
	// SnapshotID is empty when nothing was restored (onMissingSnapshot: Continue).
	SnapshotID string
	Source     kopia.Source
	Stats      kopia.RestoreStats
	Message    string
}

// defaultPollInterval is how often a waiting restore lists the repository.
const defaultPollInterval = 15 * time.Second

func runRestore(ctx context.Context, o Options, start time.Time, open kopia.OpenOptions) (string, error) {
	w := o.Spec.Restore
	if w.Nothing != "" {
		msg := "nothing restored: " + w.Nothing + " (onMissingSnapshot: Continue)"
		if err := o.Reporter.RestoreDone(ctx, RestoreResult{Start: start, End: o.Now(), Message: msg}); err != nil {
			return "", fmt.Errorf("report the result: %w", err)
		}
		return msg, nil
	}
	// A restore only reads, and reads each content once.
	open.ReadOnly = true
	open.NoCache = true
	r, err := kopia.Open(ctx, open)
	if err != nil {
		return "", err
	}
	defer r.Close(ctx)

	// A pin from an earlier attempt wins over anything resolved now.
	pinned, err := o.Reporter.RestoreResolved(ctx, RestoreResolution{})
	if err != nil {
		return "", fmt.Errorf("read the pinned resolution: %w", err)
	}
	id := pinned.SnapshotID
	if id == "" {
		id = w.SnapshotID
	}
	var info kopia.SnapshotInfo
	deadline := start.Add(time.Duration(w.WaitTimeoutSeconds) * time.Second)
	for {
		info, err = resolve(ctx, r, w, id)
		if err == nil || !errors.Is(err, restore.ErrNoSnapshot) || !o.Now().Before(deadline) {
			break
		}
		every := o.PollInterval
		if every <= 0 {
			every = defaultPollInterval
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(every):
		}
		// The awaited snapshot is written by another mover.
		if err := r.Refresh(ctx); err != nil {
			return "", err
		}
	}
	switch {
	case errors.Is(err, restore.ErrNoSnapshot) && w.OnMissing == "Continue":
		msg := "nothing restored: " + err.Error() + " (onMissingSnapshot: Continue)"
		if err := o.Reporter.RestoreDone(ctx, RestoreResult{Start: start, End: o.Now(), Message: msg}); err != nil {
			return "", fmt.Errorf("report the result: %w", err)
		}
		return msg, nil
	case errors.Is(err, restore.ErrNoSnapshot):
		return "", &kopia.Error{Class: kopia.ClassSnapshotMissing, Err: err}
	case errors.Is(err, restore.ErrAmbiguous):
		return "", &kopia.Error{Class: kopia.ClassInvalidConfig, Err: err}
	case err != nil:
		return "", err
	}
	if pinned.SnapshotID == "" {
		got, err := o.Reporter.RestoreResolved(ctx, RestoreResolution{SnapshotID: info.ID, Source: info.Source, PinnedAt: o.Now()})
		if err != nil {
			return "", fmt.Errorf("pin the resolution: %w", err)
		}
		if got.SnapshotID != info.ID {
			// Another attempt pinned first; restore what it pinned.
			if info, err = r.Get(ctx, got.SnapshotID); err != nil {
				return "", err
			}
		}
	}
	if w.Stream != nil {
		return restoreStream(ctx, o, r, info, start)
	}
	opts := w.Options
	opts.Progress = func(st kopia.RestoreStats) { _ = o.Reporter.RestoreProgress(ctx, st) }
	opts.ProgressInterval = o.ProgressInterval
	st, err := r.Restore(ctx, info.ID, o.SourceDir, opts)
	if err != nil {
		return "", err
	}
	res := RestoreResult{Start: start, End: o.Now(), SnapshotID: info.ID, Source: info.Source, Stats: st,
		Message: fmt.Sprintf("restored kopia snapshot %s: %d files, %d directories, %d bytes", info.ID, st.Files, st.Dirs, st.Bytes)}
	if st.Errors > 0 {
		res.Message += fmt.Sprintf(" (%d errors ignored)", st.Errors)
	}
	if err := o.Reporter.RestoreDone(ctx, res); err != nil {
		return "", fmt.Errorf("report the result: %w", err)
	}
	return res.Message, nil
}

// resolve loads the pinned snapshot, or picks one by the work's query.
func resolve(ctx context.Context, r *kopia.Repo, w *RestoreWork, id string) (kopia.SnapshotInfo, error) {
	if id != "" {
		info, err := r.Get(ctx, id)
		var ke *kopia.Error
		if errors.As(err, &ke) && ke.Class == kopia.ClassSnapshotMissing {
			return info, fmt.Errorf("%w: kopia snapshot %s is not in the repository (deleted by retention?)", restore.ErrNoSnapshot, id)
		}
		return info, err
	}
	q := *w.Query
	var src *kopia.Source // kopia lists by full source; without a path, list all and filter
	if q.Path != "" {
		src = &kopia.Source{Username: q.Username, Hostname: q.Hostname, Path: q.Path}
	}
	list, err := r.List(ctx, src)
	if err != nil {
		return kopia.SnapshotInfo{}, err
	}
	return restore.Pick(list, q)
}
