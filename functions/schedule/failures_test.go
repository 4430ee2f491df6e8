package schedule

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/snapflow/snapflow/functions/snapshot"
	"github.com/snapflow/snapflow/internal/fanout"
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

func TestTransientMintKeepsTheSlot(t *testing.T) {
	gr := schema.GroupResource{Group: "kopiur.home-operations.com", Resource: "snapshots"}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{name: "webhook unreachable", err: apierrors.NewInternalError(errors.New(`failed calling webhook "snapshot.kopiur"`)), want: true},
		{name: "API server timeout", err: apierrors.NewTimeoutError("slow", 1), want: true},
		{name: "too many requests", err: apierrors.NewTooManyRequests("busy", 1), want: true},
		{name: "admission denial", err: apierrors.NewForbidden(gr, "x", errors.New("denied")), want: false},
		{name: "invalid object", err: apierrors.NewInvalid(schema.GroupKind{Group: gr.Group, Kind: "Snapshot"}, "x", nil), want: false},
		{name: "over the fan-out cap", err: fmt.Errorf("mint: %w", fanout.ErrTooMany{N: 401}), want: false},
		{name: "nothing selected", err: fmt.Errorf("%w: no PVC", snapshot.ErrNothingSelected), want: false},
	}
	for _, tc := range tests {
		if got := transientMint(tc.err); got != tc.want {
			t.Errorf("%s: transientMint = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestRetryUntil(t *testing.T) {
	due := time.Date(2026, 12, 5, 3, 0, 0, 0, time.UTC)
	following := due.Add(24 * time.Hour)
	secs := func(n int64) *int64 { return &n }
	tests := []struct {
		name     string
		deadline *int64
		want     time.Time
	}{
		{name: "no deadline: until the following slot", want: following},
		{name: "a deadline inside the period", deadline: secs(600), want: due.Add(10 * time.Minute)},
		{name: "a deadline past the following slot stops there", deadline: secs(3 * 86400), want: following},
		{name: "a zero deadline gives up at once", deadline: secs(0), want: due},
	}
	for _, tc := range tests {
		if got := retryUntil(due, following, tc.deadline); !got.Equal(tc.want) {
			t.Errorf("%s: retryUntil = %s, want %s", tc.name, got, tc.want)
		}
	}
}
