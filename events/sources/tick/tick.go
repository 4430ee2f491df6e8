// Package tick is a PingSource for clusters without Knative: on a cron
// schedule it posts the same `dev.knative.sources.ping` event a PingSource
// posts. The event id is the slot's time, so two tick sources (or a
// restarted one) firing the same slot send recognisably the same event,
// and the functions' idempotency does the rest.
package tick

import (
	"context"
	"fmt"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/go-logr/logr"

	"github.com/snapflow/snapflow/events"
	"github.com/snapflow/snapflow/internal/cron"
)

// Options configure the source.
type Options struct {
	// Schedule is a 5-field cron (PingSource's); every minute when empty.
	Schedule string
	// Location evaluates the cron; UTC when nil.
	Location *time.Location
	// Source is the events' source attribute.
	Source string
	// Data is sent as the event's JSON payload when set (PingSource's data).
	Data string
	Log  logr.Logger
	// Now and Sleep are the clock; tests replace them.
	Now   func() time.Time
	Sleep func(context.Context, time.Duration) error
}

// Sender is where ticks go (sink.Sinks in production).
type Sender interface {
	Send(context.Context, event.Event) error
}

// Event is the tick for one slot.
func Event(source string, slot time.Time, data string) (event.Event, error) {
	e := cloudevents.NewEvent()
	e.SetID("tick-" + slot.UTC().Format(time.RFC3339))
	e.SetType(events.Ping)
	e.SetSource(source)
	e.SetTime(slot)
	if data != "" {
		if err := e.SetData(cloudevents.ApplicationJSON, []byte(data)); err != nil {
			return e, err
		}
	}
	return e, nil
}

// Run sends a tick at every slot of the schedule until ctx ends. A failed
// delivery is logged, not retried into the next slot: the next tick (and
// the functions' resync) covers it.
func Run(ctx context.Context, o Options, to Sender) error {
	if o.Schedule == "" {
		o.Schedule = "* * * * *"
	}
	if o.Location == nil {
		o.Location = time.UTC
	}
	if o.Source == "" {
		o.Source = "snapflow.dev/sources/tick"
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Sleep == nil {
		o.Sleep = sleep
	}
	sched, err := cron.Parse(o.Schedule, o.Source)
	if err != nil {
		return fmt.Errorf("--schedule %q: %w", o.Schedule, err)
	}
	for {
		next := sched.Next(o.Now(), o.Location)
		if next.IsZero() {
			return fmt.Errorf("--schedule %q never fires", o.Schedule)
		}
		if err := o.Sleep(ctx, next.Sub(o.Now())); err != nil {
			return nil // stopped
		}
		e, err := Event(o.Source, next, o.Data)
		if err != nil {
			return err
		}
		if err := to.Send(ctx, e); err != nil {
			o.Log.Error(err, "tick not delivered", "slot", next)
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
