// Package schedule computes when a SnapshotSchedule fires: its cron (with H
// resolved from the schedule's identity) in its timezone, each slot moved by
// a jitter that is derived, not drawn, so every replica and every restart
// computes the same instant. No clock of its own: callers pass the time.
package schedule

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/snapflow/snapflow/internal/cron"
)

// Jitter is the offset of one slot: fnv1a(uid, slot) modulo the window, in
// whole seconds; zero without a window.
func Jitter(uid string, slot time.Time, window time.Duration) time.Duration {
	secs := int64(window / time.Second)
	if secs <= 0 {
		return 0
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(uid))
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(slot.Unix()))
	_, _ = h.Write(b[:])
	return time.Duration(h.Sum64()%uint64(secs)) * time.Second
}

// Spec is a resolved schedule: inherited timezone and jitter already applied.
type Spec struct {
	Cron     string
	Location *time.Location
	Jitter   time.Duration
	// Seed resolves H (namespace/name); UID seeds the jitter.
	Seed, UID string
}

// Firing is one slot and when it actually fires.
type Firing struct {
	Slot time.Time `json:"slot"`
	At   time.Time `json:"at"`
}

// Next lists the next n firings after from.
func Next(s Spec, from time.Time, n int) ([]Firing, error) {
	c, err := cron.Parse(s.Cron, s.Seed)
	if err != nil {
		return nil, err
	}
	loc := s.Location
	if loc == nil {
		loc = time.UTC
	}
	var out []Firing
	t := from
	for len(out) < n {
		slot := c.Next(t, loc)
		if slot.IsZero() {
			if len(out) == 0 {
				return nil, fmt.Errorf("cron expression %q never fires", s.Cron)
			}
			break
		}
		out = append(out, Firing{Slot: slot, At: slot.Add(Jitter(s.UID, slot, s.Jitter))})
		t = slot
	}
	return out, nil
}

// Notes say why a repository default was not inherited, one per setting
// ("" when it was, or the schedule set its own).
type Notes struct{ Timezone, Jitter string }

// All lists the notes that are set.
func (n Notes) All() []string {
	var out []string
	for _, s := range []string{n.Timezone, n.Jitter} {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// Inherit resolves a schedule's timezone and jitter: its own values win;
// otherwise the repositories' scheduleDefaults, when they all agree; else
// UTC and no jitter.
func Inherit(tz, jitter string, defaults []Defaults) (string, string, Notes) {
	var notes Notes
	pick := func(own, what string, get func(Defaults) string, fallback string, note *string) string {
		if own != "" {
			return own
		}
		vals := map[string]bool{}
		for _, d := range defaults {
			vals[get(d)] = true
		}
		switch len(vals) {
		case 0:
			return fallback
		case 1:
			for v := range vals {
				if v != "" {
					return v
				}
			}
			return fallback
		}
		*note = fmt.Sprintf("the matched policies' repositories disagree on scheduleDefaults.%s, so %s is used; set schedule.%s explicitly", what, describe(fallback), what)
		return fallback
	}
	tzOut := pick(tz, "timezone", func(d Defaults) string { return d.Timezone }, "UTC", &notes.Timezone)
	jitterOut := pick(jitter, "jitter", func(d Defaults) string { return d.Jitter }, "", &notes.Jitter)
	return tzOut, jitterOut, notes
}

// Defaults are one repository's scheduleDefaults.
type Defaults struct{ Timezone, Jitter string }

func describe(v string) string {
	if v == "" {
		return "no jitter"
	}
	return v
}

// Resolved is a cron with its inherited timezone and jitter applied.
type Resolved struct {
	Spec             Spec
	Timezone, Jitter string
	// Notes say why a repository default was not inherited.
	Notes Notes
}

// Resolve inherits timezone and jitter (see Inherit) and parses them into
// a Spec; seed resolves H and uid seeds the jitter.
func Resolve(cron, tz, jitter string, defaults []Defaults, seed, uid string) (Resolved, error) {
	r := Resolved{}
	r.Timezone, r.Jitter, r.Notes = Inherit(tz, jitter, defaults)
	loc, err := time.LoadLocation(r.Timezone)
	if err != nil {
		return r, fmt.Errorf("timezone %q: %w", r.Timezone, err)
	}
	var jit time.Duration
	if r.Jitter != "" {
		if jit, err = time.ParseDuration(r.Jitter); err != nil {
			return r, fmt.Errorf("jitter %q: %w", r.Jitter, err)
		}
	}
	r.Spec = Spec{Cron: cron, Location: loc, Jitter: jit, Seed: seed, UID: uid}
	return r, nil
}

// StaleAfter is how many slots may pass after the last success before a
// schedule's backups are stale: the first may still be running, the
// second has had a whole period.
const StaleAfter = 2

// Stale says whether a schedule's backups are overdue at now: StaleAfter
// slots have begun since the last success (or since the schedule was
// made, when none succeeded) without one. due is when it turned (or
// turns) stale.
func Stale(s Spec, since, now time.Time) (stale bool, due time.Time, err error) {
	fs, err := Next(s, since, StaleAfter)
	if err != nil {
		return false, time.Time{}, err
	}
	if len(fs) < StaleAfter {
		return false, time.Time{}, nil // the cron stops firing before then
	}
	due = fs[StaleAfter-1].At
	return !now.Before(due), due, nil
}
