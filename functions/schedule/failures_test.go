package schedule

import (
	"fmt"
	"strings"
	"testing"
)

func TestFiringFailuresStayBounded(t *testing.T) {
	many := func(n, size int) []string {
		var out []string
		for i := 0; i < n; i++ {
			out = append(out, fmt.Sprintf("policy p%03d: %s", i, strings.Repeat("x", size)))
		}
		return out
	}
	tests := []struct {
		name     string
		failed   []string
		contains []string
		absent   []string
	}{
		{name: "one", failed: many(1, 10), contains: []string{"policy p000"}, absent: []string{"more"}},
		{name: "five are all shown", failed: many(5, 10), contains: []string{"policy p004"}, absent: []string{"more"}},
		{name: "past five the rest are counted", failed: many(7, 10), contains: []string{"policy p004", "; and 2 more (see the schedule's Events)"}, absent: []string{"policy p005"}},
		{name: "long reasons are cut", failed: many(400, 2000), contains: []string{"…"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := firingFailures("slot created 0 Snapshot(s)", tc.failed)
			if len(got) > 4000+len("…") {
				t.Fatalf("%d characters", len(got))
			}
			for _, s := range tc.contains {
				if !strings.Contains(got, s) {
					t.Errorf("missing %q in %q", s, got)
				}
			}
			for _, s := range tc.absent {
				if strings.Contains(got, s) {
					t.Errorf("unexpected %q in %q", s, got)
				}
			}
		})
	}
}
