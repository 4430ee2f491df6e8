package schedule

import (
	"strings"
	"testing"
	"time"
)

func TestJitter(t *testing.T) {
	slot := time.Date(2026, 1, 1, 2, 0, 0, 0, time.UTC)
	a := Jitter("uid-1", slot, 30*time.Minute)
	if a != Jitter("uid-1", slot, 30*time.Minute) {
		t.Fatal("jitter must be deterministic")
	}
	if a < 0 || a >= 30*time.Minute || a%time.Second != 0 {
		t.Fatalf("jitter %s outside [0, 30m) or not whole seconds", a)
	}
	distinct := map[time.Duration]bool{}
	for i := 0; i < 20; i++ {
		distinct[Jitter("uid-1", slot.Add(time.Duration(i)*24*time.Hour), 30*time.Minute)] = true
	}
	if len(distinct) < 10 {
		t.Fatalf("jitter hardly varies across slots: %d distinct of 20", len(distinct))
	}
	if Jitter("uid-1", slot, 0) != 0 {
		t.Fatal("no window, no jitter")
	}
}

func TestNext(t *testing.T) {
	berlin, _ := time.LoadLocation("Europe/Berlin")
	from := time.Date(2026, 3, 28, 12, 0, 0, 0, time.UTC)
	got, err := Next(Spec{Cron: "0 2 * * *", Location: berlin, Jitter: 10 * time.Minute, UID: "u"}, from, 3)
	if err != nil {
		t.Fatal(err)
	}
	// 2026-03-29 02:00 does not exist in Berlin (DST starts), so that day is skipped.
	want := []string{"2026-03-30T00:00:00Z", "2026-03-31T00:00:00Z", "2026-04-01T00:00:00Z"}
	for i, f := range got {
		if s := f.Slot.UTC().Format(time.RFC3339); s != want[i] {
			t.Fatalf("slot %d = %s, want %s", i, s, want[i])
		}
		if d := f.At.Sub(f.Slot); d < 0 || d >= 10*time.Minute {
			t.Fatalf("firing %s is %s after its slot", f.At, d)
		}
		if f.Slot.In(berlin).Hour() != 2 {
			t.Fatalf("slot %s is not 02:00 in Berlin", f.Slot.In(berlin))
		}
	}
	if _, err := Next(Spec{Cron: "0 0 31 2 *"}, from, 1); err == nil {
		t.Fatal("a cron that never fires should be an error")
	}
}

func TestInherit(t *testing.T) {
	tz, j, notes := Inherit("", "", []Defaults{{"Europe/Berlin", "10m"}, {"Europe/Berlin", "10m"}})
	if tz != "Europe/Berlin" || j != "10m" || len(notes.All()) != 0 {
		t.Fatalf("agreeing defaults: %s %s %v", tz, j, notes)
	}
	// A jitter disagreement is the jitter's note, never the timezone's.
	tz, j, notes = Inherit("America/Chicago", "", []Defaults{{"Europe/Berlin", "10m"}, {"UTC", "5m"}})
	if tz != "America/Chicago" || j != "" || notes.Timezone != "" || !strings.Contains(notes.Jitter, "scheduleDefaults.jitter") {
		t.Fatalf("own timezone, disagreeing jitter: %s %q %+v", tz, j, notes)
	}
	tz, _, notes = Inherit("", "5m", []Defaults{{"Europe/Berlin", "10m"}, {"UTC", "10m"}})
	if tz != "UTC" || notes.Jitter != "" || !strings.Contains(notes.Timezone, "scheduleDefaults.timezone") {
		t.Fatalf("disagreeing timezones, own jitter: %s %+v", tz, notes)
	}
	if tz, j, _ := Inherit("", "", nil); tz != "UTC" || j != "" {
		t.Fatalf("no defaults: %s %q", tz, j)
	}
}

func TestStale(t *testing.T) {
	daily := Spec{Cron: "0 3 * * *", Location: time.UTC}
	success := time.Date(2026, 12, 1, 3, 10, 0, 0, time.UTC)
	cases := []struct {
		name  string
		spec  Spec
		now   time.Time
		stale bool
		due   time.Time
	}{
		{"the next slot is still running", daily, time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC), false, time.Date(2026, 12, 3, 3, 0, 0, 0, time.UTC)},
		{"a whole period missed: stale from the second slot on", daily, time.Date(2026, 12, 3, 3, 0, 0, 0, time.UTC), true, time.Date(2026, 12, 3, 3, 0, 0, 0, time.UTC)},
		{"long overdue", daily, time.Date(2026, 12, 20, 0, 0, 0, 0, time.UTC), true, time.Date(2026, 12, 3, 3, 0, 0, 0, time.UTC)},
		{"hourly: two hours", Spec{Cron: "0 * * * *", Location: time.UTC}, time.Date(2026, 12, 1, 5, 0, 0, 0, time.UTC), true, time.Date(2026, 12, 1, 5, 0, 0, 0, time.UTC)},
		{"a cron that fires once more only is never stale", Spec{Cron: "0 3 2 12 * 2026", Location: time.UTC}, time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), false, time.Time{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stale, due, err := Stale(c.spec, success, c.now)
			if err != nil && !strings.Contains(c.name, "once more") {
				t.Fatal(err)
			}
			if stale != c.stale || !due.Equal(c.due) {
				t.Fatalf("stale %v due %v; want %v %v", stale, due, c.stale, c.due)
			}
		})
	}
}
