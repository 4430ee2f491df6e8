package cron

import (
	"strings"
	"testing"
	"time"
)

func mustLoc(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func TestNext(t *testing.T) {
	ny := mustLoc(t, "America/New_York")
	tests := []struct {
		name, expr string
		from       string
		loc        *time.Location
		want       []string // successive firings, RFC3339 in UTC
	}{
		{"every 15 minutes", "*/15 * * * *", "2026-01-01T10:07:00Z", time.UTC, []string{"2026-01-01T10:15:00Z", "2026-01-01T10:30:00Z"}},
		{"strictly after", "0 * * * *", "2026-01-01T10:00:00Z", time.UTC, []string{"2026-01-01T11:00:00Z"}},
		{"daily across month end", "0 2 * * *", "2026-01-31T03:00:00Z", time.UTC, []string{"2026-02-01T02:00:00Z"}},
		{"leap day only", "0 0 29 2 *", "2026-03-01T00:00:00Z", time.UTC, []string{"2028-02-29T00:00:00Z"}},
		{"names", "0 9 * JAN MON", "2026-01-01T00:00:00Z", time.UTC, []string{"2026-01-05T09:00:00Z", "2026-01-12T09:00:00Z"}},
		{"dom or dow when both set", "0 0 1 * FRI", "2026-01-01T00:00:00Z", time.UTC, []string{"2026-01-02T00:00:00Z", "2026-01-09T00:00:00Z"}},
		{"sunday as 7", "0 0 * * 7", "2026-01-01T00:00:00Z", time.UTC, []string{"2026-01-04T00:00:00Z"}},
		{"range with step", "0 8-18/5 * * *", "2026-01-01T09:00:00Z", time.UTC, []string{"2026-01-01T13:00:00Z", "2026-01-01T18:00:00Z", "2026-01-02T08:00:00Z"}},
		{"value with step runs to the end", "50/5 * * * *", "2026-01-01T09:56:00Z", time.UTC, []string{"2026-01-01T10:50:00Z", "2026-01-01T10:55:00Z"}},
		// 2026-03-08 02:00-03:00 does not exist in New York: that day's 02:30 is skipped.
		{"DST gap skipped", "30 2 * * *", "2026-03-07T12:00:00Z", ny, []string{"2026-03-09T06:30:00Z"}},
		{"DST gap hourly", "30 * * * *", "2026-03-08T06:00:00Z", ny, []string{"2026-03-08T06:30:00Z", "2026-03-08T07:30:00Z"}},
		// 2026-11-01 01:00-02:00 happens twice in New York: 01:30 fires once.
		{"DST overlap fires once", "30 1 * * *", "2026-10-31T12:00:00Z", ny, []string{"2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"}},
		{"timezone offset", "0 4 * * *", "2026-06-01T00:00:00Z", ny, []string{"2026-06-01T08:00:00Z"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse(tc.expr, "seed")
			if err != nil {
				t.Fatal(err)
			}
			at, _ := time.Parse(time.RFC3339, tc.from)
			for _, w := range tc.want {
				at = s.Next(at, tc.loc)
				if got := at.UTC().Format(time.RFC3339); got != w {
					t.Fatalf("next = %s, want %s", got, w)
				}
			}
		})
	}
}

func TestNeverFires(t *testing.T) {
	s, err := Parse("0 0 31 2 *", "")
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Next(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.UTC); !got.IsZero() {
		t.Fatalf("31 February fired at %s", got)
	}
}

func TestH(t *testing.T) {
	a, _ := Parse("H H * * *", "billing/postgres-nightly")
	b, _ := Parse("H H * * *", "billing/postgres-nightly")
	if a.sets != b.sets {
		t.Fatal("H is not stable for one seed")
	}
	distinct := map[[5]uint64]bool{}
	for _, seed := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		s, err := Parse("H H H H H", seed)
		if err != nil {
			t.Fatal(err)
		}
		for i, set := range s.sets {
			if n := popcount(set); n != 1 {
				t.Fatalf("field %d of %q matches %d values, want 1", i, seed, n)
			}
			lo, hi := hRange[i][0], hRange[i][1]
			for v := 0; v < 64; v++ {
				if set&(1<<uint(v)) != 0 && (v < lo || v > hi) {
					t.Fatalf("H in field %d gave %d, outside %d-%d", i, v, lo, hi)
				}
			}
		}
		distinct[s.sets] = true
	}
	if len(distinct) < 4 {
		t.Fatalf("H gave the same slot for most seeds: %d distinct of 8", len(distinct))
	}
	r, err := Parse("H(10-19) * * * *", "x")
	if err != nil {
		t.Fatal(err)
	}
	if r.sets[0] < 1<<10 || r.sets[0] >= 1<<20 {
		t.Fatalf("H(10-19) = %b", r.sets[0])
	}
	st, err := Parse("H/15 * * * *", "x")
	if err != nil {
		t.Fatal(err)
	}
	if st.FiringsPerHour() != 4 {
		t.Fatalf("H/15 fires %d times an hour, want 4", st.FiringsPerHour())
	}
}

func popcount(v uint64) int {
	n := 0
	for ; v != 0; v &= v - 1 {
		n++
	}
	return n
}

func TestParseErrors(t *testing.T) {
	tests := map[string]string{
		"0 0 * *":        "want 5 fields",
		"0 0 0 * * *":    "want 5 fields",
		"@daily":         "want 5 fields",
		"60 * * * *":     "minute field",
		"* 24 * * *":     "outside 0-23",
		"* * 0 * *":      "outside 1-31",
		"* * * 13 *":     "month field",
		"*/0 * * * *":    "positive whole number",
		"5-1 * * * *":    "runs backwards",
		"a * * * *":      `"a" is not a number`,
		"H(1-2 * * * *":  "H(a-b)",
		"1,,2 * * * *":   "empty list item",
		"* * * * FUNDAY": "day-of-week field",
	}
	for expr, want := range tests {
		if _, err := Parse(expr, ""); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want an error containing %q", expr, err, want)
		}
	}
}
