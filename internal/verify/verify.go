// Package verify holds the pure decisions of backup verification: when a
// tier is due (its cron, a catch-up after the first backup, or an explicit
// request), and whether a finished check passed (errors, restored files and
// the policy's successExpr). No clock of its own: callers pass now.
package verify

import (
	"fmt"
	"time"

	"github.com/snapflow/snapflow/internal/expr"
	"github.com/snapflow/snapflow/internal/schedule"
)

// Tiers of verification.
const (
	Quick = "quick"
	Deep  = "deep"
)

// Decision says whether a tier runs now, for which slot, and when next.
type Decision struct {
	Due    bool
	Slot   time.Time
	Reason string
	// Next is the next scheduled firing (zero without a schedule).
	Next time.Time
}

// maxCatchUp bounds how many missed firings are walked to find the latest.
const maxCatchUp = 10000

// Due decides one tier in one repository. spec is nil when the tier has no
// schedule (it then runs only on request); last is the slot of the last
// attempt, nil when none was made; requested is an explicit request time.
func Due(spec *schedule.Spec, last, requested *time.Time, now time.Time) (Decision, error) {
	if requested != nil && !requested.After(now) && (last == nil || requested.After(*last)) {
		return Decision{Due: true, Slot: requested.UTC().Truncate(time.Second), Reason: "requested at " + requested.UTC().Format(time.RFC3339)}, nil
	}
	if spec == nil {
		return Decision{Reason: "no schedule; runs only when requested"}, nil
	}
	if last == nil {
		// The first chance after the gate opened: catch up at once.
		d := Decision{Due: true, Slot: now.UTC().Truncate(time.Second), Reason: "first verification since a backup exists"}
		next, err := schedule.Next(*spec, now, 1)
		if err != nil {
			return Decision{}, err
		}
		if len(next) > 0 {
			d.Next = next[0].At
		}
		return d, nil
	}
	var d Decision
	from := *last
	for i := 0; i < maxCatchUp; i++ {
		f, err := schedule.Next(*spec, from, 1)
		if err != nil {
			return Decision{}, err
		}
		if len(f) == 0 {
			return d, nil
		}
		if f[0].At.After(now) {
			d.Next = f[0].At
			return d, nil
		}
		// Missed firings collapse into the latest one.
		d.Due, d.Slot, d.Reason = true, f[0].Slot, fmt.Sprintf("scheduled slot %s", f[0].Slot.UTC().Format(time.RFC3339))
		from = f[0].Slot
	}
	return d, nil
}

// Outcome is what a verification observed.
type Outcome struct {
	Tier       string
	SnapshotID string
	// SnapshotStart is when the verified snapshot was taken.
	SnapshotStart time.Time
	// Files and Bytes are the snapshot's totals from its manifest.
	Files, Bytes int64
	// Errors counts problems found (unreadable, missing or corrupt data).
	Errors int64
	// RestoredFiles and ChecksumMatches are set by deep verification.
	RestoredFiles   int64
	ChecksumMatches bool
}

// Judge says whether a verification passed, and why not. successExpr, when
// set, must also hold; it sees stats, snapshot, restored and tier.
func Judge(o Outcome, successExpr string) (bool, string, error) {
	if o.Errors > 0 {
		return false, fmt.Sprintf("%s verification of kopia snapshot %s found %d error(s)", o.Tier, o.SnapshotID, o.Errors), nil
	}
	if o.Tier == Deep {
		if !o.ChecksumMatches {
			return false, fmt.Sprintf("deep verification of kopia snapshot %s: restored content did not match", o.SnapshotID), nil
		}
		if o.RestoredFiles != o.Files {
			return false, fmt.Sprintf("deep verification of kopia snapshot %s restored %d files, the snapshot lists %d", o.SnapshotID, o.RestoredFiles, o.Files), nil
		}
	}
	if successExpr == "" {
		return true, fmt.Sprintf("%s verification of kopia snapshot %s passed (%d files, %d bytes)", o.Tier, o.SnapshotID, o.Files, o.Bytes), nil
	}
	prg, err := expr.Success.Compile(successExpr)
	if err != nil {
		return false, "", err
	}
	restored := map[string]any{}
	if o.Tier == Deep {
		restored = map[string]any{"files": o.RestoredFiles, "checksumMatches": o.ChecksumMatches}
	}
	ok, err := prg.EvalBool(map[string]any{
		"stats":    map[string]int64{"files": o.Files, "bytes": o.Bytes, "errors": o.Errors},
		"snapshot": map[string]any{"id": o.SnapshotID, "startTime": o.SnapshotStart.UTC().Format(time.RFC3339)},
		"restored": restored,
		"tier":     o.Tier,
	})
	if err != nil {
		return false, "", err
	}
	if !ok {
		return false, fmt.Sprintf("%s verification of kopia snapshot %s: spec.verification.successExpr %q returned false (files %d, bytes %d, errors %d)", o.Tier, o.SnapshotID, successExpr, o.Files, o.Bytes, o.Errors), nil
	}
	return true, fmt.Sprintf("%s verification of kopia snapshot %s passed, and successExpr held (%d files, %d bytes)", o.Tier, o.SnapshotID, o.Files, o.Bytes), nil
}
