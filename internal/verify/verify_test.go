package verify

import (
	"strings"
	"testing"
	"time"

	"github.com/snapflow/snapflow/internal/schedule"
)

func ts(s string) *time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return &t
}

func TestDue(t *testing.T) {
	daily := &schedule.Spec{Cron: "0 3 * * *", Location: time.UTC, Seed: "ns/p", UID: "u"}
	now := *ts("2026-05-10T12:00:00Z")
	tests := []struct {
		name            string
		spec            *schedule.Spec
		last, requested *time.Time
		due             bool
		slot, next      string
	}{
		{"first run catches up at once", daily, nil, nil, true, "2026-05-10T12:00:00Z", "2026-05-11T03:00:00Z"},
		{"ran today's slot already", daily, ts("2026-05-10T03:00:00Z"), nil, false, "", "2026-05-11T03:00:00Z"},
		{"today's slot is missed", daily, ts("2026-05-09T03:00:00Z"), nil, true, "2026-05-10T03:00:00Z", ""},
		{"several missed collapse into the latest", daily, ts("2026-05-01T03:00:00Z"), nil, true, "2026-05-10T03:00:00Z", ""},
		{"a request runs at once", daily, ts("2026-05-10T03:00:00Z"), ts("2026-05-10T11:00:00Z"), true, "2026-05-10T11:00:00Z", ""},
		{"a request already served is not run twice", daily, ts("2026-05-10T11:00:00Z"), ts("2026-05-10T11:00:00Z"), false, "", "2026-05-11T03:00:00Z"},
		{"a request in the future waits", daily, ts("2026-05-10T03:00:00Z"), ts("2026-05-10T13:00:00Z"), false, "", "2026-05-11T03:00:00Z"},
		{"no schedule: only requests", nil, nil, nil, false, "", ""},
		{"no schedule, requested", nil, nil, ts("2026-05-10T11:00:00Z"), true, "2026-05-10T11:00:00Z", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Due(tt.spec, tt.last, tt.requested, now)
			if err != nil {
				t.Fatal(err)
			}
			if d.Due != tt.due {
				t.Fatalf("due = %v (%s), want %v", d.Due, d.Reason, tt.due)
			}
			if tt.slot != "" && !d.Slot.Equal(*ts(tt.slot)) {
				t.Errorf("slot = %v, want %s", d.Slot, tt.slot)
			}
			if tt.next != "" && !d.Next.Equal(*ts(tt.next)) {
				t.Errorf("next = %v, want %s", d.Next, tt.next)
			}
		})
	}
}

func TestJudge(t *testing.T) {
	good := Outcome{Tier: Quick, SnapshotID: "k1", Files: 10, Bytes: 100}
	deep := Outcome{Tier: Deep, SnapshotID: "k1", Files: 10, Bytes: 100, RestoredFiles: 10, ChecksumMatches: true}
	tests := []struct {
		name string
		o    Outcome
		expr string
		pass bool
		msg  string
	}{
		{"clean quick", good, "", true, "passed"},
		{"errors fail", Outcome{Tier: Quick, SnapshotID: "k1", Errors: 2}, "", false, "found 2 error(s)"},
		{"clean deep", deep, "", true, "passed"},
		{"deep with a mismatch", Outcome{Tier: Deep, SnapshotID: "k1", Files: 10, RestoredFiles: 10}, "", false, "did not match"},
		{"deep restoring fewer files", Outcome{Tier: Deep, SnapshotID: "k1", Files: 10, RestoredFiles: 9, ChecksumMatches: true}, "", false, "restored 9 files"},
		{"successExpr holds", good, "stats.files >= 10 && tier == 'quick'", true, "successExpr held"},
		{"successExpr false fails", good, "stats.files > 1000", false, "returned false"},
		{"successExpr sees restored", deep, "restored.checksumMatches && restored.files == stats.files", true, "held"},
		{"errors win over successExpr", Outcome{Tier: Quick, SnapshotID: "k1", Errors: 1}, "true", false, "error(s)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pass, msg, err := Judge(tt.o, tt.expr)
			if err != nil {
				t.Fatal(err)
			}
			if pass != tt.pass || !strings.Contains(msg, tt.msg) {
				t.Fatalf("Judge = %v %q, want %v and %q", pass, msg, tt.pass, tt.msg)
			}
		})
	}
}
