// Package cron parses the 5-field cron expressions of schedules and
// verification tiers, including Jenkins-style H, and computes firing times in
// an IANA timezone. It has no clock: callers pass the instant to start from.
package cron

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math/bits"
	"strconv"
	"strings"
)

type field struct {
	name     string
	min, max int
	names    map[string]int
}

var fields = [5]field{
	{name: "minute", min: 0, max: 59},
	{name: "hour", min: 0, max: 23},
	{name: "day-of-month", min: 1, max: 31},
	{name: "month", min: 1, max: 12, names: map[string]int{
		"JAN": 1, "FEB": 2, "MAR": 3, "APR": 4, "MAY": 5, "JUN": 6, "JUL": 7, "AUG": 8, "SEP": 9, "OCT": 10, "NOV": 11, "DEC": 12}},
	{name: "day-of-week", min: 0, max: 7, names: map[string]int{
		"SUN": 0, "MON": 1, "TUE": 2, "WED": 3, "THU": 4, "FRI": 5, "SAT": 6}},
}

// hRange is where H may land per field: day-of-month stops at 28 so a hashed
// day exists in every month.
var hRange = [5][2]int{{0, 59}, {0, 23}, {1, 28}, {1, 12}, {0, 6}}

// Schedule is a parsed expression with every H resolved.
type Schedule struct {
	expr string
	// bit i set = value i matches
	sets [5]uint64
	// A restricted day-of-month and day-of-week match when either matches
	// (the classic cron rule); a "*" field does not restrict.
	domAny, dowAny bool
}

// Parse parses a strict 5-field expression. H resolves to a value derived from
// seed (for a schedule: its namespace/name), stable across replicas and restarts.
func Parse(expr, seed string) (*Schedule, error) {
	parts := strings.Fields(expr)
	if len(parts) != 5 {
		return nil, fmt.Errorf("invalid cron expression %q: want 5 fields (minute hour day-of-month month day-of-week), got %d", expr, len(parts))
	}
	h := hashSeed(seed)
	s := &Schedule{expr: expr}
	for i, p := range parts {
		set, err := parseField(p, i, h)
		if err != nil {
			return nil, fmt.Errorf("invalid cron expression %q: %s field %q: %w", expr, fields[i].name, p, err)
		}
		s.sets[i] = set
	}
	// Sunday may be written 0 or 7.
	if s.sets[4]&(1<<7) != 0 {
		s.sets[4] = (s.sets[4] | 1) &^ (1 << 7)
	}
	s.domAny = parts[2] == "*"
	s.dowAny = parts[4] == "*"
	return s, nil
}

// String returns the expression as written.
func (s *Schedule) String() string { return s.expr }

// FiringsPerHour is how often the schedule fires within an hour it fires in.
func (s *Schedule) FiringsPerHour() int { return bits.OnesCount64(s.sets[0]) }

func hashSeed(seed string) uint64 {
	f := fnv.New64a()
	_, _ = f.Write([]byte(seed))
	return f.Sum64()
}

func parseField(text string, idx int, h uint64) (uint64, error) {
	var set uint64
	for _, item := range strings.Split(text, ",") {
		if item == "" {
			return 0, fmt.Errorf("empty list item")
		}
		s, err := parseItem(item, idx, h)
		if err != nil {
			return 0, err
		}
		set |= s
	}
	return set, nil
}

func parseItem(item string, idx int, h uint64) (uint64, error) {
	f := fields[idx]
	rangePart, step := item, 1
	if i := strings.IndexByte(item, '/'); i >= 0 {
		n, err := strconv.Atoi(item[i+1:])
		if err != nil || n < 1 {
			return 0, fmt.Errorf("step %q must be a positive whole number", item[i+1:])
		}
		rangePart, step = item[:i], n
	}

	var lo, hi int
	switch {
	case rangePart == "*":
		lo, hi = f.min, f.max
		if idx == 4 {
			hi = 6
		}
	case strings.HasPrefix(rangePart, "H"):
		lo, hi = hRange[idx][0], hRange[idx][1]
		if rest := rangePart[1:]; rest != "" {
			if !strings.HasPrefix(rest, "(") || !strings.HasSuffix(rest, ")") {
				return 0, errors.New("the H field takes an optional range as H(a-b)")
			}
			a, b, err := parseRange(rest[1:len(rest)-1], f)
			if err != nil {
				return 0, err
			}
			lo, hi = a, b
		}
		// Rotate per field so one seed does not give the same number everywhere.
		v := int(bits.RotateLeft64(h, 8*idx) % uint64(hi-lo+1))
		if step == 1 && !strings.Contains(item, "/") {
			return 1 << uint(lo+v), nil
		}
		lo += v % step
	default:
		a, b, err := parseRange(rangePart, f)
		if err != nil {
			return 0, err
		}
		lo, hi = a, b
		if !strings.Contains(rangePart, "-") && strings.Contains(item, "/") {
			hi = f.max // "5/15" means from 5 to the end, every 15
		}
	}
	var set uint64
	for v := lo; v <= hi; v += step {
		set |= 1 << uint(v)
	}
	return set, nil
}

func parseRange(s string, f field) (int, int, error) {
	a, b, isRange := strings.Cut(s, "-")
	lo, err := parseValue(a, f)
	if err != nil {
		return 0, 0, err
	}
	if !isRange {
		return lo, lo, nil
	}
	hi, err := parseValue(b, f)
	if err != nil {
		return 0, 0, err
	}
	if lo > hi {
		return 0, 0, fmt.Errorf("range %d-%d runs backwards", lo, hi)
	}
	return lo, hi, nil
}

func parseValue(s string, f field) (int, error) {
	if v, ok := f.names[strings.ToUpper(s)]; ok {
		return v, nil
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	if v < f.min || v > f.max {
		return 0, fmt.Errorf("%d is outside %d-%d", v, f.min, f.max)
	}
	return v, nil
}
