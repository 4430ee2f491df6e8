package mover

import (
	"context"
	"encoding/json"
	"os"
	"sync"
	"time"

	"github.com/snapflow/snapflow/internal/kopia"
)

// FileReport is what FileReporter writes: the run as the status would show it.
type FileReport struct {
	Phase           string              `json:"phase"`
	Started         time.Time           `json:"started"`
	Progress        *kopia.Progress     `json:"progress,omitempty"`
	Snapshot        *Result             `json:"snapshot,omitempty"`
	Bootstrap       *BootstrapResult    `json:"bootstrap,omitempty"`
	Failure         *Failure            `json:"failure,omitempty"`
	Deleted         []MemberResult      `json:"deleted,omitempty"`
	Resolved        *RestoreResolution  `json:"resolved,omitempty"`
	Restored        *RestoreResult      `json:"restored,omitempty"`
	RestoreProgress *kopia.RestoreStats `json:"restoreProgress,omitempty"`
	Verified        *VerifyReport       `json:"verified,omitempty"`
	PinnedID        string              `json:"pinnedID,omitempty"`
}

// FileReporter writes reports to a JSON file instead of an object's status:
// for running the mover outside a cluster (benchmarks, debugging).
type FileReporter struct {
	Path string
	mu   sync.Mutex
	r    FileReport
}

func (f *FileReporter) write(mutate func(*FileReport)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	mutate(&f.r)
	b, err := json.MarshalIndent(f.r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(f.Path, b, 0o644)
}

func (f *FileReporter) Started(_ context.Context, at time.Time) error {
	return f.write(func(r *FileReport) { r.Phase, r.Started = "Running", at })
}

func (f *FileReporter) Progress(_ context.Context, p kopia.Progress) error {
	return f.write(func(r *FileReport) { r.Progress = &p })
}

func (f *FileReporter) SnapshotDone(_ context.Context, res Result) error {
	return f.write(func(r *FileReport) {
		r.Phase, r.Snapshot = "Succeeded", &res
		if res.Snapshot.Unchanged {
			r.Phase = "Unchanged"
		}
	})
}

func (f *FileReporter) BootstrapDone(_ context.Context, res BootstrapResult) error {
	return f.write(func(r *FileReport) { r.Phase, r.Bootstrap = "Ready", &res })
}

func (f *FileReporter) Failed(_ context.Context, fl Failure, _ time.Time) error {
	return f.write(func(r *FileReport) { r.Phase, r.Failure = "Failed", &fl })
}

func (f *FileReporter) DeleteDone(_ context.Context, res []MemberResult) error {
	return f.write(func(r *FileReport) { r.Phase, r.Deleted = "Done", res })
}

func (f *FileReporter) RestoreResolved(_ context.Context, res RestoreResolution) (RestoreResolution, error) {
	var out RestoreResolution
	err := f.write(func(r *FileReport) {
		if r.Resolved == nil && res.SnapshotID != "" {
			r.Resolved = &res
		}
		if r.Resolved != nil {
			out = *r.Resolved
		}
	})
	return out, err
}

func (f *FileReporter) RestoreProgress(_ context.Context, st kopia.RestoreStats) error {
	return f.write(func(r *FileReport) { r.RestoreProgress = &st })
}

func (f *FileReporter) RestoreDone(_ context.Context, res RestoreResult) error {
	return f.write(func(r *FileReport) { r.Phase, r.Restored = "Completed", &res })
}

func (f *FileReporter) VerifyDone(_ context.Context, res VerifyReport) error {
	return f.write(func(r *FileReport) {
		r.Phase, r.Verified = "Passed", &res
		if !res.Passed {
			r.Phase = "Failed"
		}
	})
}

func (f *FileReporter) PinDone(_ context.Context, _, newID string, pinned bool) error {
	return f.write(func(r *FileReport) {
		r.Phase, r.PinnedID = "Unpinned", newID
		if pinned {
			r.Phase = "Pinned"
		}
	})
}
