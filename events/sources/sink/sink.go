// Package sink delivers a source's CloudEvents to one or more URLs the way
// Knative's adapters do: each sink in turn, a few retries with backoff, and
// no retry of a 4xx (the receiver refused the event; resending cannot help).
package sink

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/protocol"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"github.com/go-logr/logr"
	"k8s.io/client-go/transport"
)

// BearerToken returns the client options that send the token in tokenFile
// with every request, re-read as the kubelet rotates it; none for "".
func BearerToken(tokenFile string) ([]cehttp.Option, error) {
	if tokenFile == "" {
		return nil, nil
	}
	rt, err := transport.NewBearerAuthWithRefreshRoundTripper("", tokenFile, http.DefaultTransport)
	if err != nil {
		return nil, fmt.Errorf("token file %s: %w", tokenFile, err)
	}
	return []cehttp.Option{cehttp.WithRoundTripper(rt)}, nil
}

// Sinks are the URLs a source posts to.
type Sinks struct {
	urls    []string
	clients []cloudevents.Client
	log     logr.Logger
}

// New prepares a client per URL. With a tokenFile, every request carries
// the token in it as a bearer token, re-read as the kubelet rotates it (a
// projected ServiceAccount token with the functions' audience).
func New(urls []string, log logr.Logger, tokenFile string) (*Sinks, error) {
	s := &Sinks{urls: urls, log: log}
	opts, err := BearerToken(tokenFile)
	if err != nil {
		return nil, err
	}
	for _, u := range urls {
		c, err := cloudevents.NewClientHTTP(append([]cehttp.Option{cloudevents.WithTarget(u)}, opts...)...)
		if err != nil {
			return nil, fmt.Errorf("client for %s: %w", u, err)
		}
		s.clients = append(s.clients, c)
	}
	return s, nil
}

// Send posts e to every sink in turn and reports the sinks that never
// accepted it. A source that must answer its own sender with the outcome
// (the S3 source) uses Send; a source that only fans out uses a Queue.
func (s *Sinks) Send(ctx context.Context, e event.Event) error {
	var errs []error
	for i := range s.clients {
		if err := s.deliver(ctx, i, e); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// deliver posts e to sink i, retrying what a retry can fix.
func (s *Sinks) deliver(ctx context.Context, i int, e event.Event) error {
	delay := 50 * time.Millisecond
	var last protocol.Result
	for attempt := 0; attempt < 6; attempt++ {
		last = s.clients[i].Send(ctx, e)
		if protocol.IsACK(last) {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s.log.V(1).Info("delivery failed", "sink", s.urls[i], "type", e.Type(), "id", e.ID(), "attempt", attempt+1, "result", fmt.Sprint(last))
		if refused(last) {
			break
		}
		if !sleep(ctx, delay) {
			return ctx.Err()
		}
		delay *= 2
	}
	return fmt.Errorf("%s: %w", s.urls[i], last)
}

// Refused reports whether every failure in an error of Send is a sink's
// 4xx refusal: the receiver saw the event and said no, so a sender that
// retries on error would only be refused again.
func Refused(err error) bool {
	if err == nil {
		return false
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			if !Refused(e) {
				return false
			}
		}
		return true
	}
	return refused(err)
}

func refused(res protocol.Result) bool {
	var hr *cehttp.Result
	if errors.As(res, &hr) {
		return final(hr.StatusCode)
	}
	return false
}

// final says whether an HTTP status refuses an event for good: a 4xx,
// except 429 (the receiver is shedding load, say because someone floods it
// with made-up tokens) and 408, which a later try can get past.
func final(code int) bool {
	return code >= 400 && code < 500 && code != http.StatusTooManyRequests && code != http.StatusRequestTimeout
}

// Final is final for the functions' own emitter.
func Final(code int) bool { return final(code) }

// sleep waits d or until ctx ends, and reports whether the wait ran out
// (a shutdown must not sit out a backoff).
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
