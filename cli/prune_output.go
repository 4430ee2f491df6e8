package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/snapflow/snapflow/internal/prune"
	"github.com/snapflow/snapflow/internal/prune/execute"
)

// PruneReport is what `snapflow prune plan|prune -o json` prints:
// execution is present only for prune. Object snapshots and manifest bodies
// are never part of it.
type PruneReport struct {
	Plan      prune.Plan         `json:"plan"`
	Execution *execute.Execution `json:"execution,omitempty"`
}

// visiblePlan applies --show-all: only the candidates shown, with stateCounts
// recomputed over them; the eligible totals are unchanged.
func visiblePlan(pl prune.Plan, showAll bool) prune.Plan {
	out := pl
	out.Candidates = []prune.Candidate{}
	for _, c := range pl.Candidates {
		if showAll || c.Visible() {
			out.Candidates = append(out.Candidates, c)
		}
	}
	out.StateCounts = pl.VisibleStateCounts(showAll)
	if out.BlockingReasons == nil {
		out.BlockingReasons = []string{}
	}
	if out.OrphanVolumeRoots == nil {
		out.OrphanVolumeRoots = []string{}
	}
	return out
}

func printPrune(w io.Writer, o *pruneOptions, pl prune.Plan, ex *execute.Execution) error {
	shown := visiblePlan(pl, o.showAll)
	if o.output == OutputJSON {
		return printStructured(w, OutputJSON, PruneReport{Plan: shown, Execution: ex})
	}
	fmt.Fprintf(w, "Mode: %s  Repository: %s  Bucket: %s  Versioning: %s (%s)\n", o.mode(), pl.Repository, pl.Bucket, pl.Versioning, pl.VersioningSource)
	if pl.VolumeDiscovery {
		c := pl.VolumeRootCounts
		fmt.Fprintf(w, "Discovered PVC roots: %d (repository: %d, protected user: %d, unowned: %d, other: %d)\n",
			c.Total, c.Repository, c.ProtectedUser, c.Unowned, c.Other)
	} else if len(pl.Prefixes) == 1 {
		fmt.Fprintf(w, "Scan prefix: %s\n", pl.Prefixes[0])
	}
	fmt.Fprintf(w, "Scanned: %d objects / %s  Eligible: %d / %s  Unclassified: %d / %s\n",
		pl.ScannedObjects, humanBytes(pl.ScannedBytes), pl.DeleteObjects, humanBytes(pl.DeleteBytes),
		pl.UnclassifiedObjects, humanBytes(pl.UnclassifiedBytes))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STATE\tTYPE\tBACKUP\tAGE\tOBJECTS\tSIZE\tPREFIX\tREASON")
	for _, c := range shown.Candidates {
		backup, objects, size := "-", fmt.Sprint(c.ObjectCount), humanBytes(c.Bytes)
		if !c.Backup.IsZero() {
			backup = c.Backup.String()
		}
		if c.DeferredScan {
			objects, size = "deferred", "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.State, c.Type, backup, pruneAge(pl.GeneratedAt, c.CreatedAt),
			objects, size, c.Prefix, oneLine(c.Reason))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if !o.showAll {
		printHeld(w, pl)
	}
	if len(pl.BlockingReasons) > 0 {
		fmt.Fprintln(w, "Execution blockers:")
		for _, b := range pl.BlockingReasons {
			fmt.Fprintf(w, "- %s\n", b)
		}
	}
	if ex == nil {
		return nil
	}
	for _, r := range ex.Results {
		if r.Error != "" {
			fmt.Fprintf(w, "FAILED %s: %s\n", r.Prefix, oneLine(r.Error))
		}
	}
	objs, bytes, cands, failed := ex.Totals()
	verb, deferred := "Deleted", ""
	if ex.DryRun {
		verb = "Would delete"
		n := 0
		for _, r := range ex.Results {
			if r.Deferred {
				n++
			}
		}
		if n > 0 {
			// Deferred roots are not enumerated before a real prune.
			deferred = fmt.Sprintf(" (plus %d deferred roots, enumerated only by a real prune)", n)
			cands -= n
		}
	}
	fmt.Fprintf(w, "%s: %d objects / %s across %d candidates%s; failures: %d\n", verb, objs, humanBytes(bytes), cands, deferred, failed)
	return nil
}

// printHeld names, below the table, every hidden candidate that is kept
// for a reason the user can act on (a broken manifest, a dependency, a
// protection), so why data stays is never visible only with --show-all;
// live backups and user volumes are counted.
func printHeld(w io.Writer, pl prune.Plan) {
	var held []prune.Candidate
	live := 0
	for _, c := range pl.Candidates {
		switch {
		case c.Visible():
		case c.State == prune.StateLive || c.Type == prune.TypeProtectedUserVolume:
			live++
		default:
			held = append(held, c)
		}
	}
	if len(held) == 0 && live == 0 {
		return
	}
	fmt.Fprintf(w, "Kept and not listed above (--show-all lists them): %d live backups or user volumes, %d held:\n", live, len(held))
	for _, c := range held {
		fmt.Fprintf(w, "- %s %s %s: %s\n", c.State, c.Type, c.Prefix, oneLine(c.Reason))
	}
}

// pruneAge renders the age of createdAt at plan time for the table output.
func pruneAge(at, created time.Time) string {
	if created.IsZero() {
		return "unknown"
	}
	d := at.Sub(created)
	switch {
	case d < 0:
		return "0s"
	case d >= 24*time.Hour:
		return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
	case d >= time.Hour:
		return fmt.Sprintf("%dh", int(d/time.Hour))
	}
	return fmt.Sprintf("%dm", int(d.Round(time.Minute)/time.Minute))
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
