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

// ConfigMap is the record's name, in snapflow's namespace; Key is the
// data key holding it.
const (
	ConfigMap = "snapflow-prune"
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

// Run is one BackupRepo's last run.
type Run struct {
	At       time.Time `json:"at"`
	Trigger  string    `json:"trigger,omitempty"`
	Mode     string    `json:"mode,omitempty"`
	Outcome  Outcome   `json:"outcome"`
	Blockers int       `json:"blockers,omitempty"`
	// Message is the first blocker or the error, shortened.
	Message string `json:"message,omitempty"`
}

// Ledger maps a BackupRepo's name to its last run.
type Ledger map[string]Run

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

// Record sets repo's last run, unless the ledger already holds a later
// one (two runs may finish out of order), and drops the BackupRepos gone
// says no longer exist, so a deleted one does not stay Blocked for ever.
// It reports whether anything changed.
func (l Ledger) Record(repo string, r Run, gone func(string) bool) bool {
	changed := false
	if len(r.Message) > maxMessage {
		r.Message = r.Message[:maxMessage-3] + "..."
	}
	if prev, ok := l[repo]; !ok || !prev.At.After(r.At) {
		l[repo] = r
		changed = true
	}
	for _, name := range l.Names() {
		if name != repo && gone != nil && gone(name) {
			delete(l, name)
			changed = true
		}
	}
	return changed
}

// Names lists the BackupRepos, sorted.
func (l Ledger) Names() []string {
	out := make([]string, 0, len(l))
	for n := range l {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
