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
	after := func(pruned int) BudgetState {
		s := st
		s.HeldSince = time.Time{}
		if pruned < len(names) && !st.HeldSince.IsZero() {
			s.HeldSince = st.HeldSince
		} else if pruned < len(names) {
			s.HeldSince = in.Now
		}
		return s
	}
	if in.Threshold <= 0 {
		return BudgetResult{Prune: names, State: after(len(names))}
	}
	if !st.HeldSince.IsZero() && !in.Ack.IsZero() && !in.Ack.Before(st.HeldSince.Truncate(time.Second)) {
		// Acknowledged: prune everything and start a fresh window from what is left.
		s := BudgetState{WindowStart: in.Now, Peak: in.RestorePoints - len(names)}
		return BudgetResult{Prune: names, State: s, Acknowledged: true}
	}
	allowed := in.Threshold - (st.Peak - in.RestorePoints)
	if allowed < 0 {
		allowed = 0
	}
	if allowed > len(names) {
		allowed = len(names)
	}
	res := BudgetResult{Prune: names[:allowed:allowed], State: after(allowed)}
	if allowed < len(names) {
		res.Held = names[allowed:]
	}
	return res
}
