// Package retention is the GFS kernel: which successful Snapshots a policy's
// retention keeps, and why. It is a pure function of the Snapshots and the
// policy; callers do the deleting.
package retention

import (
	"fmt"
	"sort"
	"time"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/internal/validate"
)

// Reasons a Snapshot is kept.
const (
	ReasonLatest  = "latest"
	ReasonHourly  = "hourly"
	ReasonDaily   = "daily"
	ReasonWeekly  = "weekly"
	ReasonMonthly = "monthly"
	ReasonAnnual  = "annual"
	ReasonPinned  = "pinned"
)

// Candidate is one Snapshot as retention sees it.
type Candidate struct {
	Name string `json:"name"`
	// Time orders snapshots: the run's end time, else the object's creation.
	Time time.Time `json:"time"`
	// Bucket groups snapshots retained together: one per source and, while
	// the policy writes to several repositories, per repository.
	Bucket string `json:"bucket"`
	Pinned bool   `json:"pinned"`
	// Excluded says why the Snapshot is outside retention ("" when inside):
	// only Succeeded runs with a recorded kopia snapshot are ever pruned.
	Excluded string `json:"excluded,omitempty"`
}

// Verdict is the decision on one candidate.
type Verdict struct {
	Candidate
	Keep    bool     `json:"keep"`
	Reasons []string `json:"reasons,omitempty"`
}

// FromSnapshot maps a Snapshot to a candidate. multiRepo says whether its
// policy writes to several repositories: only then is each repository pin
// a bucket of its own. A policy shrunk to one repository puts its older
// pinned Snapshots and its new ones in one bucket again, so the old ones
// age out instead of keeping a window of their own for ever.
func FromSnapshot(s *snapv1.Snapshot, multiRepo bool) Candidate {
	c := Candidate{Name: s.Name, Time: s.CreationTimestamp.Time, Pinned: s.Spec.Pin}
	if s.Status.Timing != nil && s.Status.Timing.EndTime != nil {
		c.Time = s.Status.Timing.EndTime.Time
	}
	if src := s.Spec.Source; src != nil {
		ns := src.Target.PVC.Namespace
		if ns == "" {
			ns = s.Namespace
		}
		c.Bucket = "pvc/" + ns + "/" + src.Target.PVC.Name
	}
	if s.Spec.Repository != nil && multiRepo {
		if c.Bucket != "" {
			c.Bucket += " "
		}
		c.Bucket += "repo/" + validate.RepoKey(*s.Spec.Repository, s.Namespace)
	}
	switch {
	case s.DeletionTimestamp != nil:
		c.Excluded = "being deleted"
	case s.Status.Phase != snapv1.SnapshotSucceeded:
		phase := string(s.Status.Phase)
		if phase == "" {
			phase = "not started"
		}
		c.Excluded = "phase " + phase
	case s.Status.Snapshot == nil || s.Status.Snapshot.KopiaSnapshotID == "":
		c.Excluded = "no kopia snapshot recorded"
	}
	return c
}

type rule struct {
	reason string
	keep   *int32
	period func(time.Time) string
}

// Select applies r to the candidates. Within each bucket, newest first (ties
// by name): keepLatest keeps the N newest; each calendar rule keeps the
// newest snapshot of each of the first N periods that contain one. Periods
// are UTC hours, days, ISO weeks, months and years. Pinned snapshots and
// excluded ones are always kept. The order of the result follows the input.
func Select(r snapv1.Retention, cands []Candidate) []Verdict {
	rules := []rule{
		{ReasonHourly, r.KeepHourly, func(t time.Time) string { return t.Format("2006-01-02T15") }},
		{ReasonDaily, r.KeepDaily, func(t time.Time) string { return t.Format("2006-01-02") }},
		{ReasonWeekly, r.KeepWeekly, func(t time.Time) string { y, w := t.ISOWeek(); return fmt.Sprintf("%d-W%02d", y, w) }},
		{ReasonMonthly, r.KeepMonthly, func(t time.Time) string { return t.Format("2006-01") }},
		{ReasonAnnual, r.KeepAnnual, func(t time.Time) string { return t.Format("2006") }},
	}
	out := make([]Verdict, len(cands))
	buckets := map[string][]int{}
	for i, c := range cands {
		out[i] = Verdict{Candidate: c}
		if c.Pinned {
			out[i].Keep, out[i].Reasons = true, []string{ReasonPinned}
		}
		if c.Excluded != "" {
			out[i].Keep = true
			continue
		}
		buckets[c.Bucket] = append(buckets[c.Bucket], i)
	}
	for _, idx := range buckets {
		sort.SliceStable(idx, func(a, b int) bool {
			ta, tb := cands[idx[a]].Time, cands[idx[b]].Time
			if !ta.Equal(tb) {
				return ta.After(tb)
			}
			return cands[idx[a]].Name < cands[idx[b]].Name
		})
		keep := func(i int, reason string) {
			out[i].Keep = true
			out[i].Reasons = append(out[i].Reasons, reason)
		}
		if n := val(r.KeepLatest); n > 0 {
			for k := 0; k < len(idx) && k < n; k++ {
				keep(idx[k], ReasonLatest)
			}
		}
		for _, ru := range rules {
			n := val(ru.keep)
			seen := map[string]bool{}
			for _, i := range idx {
				if len(seen) >= n {
					break
				}
				p := ru.period(cands[i].Time.UTC())
				if !seen[p] {
					seen[p] = true
					keep(i, ru.reason)
				}
			}
		}
	}
	return out
}

func val(p *int32) int {
	if p == nil {
		return 0
	}
	return int(*p)
}

// Prune lists the names Select would delete.
func Prune(vs []Verdict) []string {
	var out []string
	for _, v := range vs {
		if !v.Keep {
			out = append(out, v.Name)
		}
	}
	return out
}

// MultiRepo says whether a policy writes to several repositories.
func MultiRepo(p *snapv1.SnapshotPolicy) bool { return len(validate.PolicyRefs(p)) > 1 }

// PinnedRepositories counts the distinct repository pins among snaps, for
// a preview that has the Snapshots but not their policy.
func PinnedRepositories(snaps []snapv1.Snapshot) int {
	seen := map[string]bool{}
	for i := range snaps {
		if r := snaps[i].Spec.Repository; r != nil {
			seen[validate.RepoKey(*r, snaps[i].Namespace)] = true
		}
	}
	return len(seen)
}
