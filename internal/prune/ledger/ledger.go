// Package ledger is the record of each BackupRepo's last orphan-prune
// run: when it ran, what started it, and whether it found the cluster or
// the bucket in a state that is unsafe to prune. The prune function scales
// to zero and keeps nothing in memory, so it writes this record to a
// ConfigMap, and the exporter serves it to Prometheus, where an alert can
// say that pruning is stuck on something only an operator can fix.
package ledger

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"
)

// ConfigMap is the record's default name, in snapflow's namespace (the
// chart's is <release>-prune-record); Key is the data key holding it.
const (
	ConfigMap = "snapflow-prune-record"
	Key       = "runs.json"
)

// Outcome is how a prune run ended.
type Outcome string

const (
	// Planned: the plan formed with nothing blocking it, and was not executed.
	Planned Outcome = "Planned"
	// Blocked: the plan named blockers, or the final checks refused to
	// delete; nothing was deleted and only an operator can change that.
	Blocked Outcome = "Blocked"
	// DryRun: a dry run completed.
	DryRun Outcome = "DryRun"
	// Pruned: a live prune completed.
	Pruned Outcome = "Pruned"
	// Failed: no plan could be made, or candidates failed; a retry may
	// succeed.
	Failed Outcome = "Failed"
)

// Outcomes lists every outcome, for metrics with a closed set of values.
var Outcomes = []Outcome{Planned, Blocked, DryRun, Pruned, Failed}

// maxMessage bounds one run's message: the record must stay small.
const maxMessage = 512

// Kinds of run, recorded apart: a plan runs no deletion guards, so a clean
// plan must not clear what the guards of a dry run or a prune refused.
const (
	KindPlan  = "plan"
	KindPrune = "prune" // a dry run or a live prune
)

// Run is one BackupRepo's last run of one kind, over the deployment's
// whole scope (a narrower run sees less and is not recorded).
type Run struct {
	Repo     string    `json:"repo"`
	Kind     string    `json:"kind"`
	At       time.Time `json:"at"`
	Trigger  string    `json:"trigger,omitempty"`
	Outcome  Outcome   `json:"outcome"`
	Blockers int       `json:"blockers,omitempty"`
	// Message is the first blocker or the error, shortened.
	Message string `json:"message,omitempty"`
}

// Ledger maps a BackupRepo and a kind of run to its last run.
type Ledger map[string]Run

func key(repo, kind string) string { return repo + "/" + kind }

// Record sets the last run of r's BackupRepo and kind, unless the ledger
// already holds a later one (two runs may finish out of order), or r
// Failed where the last one was Blocked (a failure proves nothing about
// the state that blocked it, so the safe verdict stays). It drops the
// BackupRepos gone says no longer exist, so a deleted one does not stay
// Blocked for ever, and reports whether anything changed.
func (l Ledger) Record(r Run, gone func(string) bool) bool {
	changed := false
	if len(r.Message) > maxMessage {
		r.Message = r.Message[:maxMessage-3] + "..."
	}
	k := key(r.Repo, r.Kind)
	prev, ok := l[k]
	switch {
	case ok && prev.At.After(r.At):
	case ok && prev.Outcome == Blocked && r.Outcome == Failed:
	default:
		l[k] = r
		changed = true
	}
	for _, k := range l.Keys() {
		if name := l[k].Repo; name != r.Repo && gone != nil && gone(name) {
			delete(l, k)
			changed = true
		}
	}
	return changed
}

// Keys lists the entries, sorted.
func (l Ledger) Keys() []string {
	out := make([]string, 0, len(l))
	for n := range l {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Decode reads a record; an empty one is an empty ledger.
func Decode(b []byte) (Ledger, error) {
	l := Ledger{}
	if len(b) == 0 {
		return l, nil
	}
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, fmt.Errorf("decode the prune record: %w", err)
	}
	return l, nil
}

// Encode writes the record.
func (l Ledger) Encode() ([]byte, error) { return json.Marshal(l) }
