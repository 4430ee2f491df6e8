// Package slots decides whether a backup run may take one of its
// repository's concurrent-run slots (spec.concurrency.maxConcurrentJobs)
// and one of the cluster's. A slot is held by a live mover Job, or by a
// run that claimed it before its beforeSnapshot hooks and staging: the
// claim is taken before the workload is frozen, so a run is never parked
// with its application quiesced and the caps hold while runs are still in
// their hooks. A run counts, writes its claim, then counts again and gives
// way if the slot is now taken: of two runs claiming at once, whichever
// counts second sees the other's claim (both may give way, never both go
// on). A claim counts against others for ClaimLease at most, so a run
// frozen for hours cannot hold everyone else's slots. No client and no
// clock: callers list Jobs and Snapshots and pass them and the time in.
package slots

import (
	"fmt"
	"time"
)

// ClaimLease is how long a claim counts against other runs.
const ClaimLease = 30 * time.Minute

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
	// Claim marks a run's claim, made at At by the run with UID ID.
	Claim bool
	At    time.Time
	ID    string
}

// Full reports whether the run self (its UID) may not take a slot, and
// why. Its own claim, a twin delivery's of the same run, never counts;
// claims older than ClaimLease do not either.
func Full(c Caps, occ []Occupant, self string, now time.Time) (bool, string) {
	pool, all := 0, 0
	for _, o := range occ {
		if o.Claim && (o.ID == self || now.Sub(o.At) > ClaimLease) {
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
