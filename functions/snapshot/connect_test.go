package snapshot

import (
	"testing"
	"time"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
)

// Connect attempts back off by doubling between the base and the ceiling,
// count each attempt once and start over at a new generation.
func TestNextConnectBacksOff(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC)
	const base, ceiling = time.Minute, 30 * time.Minute
	var st *snapv1.ConnectStatus
	ended := t0
	var waits []time.Duration
	for i := 0; i < 9; i++ {
		st = nextConnect(st, 3, ended, base, ceiling)
		if int(st.Attempts) != i+1 || !st.FailingSince.Time.Equal(t0) {
			t.Fatalf("attempt %d: %+v", i+1, st)
		}
		wait := st.NextAttemptAt.Sub(st.LastAttemptAt.Time)
		waits = append(waits, wait)
		ended = st.NextAttemptAt.Time.Add(10 * time.Second) // the next attempt takes 10 s
	}
	want := []time.Duration{time.Minute, 70 * time.Second, 150 * time.Second, 310 * time.Second, 630 * time.Second, 1270 * time.Second, ceiling, ceiling, ceiling}
	for i := range want {
		if waits[i] != want[i] {
			t.Errorf("wait %d = %s, want %s (all: %v)", i+1, waits[i], want[i], waits)
		}
	}

	again := nextConnect(st, 3, st.LastAttemptAt.Time, base, ceiling)
	if again.Attempts != st.Attempts || !again.NextAttemptAt.Equal(&st.NextAttemptAt) {
		t.Errorf("the same attempt seen again changed the state: %+v -> %+v", st, again)
	}
	fresh := nextConnect(st, 4, ended, base, ceiling)
	if fresh.Attempts != 1 || !fresh.FailingSince.Time.Equal(ended) || fresh.NextAttemptAt.Sub(ended) != base {
		t.Errorf("a new generation starts over: %+v", fresh)
	}
}
