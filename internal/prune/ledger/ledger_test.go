package ledger

import (
	"strings"
	"testing"
	"time"
)

func TestRecord(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)
	l := Ledger{}
	l.Record(Run{Repo: "old", Kind: KindPlan, At: t0, Outcome: Blocked}, nil)
	l.Record(Run{Repo: "kept", Kind: KindPrune, At: t0, Outcome: Pruned}, nil)
	gone := func(n string) bool { return n == "old" }
	for _, tc := range []struct {
		name    string
		run     Run
		changed bool
		want    Outcome
	}{
		{"a new run replaces the last", Run{Repo: "kept", Kind: KindPrune, At: t0.Add(time.Hour), Outcome: Blocked}, true, Blocked},
		{"a run that ended earlier does not", Run{Repo: "kept", Kind: KindPrune, At: t0, Outcome: Pruned}, false, Blocked},
		{"a failure leaves Blocked standing", Run{Repo: "kept", Kind: KindPrune, At: t0.Add(2 * time.Hour), Outcome: Failed}, false, Blocked},
		{"a clean plan is recorded apart from the prune the guards refused", Run{Repo: "kept", Kind: KindPlan, At: t0.Add(3 * time.Hour), Outcome: Planned}, true, Blocked},
		{"a clean dry run clears it", Run{Repo: "kept", Kind: KindPrune, At: t0.Add(4 * time.Hour), Outcome: DryRun}, true, DryRun},
		{"a first run", Run{Repo: "new", Kind: KindPlan, At: t0, Outcome: Planned}, true, Planned},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := l.Record(tc.run, gone); got != tc.changed {
				t.Errorf("changed %v, want %v", got, tc.changed)
			}
			if got := l[key(tc.run.Repo, KindPrune)].Outcome; tc.run.Repo == "kept" && got != tc.want {
				t.Errorf("kept's prune is %s, want %s", got, tc.want)
			}
			if _, ok := l[key("old", KindPlan)]; ok {
				t.Error("a deleted BackupRepo stays in the record")
			}
		})
	}
}

func TestRoundTripAndBound(t *testing.T) {
	l := Ledger{}
	l.Record(Run{Repo: "repo", Kind: KindPlan, At: time.Unix(1, 0).UTC(), Outcome: Blocked, Blockers: 2, Message: strings.Repeat("x", 4096)}, nil)
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
	if r := back[key("repo", KindPlan)]; r.Outcome != Blocked || r.Blockers != 2 || !r.At.Equal(time.Unix(1, 0)) || len(r.Message) != maxMessage {
		t.Fatalf("round trip %+v", r)
	}
	if _, err := Decode([]byte("{")); err == nil {
		t.Fatal("a truncated record decoded")
	}
	if empty, err := Decode(nil); err != nil || len(empty) != 0 {
		t.Fatalf("empty record: %v %v", empty, err)
	}
}
