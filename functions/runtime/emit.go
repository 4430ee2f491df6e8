package runtime

import (
	"context"
	"fmt"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/protocol"
	"github.com/go-logr/logr"
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

// NewSinkEmitter builds an emitter for sink ("" logs only).
func NewSinkEmitter(sink string, log logr.Logger) (*SinkEmitter, error) {
	s := &SinkEmitter{URL: sink, Log: log}
	if sink == "" {
		return s, nil
	}
	c, err := cloudevents.NewClientHTTP(cloudevents.WithTarget(sink))
	if err != nil {
		return nil, fmt.Errorf("cloudevents client for %s: %w", sink, err)
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
	if res := s.c.Send(ctx, e); !protocol.IsACK(res) {
		return fmt.Errorf("send %s %s to %s: %w", e.Type(), e.ID(), s.URL, res)
	}
	return nil
}
