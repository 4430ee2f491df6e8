package host

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/snapflow/snapflow/events"
)

// sweeps coalesces a function's full sweeps of one event type (resync, or
// ping: a ping sweep may read the watch cache and skip quiet objects, so
// it never stands in for a resync): at
// most one runs, at most one waits behind it, and every sweep request that
// arrives while one waits joins it and answers with its result. That is
// safe because the waiting sweep starts after the joiner arrived, so it
// sees everything the joiner's sweep would have seen; it keeps a burst of
// resyncs (a restarted source, a retrying Broker, a noisy sender) from
// stacking up full listings of the cluster.
type sweeps struct {
	mu   sync.Mutex
	cur  *sweep // running, or nil
	next *sweep // queued behind cur, or nil
}

var errSweepAborted = errors.New("the sweep this event joined ended without a result; the sender should retry")

type sweep struct {
	done    chan struct{}
	err     error
	joiners int
}

// isSweep reports whether an event type asks a function for a full sweep.
func isSweep(eventType string) bool {
	return eventType == events.Resync || eventType == events.Ping
}

// sweepTimeout bounds a sweep, which runs on past its own sender's
// disconnect for the senders that joined it; it matches the server's
// write timeout.
const sweepTimeout = 10 * time.Minute

// do runs fn as a sweep, or joins the one queued. joined tells which.
func (s *sweeps) do(ctx context.Context, fn func(context.Context) error) (joined bool, err error) {
	s.mu.Lock()
	if s.cur == nil {
		r := &sweep{done: make(chan struct{})}
		s.cur = r
		s.mu.Unlock()
		return false, s.run(ctx, r, fn)
	}
	if r := s.next; r != nil {
		r.joiners++
		s.mu.Unlock()
		select {
		case <-r.done:
			return true, r.err
		case <-ctx.Done():
			return true, ctx.Err()
		}
	}
	r := &sweep{done: make(chan struct{})}
	s.next = r
	prev := s.cur
	s.mu.Unlock()
	// The running sweep hands over to r as it ends (run), so nothing can
	// start between the two.
	<-prev.done
	return false, s.run(ctx, r, fn)
}

func (s *sweeps) run(ctx context.Context, r *sweep, fn func(context.Context) error) error {
	// Joiners wait on this sweep too: one sender hanging up must not fail
	// it for all of them.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sweepTimeout)
	defer cancel()
	defer func() {
		s.mu.Lock()
		s.cur, s.next = s.next, nil
		s.mu.Unlock()
		close(r.done)
	}()
	// A panic must not answer the joiners with success.
	r.err = errSweepAborted
	r.err = fn(ctx)
	return r.err
}

// state reports what runs and waits, for tests and logs.
func (s *sweeps) state() (running, queued bool, joiners int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.next != nil {
		joiners = s.next.joiners
	}
	return s.cur != nil, s.next != nil, joiners
}
