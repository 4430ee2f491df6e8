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
