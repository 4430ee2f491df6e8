package mover

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/snapflow/snapflow/internal/kopia"
	"github.com/snapflow/snapflow/internal/verify"
)

// VerifyReport is the outcome of a verification run.
type VerifyReport struct {
	Work    VerifyWork
	Passed  bool
	Message string
	Outcome verify.Outcome
	At      time.Time
}

// errReported marks a failure the mover already wrote as a result, so Run
// does not overwrite it with a bare failure.
var errReported = errors.New("verification failed")

func runVerify(ctx context.Context, o Options, open kopia.OpenOptions) (string, error) {
	w := o.Spec.Verify
	open.ReadOnly = true
	// Read what storage holds: a content served from a persistent cache
	// would hide a blob corrupted in the repository since it was cached.
	open.NoCache = true
	r, err := kopia.Open(ctx, open)
	if err != nil {
		return "", err
	}
	defer r.Close(ctx)
	info, err := r.Get(ctx, w.SnapshotID)
	if err != nil {
		return "", err
	}
	out := verify.Outcome{Tier: w.Tier, SnapshotID: info.ID, SnapshotStart: info.Start, Files: info.Files, Bytes: info.SizeBytes}
	var detail string
	switch w.Tier {
	case verify.Quick:
		res, err := r.Verify(ctx, []string{info.ID}, w.Quick)
		if err != nil {
			return "", err
		}
		out.Errors = int64(res.Errors)
		if len(res.Messages) > 0 {
			detail = res.Messages[0]
		}
	case verify.Deep:
		if o.SourceDir == "" {
			return "", &kopia.Error{Class: kopia.ClassInvalidConfig, Err: errors.New("deep verification needs a scratch volume (--source)")}
		}
		st, err := r.Restore(ctx, info.ID, o.SourceDir, kopia.RestoreOptions{Parallel: w.DeepParallel, OverwriteFiles: true, OverwriteDirectories: true, OverwriteSymlinks: true, IgnorePermissionErrors: true})
		out.RestoredFiles, out.ChecksumMatches = st.Files, err == nil && st.Errors == 0
		if err != nil {
			out.Errors, detail = 1, oneLine(err.Error())
		}
		// Discard the scratch copy: it only proved the data comes back.
		clearDir(o.SourceDir)
	}
	pass, msg, err := verify.Judge(out, w.SuccessExpr)
	if err != nil {
		return "", &kopia.Error{Class: kopia.ClassInvalidConfig, Err: err}
	}
	if detail != "" {
		msg += ": " + detail
	}
	if err := o.Reporter.VerifyDone(ctx, VerifyReport{Work: *w, Passed: pass, Message: msg, Outcome: out, At: o.Now()}); err != nil {
		return "", fmt.Errorf("report the result: %w", err)
	}
	if !pass {
		return msg, fmt.Errorf("%s: %w", msg, errReported)
	}
	return msg, nil
}

func clearDir(dir string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		_ = os.RemoveAll(filepath.Join(dir, e.Name()))
	}
}
