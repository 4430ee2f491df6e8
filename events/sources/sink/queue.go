package sink

import (
	"context"
	"sync"

	"github.com/cloudevents/sdk-go/v2/event"
)

// QueueOptions tune a Queue.
type QueueOptions struct {
	// Depth is how many events may wait per sink (default 1024). A full
	// lane drops the newest event: the functions are level-triggered and
	// the next resync covers what was dropped.
	Depth int
	// Coalesce lists event types of which one waiting copy per sink is
	// enough (periodic resyncs): another is dropped while one still waits.
	Coalesce []string
	// CoalesceKey, when it returns a key for an event, coalesces events of
	// that key the same way.
	CoalesceKey func(event.Event) string
}

// Queue delivers to each sink from its own goroutine, in order per sink,
// so a receiver that is slow or down never delays the others: a function
// busy with a long resync must not starve another function of the events
// its timers depend on (a wedged mover is noticed on a resync).
type Queue struct {
	lanes    []*lane
	coalesce map[string]bool
	key      func(event.Event) string
	wg       sync.WaitGroup
}

// keyOf is the coalescing key of e ("": never coalesced).
func (q *Queue) keyOf(e event.Event) string {
	if q.coalesce[e.Type()] {
		return e.Type()
	}
	if q.key != nil {
		return q.key(e)
	}
	return ""
}

type lane struct {
	ch      chan event.Event
	mu      sync.Mutex
	waiting map[string]bool // coalescing keys queued and not yet sent
}

// Start runs a Queue until ctx ends; Wait returns once its lanes stopped.
func (s *Sinks) Start(ctx context.Context, o QueueOptions) *Queue {
	if o.Depth <= 0 {
		o.Depth = 1024
	}
	q := &Queue{coalesce: map[string]bool{}, key: o.CoalesceKey}
	for _, t := range o.Coalesce {
		q.coalesce[t] = true
	}
	for i := range s.clients {
		l := &lane{ch: make(chan event.Event, o.Depth), waiting: map[string]bool{}}
		q.lanes = append(q.lanes, l)
		q.wg.Add(1)
		go func() {
			defer q.wg.Done()
			for {
				select {
				case <-ctx.Done():
					return
				case e := <-l.ch:
					if k := q.keyOf(e); k != "" {
						l.mu.Lock()
						delete(l.waiting, k)
						l.mu.Unlock()
					}
					if err := s.deliver(ctx, i, e); err != nil && ctx.Err() == nil {
						s.log.Info("event not delivered", "sink", s.urls[i], "type", e.Type(), "id", e.ID(), "error", err.Error())
					}
				}
			}
		}()
	}
	return q
}

// Post queues e for every sink and returns at once; it reports how many
// sinks dropped it (full lane) and how many skipped it as a duplicate of a
// waiting coalesced event.
func (q *Queue) Post(e event.Event) (dropped, coalesced int) {
	k := q.keyOf(e)
	for _, l := range q.lanes {
		l.mu.Lock()
		if k != "" && l.waiting[k] {
			l.mu.Unlock()
			coalesced++
			continue
		}
		select {
		case l.ch <- e:
			if k != "" {
				l.waiting[k] = true
			}
		default:
			dropped++
		}
		l.mu.Unlock()
	}
	return dropped, coalesced
}

// Wait blocks until every lane stopped (after ctx ended).
func (q *Queue) Wait() { q.wg.Wait() }
