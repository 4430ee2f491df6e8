package mover

import (
	"context"
	"encoding/json"
	"os"
	"sync"
	"time"

	"github.com/snapflow/snapflow/internal/kopia"
)

// Report is what one mover run found. The mover holds no Kubernetes
// credentials: it leaves the report in its pod's termination message, and
// the function that made the Job writes it onto the target's status
// (Apply), so no pod of a tenant's namespace can write snapflow status.
type Report struct {
	Phase    string          `json:"phase"`
	Started  time.Time       `json:"started"`
	Progress *kopia.Progress `json:"progress,omitempty"`
	Snapshot *Result         `json:"snapshot,omitempty"`
	// Bootstrap is set when a repository bootstrap finished.
	Bootstrap *BootstrapResult `json:"bootstrap,omitempty"`
	Failure   *Failure         `json:"failure,omitempty"`
	FailedAt  time.Time        `json:"failedAt,omitzero"`
	// Members are a delete run's outcomes, by index into the work spec's
	// members.
	Members         []MemberOutcome     `json:"members,omitempty"`
	Resolved        *RestoreResolution  `json:"resolved,omitempty"`
	Restored        *RestoreResult      `json:"restored,omitempty"`
	RestoreProgress *kopia.RestoreStats `json:"restoreProgress,omitempty"`
	Verified        *VerifyReport       `json:"verified,omitempty"`
	Maintained      *MaintenanceReport  `json:"maintained,omitempty"`
	PinnedID        string              `json:"pinnedID,omitempty"`
	// LogTail is the end of the mover's log, for status.logTail.
	LogTail string `json:"logTail,omitempty"`
}

// MemberOutcome is one member of a delete run.
type MemberOutcome struct {
	Index   int    `json:"i"`
	Deleted bool   `json:"deleted,omitempty"`
	Message string `json:"message,omitempty"`
	Class   string `json:"class,omitempty"`
}

// Recorder keeps what a run reports in a Report, and with Path set also
// writes it to that JSON file after each step (runs outside a cluster:
// benchmarks, debugging).
type Recorder struct {
	Path string
	mu   sync.Mutex
	r    Report
}

// Report returns a copy of what was recorded so far.
func (f *Recorder) Report() Report {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.r
}

func (f *Recorder) write(mutate func(*Report)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	mutate(&f.r)
	if f.Path == "" {
		return nil
	}
	b, err := json.MarshalIndent(f.r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(f.Path, b, 0o644)
}

func (f *Recorder) Started(_ context.Context, at time.Time) error {
	return f.write(func(r *Report) { r.Phase, r.Started = "Running", at })
}

func (f *Recorder) Progress(_ context.Context, p kopia.Progress) error {
	return f.write(func(r *Report) { r.Progress = &p })
}

func (f *Recorder) SnapshotDone(_ context.Context, res Result) error {
	return f.write(func(r *Report) {
		r.Phase, r.Snapshot = "Succeeded", &res
		if res.Snapshot.Unchanged {
			r.Phase = "Unchanged"
		}
	})
}

func (f *Recorder) BootstrapDone(_ context.Context, res BootstrapResult) error {
	return f.write(func(r *Report) { r.Phase, r.Bootstrap = "Ready", &res })
}

func (f *Recorder) Failed(_ context.Context, fl Failure, at time.Time) error {
	return f.write(func(r *Report) { r.Phase, r.Failure, r.FailedAt = "Failed", &fl, at })
}

// DeleteDone records results, which are in the work spec's member order.
func (f *Recorder) DeleteDone(_ context.Context, res []MemberResult) error {
	return f.write(func(r *Report) {
		r.Phase, r.Members = "Done", nil
		for i, m := range res {
			r.Members = append(r.Members, MemberOutcome{Index: i, Deleted: m.Deleted, Message: m.Message, Class: m.Class})
		}
	})
}

func (f *Recorder) RestoreResolved(_ context.Context, res RestoreResolution) (RestoreResolution, error) {
	var out RestoreResolution
	err := f.write(func(r *Report) {
		if r.Resolved == nil && res.SnapshotID != "" {
			r.Resolved = &res
		}
		if r.Resolved != nil {
			out = *r.Resolved
		}
	})
	return out, err
}

func (f *Recorder) RestoreProgress(_ context.Context, st kopia.RestoreStats) error {
	return f.write(func(r *Report) { r.RestoreProgress = &st })
}

func (f *Recorder) RestoreDone(_ context.Context, res RestoreResult) error {
	return f.write(func(r *Report) { r.Phase, r.Restored = "Completed", &res })
}

func (f *Recorder) VerifyDone(_ context.Context, res VerifyReport) error {
	return f.write(func(r *Report) {
		r.Phase, r.Verified = "Passed", &res
		if !res.Passed {
			r.Phase = "Failed"
		}
	})
}

func (f *Recorder) PinDone(_ context.Context, _, newID string, pinned bool) error {
	return f.write(func(r *Report) {
		r.Phase, r.PinnedID = "Unpinned", newID
		if pinned {
			r.Phase = "Pinned"
		}
	})
}
