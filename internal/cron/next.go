package cron

import "time"

// Next returns the first firing strictly after t, evaluated as wall-clock time
// in loc. A wall-clock minute that does not exist (a DST gap) is skipped; one
// that exists twice (a DST overlap) fires once, at its first occurrence.
// It returns the zero time when nothing matches within five years.
func (s *Schedule) Next(t time.Time, loc *time.Location) time.Time {
	t = t.In(loc)
	// Walk wall-clock fields, not instants, so DST shifts do not skew the walk.
	y, mo, d := t.Date()
	hh, mm := t.Hour(), t.Minute()+1
	limit := y + 5
	for y <= limit {
		if mm > 59 {
			mm, hh = 0, hh+1
		}
		if hh > 23 {
			hh, d = 0, d+1
		}
		if d > daysIn(y, mo) {
			d, mo = 1, mo+1
		}
		if mo > 12 {
			mo, y = 1, y+1
			continue
		}
		if !s.has(3, int(mo)) {
			mo, d, hh, mm = mo+1, 1, 0, 0
			continue
		}
		if !s.dayMatches(y, mo, d) {
			d, hh, mm = d+1, 0, 0
			continue
		}
		if !s.has(1, hh) {
			hh, mm = hh+1, 0
			continue
		}
		if !s.has(0, mm) {
			mm++
			continue
		}
		at := time.Date(y, mo, d, hh, mm, 0, 0, loc)
		// time.Date normalises a non-existent wall time forward; such a
		// minute is not a firing.
		if at.Hour() != hh || at.Minute() != mm || at.Day() != d {
			mm++
			continue
		}
		if at.After(t) {
			return at
		}
		mm++
	}
	return time.Time{}
}

func (s *Schedule) has(idx, v int) bool { return s.sets[idx]&(1<<uint(v)) != 0 }

func (s *Schedule) dayMatches(y int, mo time.Month, d int) bool {
	dom := s.has(2, d)
	dow := s.has(4, int(time.Date(y, mo, d, 12, 0, 0, 0, time.UTC).Weekday()))
	switch {
	case s.domAny && s.dowAny:
		return true
	case s.domAny:
		return dow
	case s.dowAny:
		return dom
	default:
		return dom || dow
	}
}

func daysIn(y int, mo time.Month) int {
	return time.Date(y, mo+1, 0, 0, 0, 0, 0, time.UTC).Day()
}
