package retention

import (
	"sort"
	"time"
)

// BudgetWindow is how long a restore-point loss budget lasts: a policy loses
// at most its threshold of restore points per window unless acknowledged.
const BudgetWindow = 24 * time.Hour

// BudgetState is what the retention function keeps in the policy's status
// between passes.
type BudgetState struct {
	// WindowStart is when the current window began (zero: none yet).
	WindowStart time.Time
	// Peak is the most restore points the policy held in this window.
	Peak int
	// HeldSince is when prunes were first held back (zero: none held). An
	// acknowledgement at or after it releases them.
	HeldSince time.Time
	// Held are the names held back, the only ones an acknowledgement
	// releases: what joins later was never shown to the owner.
	Held []string
}

// BudgetInput is one pass's facts.
type BudgetInput struct {
	State BudgetState
	// Threshold is the most restore points one window may lose (0 disables).
	Threshold int
	// Ack is the policy's allow-mass-deletion instant (zero when absent).
	Ack time.Time
	// RestorePoints is how many restore points the policy holds now, before
	// this pass prunes anything.
	RestorePoints int
	// Prune is what GFS retention would delete this pass.
	Prune []Candidate
	Now   time.Time
}

// BudgetResult is the decision: what to prune now, what to hold.
type BudgetResult struct {
	Prune []string
	Held  []string
	State BudgetState
	// Acknowledged says an acknowledgement released held prunes this pass.
	Acknowledged bool
}

// Budget limits a pass's prunes so that, within one window, the policy's
// restore points never fall more than Threshold below their peak. Routine
// GFS rotation (a new run in, the oldest out) never touches the budget; a
// policy edit or a burst of deletions that would drop many restore points
// at once prunes the oldest up to the budget and holds the rest until the
// window rolls over or the owner acknowledges. Deletions from elsewhere
// (kubectl delete) lower the count too, so they share the budget.
func Budget(in BudgetInput) BudgetResult {
	oldestFirst := append([]Candidate(nil), in.Prune...)
	sort.SliceStable(oldestFirst, func(a, b int) bool {
		if !oldestFirst[a].Time.Equal(oldestFirst[b].Time) {
			return oldestFirst[a].Time.Before(oldestFirst[b].Time)
		}
		return oldestFirst[a].Name < oldestFirst[b].Name
	})
	names := make([]string, len(oldestFirst))
	for i, c := range oldestFirst {
		names[i] = c.Name
	}
	st := in.State
	if st.WindowStart.IsZero() || !in.Now.Before(st.WindowStart.Add(BudgetWindow)) || in.Now.Before(st.WindowStart) {
		st.WindowStart, st.Peak = in.Now, in.RestorePoints
	}
	if in.RestorePoints > st.Peak {
		st.Peak = in.RestorePoints
	}
	if in.Threshold <= 0 {
		return BudgetResult{Prune: names, State: BudgetState{WindowStart: st.WindowStart, Peak: st.Peak}}
	}
	var released []string
	acknowledged := !st.HeldSince.IsZero() && !in.Ack.IsZero() && !in.Ack.Before(st.HeldSince.Truncate(time.Second))
	if acknowledged {
		// The acknowledged names go; the window restarts from what is left,
		// and anything else is budgeted afresh.
		was := map[string]bool{}
		for _, n := range st.Held {
			was[n] = true
		}
		var rest []string
		for _, n := range names {
			if was[n] {
				released = append(released, n)
			} else {
				rest = append(rest, n)
			}
		}
		names = rest
		st = BudgetState{WindowStart: in.Now, Peak: in.RestorePoints - len(released)}
	}
	left := in.RestorePoints - len(released)
	allowed := in.Threshold - (st.Peak - left)
	if allowed < 0 {
		allowed = 0
	}
	if allowed > len(names) {
		allowed = len(names)
	}
	res := BudgetResult{Prune: append(released, names[:allowed]...), Acknowledged: acknowledged, State: BudgetState{WindowStart: st.WindowStart, Peak: st.Peak}}
	if allowed < len(names) {
		res.Held = names[allowed:]
		res.State.Held = res.Held
		res.State.HeldSince = st.HeldSince
		if res.State.HeldSince.IsZero() {
			res.State.HeldSince = in.Now
		}
	}
	return res
}
