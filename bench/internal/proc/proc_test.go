package proc

import (
	"testing"
	"time"
)

func TestPairedRatio(t *testing.T) {
	ms := func(secs ...float64) []Measure {
		var out []Measure
		for _, s := range secs {
			out = append(out, Measure{Wall: time.Duration(s * float64(time.Second))})
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		num, den []Measure
		want     float64
	}{
		{"odd count takes the middle pair's ratio", ms(1, 3, 2), ms(1, 2, 4), 1},
		{"even count averages the middle two", ms(1, 2, 3, 8), ms(2, 2, 2, 2), 1.25},
		{"pairs by position, not by sorted time", ms(4, 1), ms(1, 4), 2.125},
		{"extra runs on one side are ignored", ms(2, 9), ms(1), 2},
		{"a zero denominator is skipped", ms(1, 3), ms(0, 1), 3},
		{"no pairs", nil, ms(1), 0},
	} {
		if got := PairedRatio(tc.num, tc.den); got != tc.want {
			t.Errorf("%s: PairedRatio = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestSpread(t *testing.T) {
	for _, tc := range []struct {
		name   string
		sorted []float64
		want   string
	}{
		{"quartiles interpolate; ties at 1 are not faster", []float64{0.8, 0.9, 1, 1.1, 1.2}, "5 pairs: median 1.000, middle half 0.90–1.10, faster in 2"},
		{"even count", []float64{0.5, 0.7, 0.9, 1.3}, "4 pairs: median 0.800, middle half 0.65–1.00, faster in 3"},
		{"one pair", []float64{1.5}, "1 pairs: median 1.500, middle half 1.50–1.50, faster in 0"},
		{"none", nil, "no pairs"},
	} {
		if got := Spread(tc.sorted); got != tc.want {
			t.Errorf("%s: Spread = %q, want %q", tc.name, got, tc.want)
		}
	}
}
