package ledger

import (
	"strings"
	"testing"
	"time"
)

func TestRecord(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)
	l := Ledger{"old": {At: t0, Outcome: Blocked}, "kept": {At: t0, Outcome: Pruned}}
	gone := func(n string) bool { return n == "old" }
	for _, tc := range []struct {
		name    string
		repo    string
		run     Run
		changed bool
		want    Outcome
	}{
		{"a new run replaces the last", "kept", Run{At: t0.Add(time.Hour), Outcome: Blocked}, true, Blocked},
		{"a run that ended earlier does not", "kept", Run{At: t0, Outcome: Pruned}, false, Blocked},
		{"a first run", "new", Run{At: t0, Outcome: DryRun}, true, DryRun},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := l.Record(tc.repo, tc.run, gone); got != tc.changed {
				t.Errorf("changed %v, want %v", got, tc.changed)
			}
			if l[tc.repo].Outcome != tc.want {
				t.Errorf("%s is %s, want %s", tc.repo, l[tc.repo].Outcome, tc.want)
			}
			if _, ok := l["old"]; ok {
				t.Error("a deleted BackupRepo stays in the record")
			}
		})
	}
}

func TestRoundTripAndBound(t *testing.T) {
	l := Ledger{}
	l.Record("repo", Run{At: time.Unix(1, 0).UTC(), Outcome: Blocked, Blockers: 2, Message: strings.Repeat("x", 4096)}, nil)
	b, err := l.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 1024 {
		t.Fatalf("one run takes %d bytes", len(b))
	}
	back, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if r := back["repo"]; r.Outcome != Blocked || r.Blockers != 2 || !r.At.Equal(time.Unix(1, 0)) || len(r.Message) != maxMessage {
		t.Fatalf("round trip %+v", r)
	}
	if _, err := Decode([]byte("{")); err == nil {
		t.Fatal("a truncated record decoded")
	}
	if empty, err := Decode(nil); err != nil || len(empty) != 0 {
		t.Fatalf("empty record: %v %v", empty, err)
	}
}
