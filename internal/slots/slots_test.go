package slots

import (
	"strings"
	"testing"
	"time"
)

func TestFull(t *testing.T) {
	now := time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC)
	job := func(pool string) Occupant { return Occupant{Pool: pool} }
	claim := func(pool string, ago time.Duration, id string) Occupant {
		return Occupant{Pool: pool, Claim: true, At: now.Add(-ago), ID: id}
	}
	for _, tc := range []struct {
		name string
		caps Caps
		occ  []Occupant
		full bool
		msg  string
	}{
		{"no caps", Caps{Pool: "a"}, []Occupant{job("a"), job("a")}, false, ""},
		{"pool free", Caps{Pool: "a", Repository: "Repository/x/a", PoolCap: 2}, []Occupant{job("a"), job("b")}, false, ""},
		{"pool full of jobs", Caps{Pool: "a", Repository: "Repository/x/a", PoolCap: 1}, []Occupant{job("a")}, true, "Repository/x/a allows 1 concurrent mover jobs"},
		{"a claim mid-hooks holds the slot", Caps{Pool: "a", Repository: "Repository/x/a", PoolCap: 1}, []Occupant{claim("a", time.Minute, "o")}, true, "1 are running or starting"},
		{"another pool's claim does not", Caps{Pool: "a", PoolCap: 1}, []Occupant{claim("b", 0, "o")}, false, ""},
		{"but counts against the cluster cap", Caps{Pool: "a", ClusterCap: 1}, []Occupant{claim("b", 0, "o")}, true, "cluster-wide cap of 1"},
		{"own claim is not counted", Caps{Pool: "a", PoolCap: 1}, []Occupant{claim("a", 0, "me")}, false, ""},
		{"another claim made at the same time is", Caps{Pool: "a", PoolCap: 1}, []Occupant{claim("a", 0, "me"), claim("a", 0, "other")}, true, "allows 1"},
		{"a claim past its lease is not", Caps{Pool: "a", PoolCap: 1}, []Occupant{claim("a", ClaimLease+time.Second, "o")}, false, ""},
		{"jobs always count", Caps{Pool: "a", PoolCap: 1}, []Occupant{claim("a", 0, "me"), job("a")}, true, "allows 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			full, msg := Full(tc.caps, tc.occ, "me", now)
			if full != tc.full || !strings.Contains(msg, tc.msg) {
				t.Fatalf("Full = %v %q, want %v containing %q", full, msg, tc.full, tc.msg)
			}
		})
	}
}
