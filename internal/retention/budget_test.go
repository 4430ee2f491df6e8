package retention

import (
	"reflect"
	"testing"
	"time"
)

func TestBudget(t *testing.T) {
	now := at("2026-06-10T12:00:00Z")
	cands := func(names ...string) []Candidate {
		var out []Candidate
		for i, n := range names {
			// Listed newest first on purpose: Budget prunes the oldest first.
			out = append(out, Candidate{Name: n, Time: now.Add(-time.Duration(i+1) * time.Hour)})
		}
		return out
	}
	held := now.Add(-time.Hour)
	tests := []struct {
		name      string
		in        BudgetInput
		prune     []string
		held      []string
		state     BudgetState
		acknowled bool
	}{
		{
			name:  "routine rotation: one in, one out, first pass opens a window",
			in:    BudgetInput{Threshold: 2, RestorePoints: 8, Prune: cands("old"), Now: now},
			prune: []string{"old"},
			state: BudgetState{WindowStart: now, Peak: 8},
		},
		{
			name:  "rotation never spends the budget",
			in:    BudgetInput{State: BudgetState{WindowStart: now.Add(-time.Hour), Peak: 8}, Threshold: 1, RestorePoints: 8, Prune: cands("old"), Now: now},
			prune: []string{"old"},
			state: BudgetState{WindowStart: now.Add(-time.Hour), Peak: 8},
		},
		{
			name:  "a big drop prunes the oldest up to the threshold and holds the rest",
			in:    BudgetInput{Threshold: 2, RestorePoints: 10, Prune: cands("d", "c", "b", "a"), Now: now},
			prune: []string{"a", "b"},
			held:  []string{"c", "d"},
			state: BudgetState{WindowStart: now, Peak: 10, HeldSince: now},
		},
		{
			name:  "losses earlier in the window count: nothing more until it rolls over",
			in:    BudgetInput{State: BudgetState{WindowStart: now.Add(-2 * time.Hour), Peak: 10, HeldSince: held}, Threshold: 2, RestorePoints: 8, Prune: cands("d", "c"), Now: now},
			held:  []string{"c", "d"},
			state: BudgetState{WindowStart: now.Add(-2 * time.Hour), Peak: 10, HeldSince: held},
		},
		{
			name:  "deletions from elsewhere share the budget",
			in:    BudgetInput{State: BudgetState{WindowStart: now.Add(-time.Hour), Peak: 10}, Threshold: 3, RestorePoints: 8, Prune: cands("c", "b", "a"), Now: now},
			prune: []string{"a"},
			held:  []string{"b", "c"},
			state: BudgetState{WindowStart: now.Add(-time.Hour), Peak: 10, HeldSince: now},
		},
		{
			name:  "a new window grants a new budget; still held keeps its first instant",
			in:    BudgetInput{State: BudgetState{WindowStart: now.Add(-25 * time.Hour), Peak: 10, HeldSince: held}, Threshold: 1, RestorePoints: 8, Prune: cands("d", "c"), Now: now},
			prune: []string{"c"},
			held:  []string{"d"},
			state: BudgetState{WindowStart: now, Peak: 8, HeldSince: held},
		},
		{
			name:      "an acknowledgement at or after the hold releases what it held and restarts the window",
			in:        BudgetInput{State: BudgetState{WindowStart: now.Add(-2 * time.Hour), Peak: 10, HeldSince: held.Add(300 * time.Millisecond), Held: []string{"c", "d"}}, Threshold: 2, Ack: held, RestorePoints: 8, Prune: cands("d", "c"), Now: now},
			prune:     []string{"c", "d"},
			state:     BudgetState{WindowStart: now, Peak: 6},
			acknowled: true,
		},
		{
			name:      "an acknowledgement releases only the names it was shown; newcomers get the fresh budget",
			in:        BudgetInput{State: BudgetState{WindowStart: now.Add(-2 * time.Hour), Peak: 10, HeldSince: held, Held: []string{"c"}}, Threshold: 1, Ack: held, RestorePoints: 8, Prune: cands("e", "d", "c"), Now: now},
			prune:     []string{"c", "d"},
			held:      []string{"e"},
			state:     BudgetState{WindowStart: now, Peak: 7, HeldSince: now},
			acknowled: true,
		},
		{
			name:  "an acknowledgement older than the hold releases nothing",
			in:    BudgetInput{State: BudgetState{WindowStart: now.Add(-2 * time.Hour), Peak: 10, HeldSince: held}, Threshold: 2, Ack: held.Add(-time.Second), RestorePoints: 8, Prune: cands("d"), Now: now},
			held:  []string{"d"},
			state: BudgetState{WindowStart: now.Add(-2 * time.Hour), Peak: 10, HeldSince: held},
		},
		{
			name:  "an acknowledgement with nothing held is not banked for later",
			in:    BudgetInput{Threshold: 1, Ack: now, RestorePoints: 5, Prune: cands("b", "a"), Now: now},
			prune: []string{"a"},
			held:  []string{"b"},
			state: BudgetState{WindowStart: now, Peak: 5, HeldSince: now},
		},
		{
			name:  "threshold 0 disables the budget",
			in:    BudgetInput{Threshold: 0, RestorePoints: 10, Prune: cands("c", "b", "a"), Now: now},
			prune: []string{"a", "b", "c"},
			state: BudgetState{WindowStart: now, Peak: 10},
		},
		{
			name:  "a window start in the future (clock skew) opens a new window",
			in:    BudgetInput{State: BudgetState{WindowStart: now.Add(time.Hour), Peak: 50}, Threshold: 1, RestorePoints: 5, Prune: cands("a"), Now: now},
			prune: []string{"a"},
			state: BudgetState{WindowStart: now, Peak: 5},
		},
		{
			name:  "nothing to prune clears a hold",
			in:    BudgetInput{State: BudgetState{WindowStart: now, Peak: 5, HeldSince: held}, Threshold: 1, RestorePoints: 3, Now: now},
			state: BudgetState{WindowStart: now, Peak: 5},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Budget(tt.in)
			if !reflect.DeepEqual(nonNil(got.Prune), nonNil(tt.prune)) || !reflect.DeepEqual(nonNil(got.Held), nonNil(tt.held)) {
				t.Errorf("prune %v held %v, want prune %v held %v", got.Prune, got.Held, tt.prune, tt.held)
			}
			if !got.State.WindowStart.Equal(tt.state.WindowStart) || got.State.Peak != tt.state.Peak || !got.State.HeldSince.Equal(tt.state.HeldSince) {
				t.Errorf("state %+v, want %+v", got.State, tt.state)
			}
			if got.Acknowledged != tt.acknowled {
				t.Errorf("acknowledged %v, want %v", got.Acknowledged, tt.acknowled)
			}
		})
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
