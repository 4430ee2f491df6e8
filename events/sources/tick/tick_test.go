package tick

import (
	"context"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/go-logr/logr"

	"github.com/snapflow/snapflow/events"
)

type recorder struct{ got []event.Event }

func (r *recorder) Send(_ context.Context, e event.Event) error {
	r.got = append(r.got, e)
	return nil
}

func TestRunSendsOneTickPerSlot(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 30, 0, time.UTC)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec := &recorder{}
	o := Options{
		Schedule: "*/15 * * * *", Log: logr.Discard(), Data: `{"why":"test"}`,
		Now: func() time.Time { return now },
		Sleep: func(_ context.Context, d time.Duration) error {
			now = now.Add(d)
			if len(rec.got) == 3 {
				cancel()
				return context.Canceled
			}
			return nil
		},
	}
	if err := Run(ctx, o, rec); err != nil {
		t.Fatal(err)
	}
	want := []string{"2026-05-01T12:15:00Z", "2026-05-01T12:30:00Z", "2026-05-01T12:45:00Z"}
	if len(rec.got) != len(want) {
		t.Fatalf("%d ticks, want %d", len(rec.got), len(want))
	}
	for i, e := range rec.got {
		if e.Type() != events.Ping || e.ID() != "tick-"+want[i] || e.Time().UTC().Format(time.RFC3339) != want[i] || string(e.Data()) != `{"why":"test"}` {
			t.Errorf("tick %d: type %s id %s time %s data %s", i, e.Type(), e.ID(), e.Time(), e.Data())
		}
	}
}

func TestEventIDIsTheSlot(t *testing.T) {
	slot := time.Date(2026, 5, 1, 12, 15, 0, 0, time.UTC)
	a, _ := Event("a", slot, "")
	b, _ := Event("b", slot, "")
	if a.ID() != b.ID() {
		t.Fatalf("two sources firing one slot must send the same id: %s vs %s", a.ID(), b.ID())
	}
}

func TestBadScheduleIsRefused(t *testing.T) {
	if err := Run(context.Background(), Options{Schedule: "every minute", Log: logr.Discard()}, &recorder{}); err == nil {
		t.Fatal("a malformed cron must be refused")
	}
}
