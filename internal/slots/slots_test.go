package slots

import (
	"strings"
	"testing"
	"time"
)

func TestFull(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC)
	job := func(pool string) Occupant { return Occupant{Pool: pool} }
	claim := func(pool string, at time.Duration, id string) Occupant {
		return Occupant{Pool: pool, Claim: true, At: t0.Add(at), ID: id}
	}
	me := claim("a", 0, "m")
	for _, tc := range []struct {
		name string
		caps Caps
		occ  []Occupant
		self *Occupant
		full bool
		msg  string
	}{
		{"no caps", Caps{Pool: "a"}, []Occupant{job("a"), job("a")}, nil, false, ""},
		{"pool free", Caps{Pool: "a", Repository: "Repository/x/a", PoolCap: 2}, []Occupant{job("a"), job("b")}, nil, false, ""},
		{"pool full of jobs", Caps{Pool: "a", Repository: "Repository/x/a", PoolCap: 1}, []Occupant{job("a")}, nil, true, "Repository/x/a allows 1 concurrent mover jobs"},
		{"a claim mid-hooks holds the slot", Caps{Pool: "a", Repository: "Repository/x/a", PoolCap: 1}, []Occupant{claim("a", -time.Minute, "o")}, nil, true, "1 are running or starting"},
		{"another pool's claim does not", Caps{Pool: "a", PoolCap: 1}, []Occupant{claim("b", 0, "o")}, nil, false, ""},
		{"but counts against the cluster cap", Caps{Pool: "a", ClusterCap: 1}, []Occupant{claim("b", 0, "o")}, nil, true, "cluster-wide cap of 1"},
		{"after claiming: own claim not counted", Caps{Pool: "a", PoolCap: 1}, []Occupant{me}, &me, false, ""},
		{"after claiming: an earlier claim wins", Caps{Pool: "a", PoolCap: 1}, []Occupant{me, claim("a", -time.Second, "z")}, &me, true, "allows 1"},
		{"after claiming: a later claim gives way", Caps{Pool: "a", PoolCap: 1}, []Occupant{me, claim("a", time.Second, "a")}, &me, false, ""},
		{"after claiming: a tie goes to the lower id", Caps{Pool: "a", PoolCap: 1}, []Occupant{me, claim("a", 0, "a")}, &me, true, "allows 1"},
		{"after claiming: the other side of the tie", Caps{Pool: "a", PoolCap: 1}, []Occupant{me, claim("a", 0, "z")}, &me, false, ""},
		{"after claiming: jobs always count", Caps{Pool: "a", PoolCap: 1}, []Occupant{me, job("a")}, &me, true, "allows 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			full, msg := Full(tc.caps, tc.occ, tc.self)
			if full != tc.full || !strings.Contains(msg, tc.msg) {
				t.Fatalf("Full = %v %q, want %v containing %q", full, msg, tc.full, tc.msg)
			}
		})
	}
}
