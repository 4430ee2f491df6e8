package coverage

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func TestTrack(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	grace := time.Hour
	un := func(pvc string) Verdict {
		return Verdict{Namespace: "apps", PVC: pvc, UID: types.UID("uid-" + pvc), State: Unprotected, Reason: "no SnapshotPolicy covers it"}
	}
	ok := func(pvc string, s State) Verdict {
		return Verdict{Namespace: "apps", PVC: pvc, UID: types.UID("uid-" + pvc), State: s}
	}
	names := func(spells []Spell) []string {
		var out []string
		for _, s := range spells {
			out = append(out, s.PVC)
		}
		return out
	}
	announce := func(tr Tracked, due []Spell) Tracked {
		for _, sp := range due {
			sp.Announced = true
			tr.Spells[sp.UID] = sp
		}
		return tr
	}

	// First seen: remembered, not told yet.
	tr, due := Track(Tracked{}, []Verdict{un("a"), ok("b", Protected), ok("c", Excluded)}, t0, grace)
	if len(due) != 0 || len(tr.Spells) != 1 || !tr.Spells["uid-a"].Since.Equal(t0) || !tr.LastPass.Equal(t0) {
		t.Fatalf("first pass: due %v, tracked %+v", names(due), tr)
	}
	// Within grace: still quiet; a second PVC turns Unprotected.
	tr, due = Track(tr, []Verdict{un("a"), un("b")}, t0.Add(30*time.Minute), grace)
	if len(due) != 0 || len(tr.Spells) != 2 {
		t.Fatalf("within grace: due %v, tracked %+v", names(due), tr)
	}
	// After grace: a is told, b (30 minutes younger) not yet.
	tr, due = Track(tr, []Verdict{un("a"), un("b")}, t0.Add(time.Hour), grace)
	if fmt.Sprint(names(due)) != "[a]" {
		t.Fatalf("after grace: due %v", names(due))
	}
	tr = announce(tr, due)
	// Told once: a is not due again; b is, once its own grace has passed.
	tr, due = Track(tr, []Verdict{un("a"), un("b")}, t0.Add(2*time.Hour), grace)
	if fmt.Sprint(names(due)) != "[b]" {
		t.Fatalf("second spell pass: due %v", names(due))
	}
	tr = announce(tr, due)
	// a is protected now: its spell closes. b's PVC is gone.
	tr, due = Track(tr, []Verdict{ok("a", Protected)}, t0.Add(3*time.Hour), grace)
	if len(due) != 0 || len(tr.Spells) != 0 {
		t.Fatalf("closed spells: due %v, tracked %+v", names(due), tr)
	}
	// a turns Unprotected again: a new spell, told after its own grace.
	tr, _ = Track(tr, []Verdict{un("a")}, t0.Add(4*time.Hour), grace)
	tr, due = Track(tr, []Verdict{un("a")}, t0.Add(5*time.Hour), grace)
	if fmt.Sprint(names(due)) != "[a]" || !due[0].Since.Equal(t0.Add(4*time.Hour)) {
		t.Fatalf("a new spell: due %+v", due)
	}
	// A PVC recreated under the same name is another PVC (another UID).
	re := un("a")
	re.UID = "uid-a2"
	tr, due = Track(tr, []Verdict{re}, t0.Add(6*time.Hour), grace)
	if len(due) != 0 || len(tr.Spells) != 1 || !tr.Spells["uid-a2"].Since.Equal(t0.Add(6*time.Hour)) {
		t.Fatalf("recreated PVC: due %v, tracked %+v", names(due), tr)
	}
}

// The record stays under its byte budget however long the names, and new
// spells take the room in turn by namespace.
func TestTrackIsBounded(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	long := strings.Repeat("x", 200)
	var vs []Verdict
	for i := range 5000 {
		vs = append(vs, Verdict{Namespace: "flood", PVC: fmt.Sprintf("%s-%05d", long, i), UID: types.UID(fmt.Sprintf("f%05d", i)), State: Unprotected})
	}
	vs = append(vs, Verdict{Namespace: "zeta", PVC: "one", UID: "z1", State: Unprotected})
	tr, _ := Track(Tracked{}, vs, t0, time.Hour)
	b, err := tr.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > MaxRecordBytes || len(tr.Spells) >= 5001 {
		t.Fatalf("record of %d bytes, %d spells: over the %d-byte budget", len(b), len(tr.Spells), MaxRecordBytes)
	}
	if _, ok := tr.Spells["z1"]; !ok {
		t.Fatal("a flooded namespace crowded out another namespace's first PVC")
	}
	// The same spells are remembered from pass to pass, and the
	// budget still holds.
	tr2, due := Track(tr, vs, t0.Add(2*time.Hour), time.Hour)
	for uid, sp := range tr.Spells {
		if !tr2.Spells[uid].Since.Equal(sp.Since) {
			t.Fatalf("%s lost its spell between passes", uid)
		}
	}
	if len(due) != MaxToldPerPass {
		t.Fatalf("%d spells due in one pass, want the cap %d", len(due), MaxToldPerPass)
	}
}

func TestRecordRoundTrip(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	in := Tracked{LastPass: t0, Spells: map[types.UID]Spell{
		"u1": {Namespace: "apps", PVC: "a", UID: "u1", Since: t0.Add(-time.Hour), Announced: true},
		"u2": {Namespace: "web", PVC: "b", UID: "u2", Since: t0},
	}}
	b, err := in.Encode()
	if err != nil {
		t.Fatal(err)
	}
	out, err := DecodeTracked(b)
	if err != nil {
		t.Fatal(err)
	}
	if !out.LastPass.Equal(in.LastPass) || len(out.Spells) != 2 || out.Spells["u1"] != in.Spells["u1"] || out.Spells["u2"] != in.Spells["u2"] {
		t.Fatalf("round trip: %+v, want %+v\n%s", out, in, b)
	}
	for _, bad := range []string{`{`, `{"spells":[["u1","apps"]]}`, `{"spells":[["u1","apps","a","x",0]]}`} {
		if _, err := DecodeTracked([]byte(bad)); err == nil {
			t.Errorf("%s decoded", bad)
		}
	}
}

func TestDue(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		last, now time.Time
		want      bool
	}{
		{time.Time{}, t0, true},
		{t0, t0.Add(4 * time.Minute), false},
		{t0, t0.Add(5 * time.Minute), true},
		{t0, t0.Add(-time.Minute), true}, // a clock that went back
	} {
		if got := (Tracked{LastPass: c.last}).Due(c.now, 5*time.Minute); got != c.want {
			t.Errorf("last %v now %v: %v, want %v", c.last, c.now, got, c.want)
		}
	}
}
