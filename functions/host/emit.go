package host

import (
	"context"
	"errors"
	"fmt"
	"sync"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/protocol"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"github.com/go-logr/logr"

	"github.com/snapflow/snapflow/events/sources/sink"
)

// Emitter sends the events functions produce.
type Emitter interface {
	Emit(ctx context.Context, e event.Event) error
}

// SinkEmitter sends to a URL (K_SINK); with no URL it only logs, so a
// function runs the same with or without a broker.
type SinkEmitter struct {
	URL string
	Log logr.Logger
	c   cloudevents.Client
}

// NewSinkEmitter builds an emitter for sink ("" logs only). With a
// tokenFile every event carries its token (re-read as it rotates), so a
// sink that checks senders, such as another function, admits it.
func NewSinkEmitter(sinkURL string, log logr.Logger, tokenFile string) (*SinkEmitter, error) {
	s := &SinkEmitter{URL: sinkURL, Log: log}
	if sinkURL == "" {
		return s, nil
	}
	bearer, err := sink.BearerToken(tokenFile)
	if err != nil {
		return nil, err
	}
	c, err := cloudevents.NewClientHTTP(append([]cehttp.Option{cloudevents.WithTarget(sinkURL)}, bearer...)...)
	if err != nil {
		return nil, fmt.Errorf("cloudevents client for %s: %w", sinkURL, err)
	}
	s.c = c
	return s, nil
}

// Emit sends e, or logs it when there is no sink.
func (s *SinkEmitter) Emit(ctx context.Context, e event.Event) error {
	if s.c == nil {
		s.Log.Info("event (no K_SINK set)", "type", e.Type(), "id", e.ID(), "subject", e.Subject())
		return nil
	}
	res := s.c.Send(ctx, e)
	if protocol.IsACK(res) {
		return nil
	}
	var hr *cehttp.Result
	if errors.As(res, &hr) && sink.Final(hr.StatusCode) {
		// The sink refused the event for good; resending cannot help.
		s.Log.Info("sink refused the event", "type", e.Type(), "id", e.ID(), "status", hr.StatusCode, "reason", fmt.Sprint(res))
		return nil
	}
	return fmt.Errorf("send %s %s to %s: %w", e.Type(), e.ID(), s.URL, res)
}

// Fanout sends every event to each emitter, as a broker with one trigger
// per subscriber would; `snapflow dev` and the tests use it to route the
// functions' events to each other without Knative.
type Fanout []Emitter

// Emit sends e to all, reporting every failure.
func (f Fanout) Emit(ctx context.Context, e event.Event) error {
	var errs []error
	for _, em := range f {
		if err := em.Emit(ctx, e); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// LateSink posts to a URL that is known only after start-up (the address
// the functions listen on); until Set it drops events, which the periodic
// resync makes up for.
type LateSink struct {
	// TokenFile, when set before Set, is sent as the bearer token.
	TokenFile string
	mu        sync.Mutex
	e         *SinkEmitter
}

// Set points the sink at url.
func (l *LateSink) Set(url string) error {
	e, err := NewSinkEmitter(url, logr.Discard(), l.TokenFile)
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.e = e
	l.mu.Unlock()
	return nil
}

// Emit sends e once Set was called.
func (l *LateSink) Emit(ctx context.Context, e event.Event) error {
	l.mu.Lock()
	em := l.e
	l.mu.Unlock()
	if em == nil {
		return nil
	}
	return em.Emit(ctx, e)
}

// Trigger passes on only the event types it names, like a Knative Trigger
// filtering on type.
type Trigger struct {
	Types   []string
	Emitter Emitter
}

// Emit sends e when its type matches.
func (t Trigger) Emit(ctx context.Context, e event.Event) error {
	for _, typ := range t.Types {
		if e.Type() == typ {
			return t.Emitter.Emit(ctx, e)
		}
	}
	return nil
}
