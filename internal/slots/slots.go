// Package slots decides whether a backup run may take one of its
// repository's concurrent-run slots (spec.concurrency.maxConcurrentJobs)
// and one of the cluster's. A slot is held by a live mover Job, or by a
// run that claimed it before its beforeSnapshot hooks and staging: the
// claim is taken before the workload is frozen, so a run is never parked
// with its application quiesced and the caps hold while runs are still in
// their hooks. Two runs that claim at the same moment both see each
// other's claim on the second count, and only the earlier (by claim time,
// then UID) keeps it. No client and no clock: callers list Jobs and
// Snapshots and pass them in.
package slots

import (
	"fmt"
	"time"
)

// Caps are the limits one run is checked against.
type Caps struct {
	// Pool is the run's repository pool key; Repository names it in
	// messages.
	Pool, Repository string
	// PoolCap is the repository's maxConcurrentJobs, ClusterCap the
	// functions' cluster-wide cap (0: unlimited).
	PoolCap, ClusterCap int
}

// Capped says whether any cap applies; without one no claim is needed.
func (c Caps) Capped() bool { return c.PoolCap > 0 || c.ClusterCap > 0 }

// Occupant holds a slot: a live mover Job, or a run's claim.
type Occupant struct {
	Pool string
	// Claim marks a run's claim; At and ID order claims.
	Claim bool
	At    time.Time
	ID    string
}

// before orders claims: earlier claim time first, then the lower ID.
func (o Occupant) before(p Occupant) bool {
	if !o.At.Equal(p.At) {
		return o.At.Before(p.At)
	}
	return o.ID < p.ID
}

// Full reports whether the run may not take a slot, and why. With self
// nil it counts every occupant (the check before claiming); with self set
// it counts Jobs and only the claims ordered before self (the check after
// claiming, which settles a tie between two runs that claimed at once).
func Full(c Caps, occ []Occupant, self *Occupant) (bool, string) {
	pool, all := 0, 0
	for _, o := range occ {
		if self != nil && o.Claim && (o.ID == self.ID || !o.before(*self)) {
			continue
		}
		all++
		if o.Pool == c.Pool {
			pool++
		}
	}
	if c.PoolCap > 0 && pool >= c.PoolCap {
		return true, fmt.Sprintf("%s allows %d concurrent mover jobs (spec.concurrency.maxConcurrentJobs) and %d are running or starting; this run starts when one finishes", c.Repository, c.PoolCap, pool)
	}
	if c.ClusterCap > 0 && all >= c.ClusterCap {
		return true, fmt.Sprintf("the cluster-wide cap of %d concurrent mover jobs is reached (%d running or starting); this run starts when one finishes", c.ClusterCap, all)
	}
	return false, ""
}
