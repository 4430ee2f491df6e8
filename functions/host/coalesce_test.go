package host

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/snapflow/snapflow/events"
)

// waitFor polls cond; the deadline only bounds a broken test.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// A burst of sweeps while one runs costs one more sweep, not one each;
// the joiners answer with the queued sweep's result, which started after
// they arrived; sweeps never overlap; once idle, the next sweep runs.
func TestSweepsCoalesce(t *testing.T) {
	var s sweeps
	var calls, inside, overlap atomic.Int32
	release := make(chan struct{})
	errSecond := errors.New("second sweep failed")
	fn := func(context.Context) error {
		n := calls.Add(1)
		if inside.Add(1) > 1 {
			overlap.Add(1)
		}
		defer inside.Add(-1)
		if n == 1 {
			<-release
			return nil
		}
		if n == 2 {
			return errSecond
		}
		return nil
	}
	ctx := context.Background()
	type result struct {
		err    error
		joined bool
	}
	first := make(chan result, 1)
	go func() { j, err := s.do(ctx, fn); first <- result{err, j} }()
	waitFor(t, "the first sweep to run", func() bool { return calls.Load() == 1 })

	queued := make(chan result, 1)
	go func() { j, err := s.do(ctx, fn); queued <- result{err, j} }()
	waitFor(t, "a sweep to queue", func() bool { _, q, _ := s.state(); return q })

	const joiners = 4
	var wg sync.WaitGroup
	joined := make(chan result, joiners)
	for i := 0; i < joiners; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); j, err := s.do(ctx, fn); joined <- result{err, j} }()
	}
	waitFor(t, "the joiners", func() bool { _, _, n := s.state(); return n == joiners })
	if calls.Load() != 1 {
		t.Fatalf("%d sweeps ran while the first was still running, want 1", calls.Load())
	}
	close(release)
	if r := <-first; r.err != nil || r.joined {
		t.Errorf("first sweep: %+v, want it run and nil", r)
	}
	if r := <-queued; !errors.Is(r.err, errSecond) || r.joined {
		t.Errorf("queued sweep: %+v, want it run with its own error", r)
	}
	wg.Wait()
	close(joined)
	for r := range joined {
		if !errors.Is(r.err, errSecond) || !r.joined {
			t.Errorf("joiner: %+v, want the queued sweep's error, joined", r)
		}
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("%d sweeps for %d requests during one, want 2", n, 2+joiners)
	}
	if overlap.Load() != 0 {
		t.Error("two sweeps ran at once")
	}
	if running, q, _ := s.state(); running || q {
		t.Errorf("idle coalescer reports running=%v queued=%v", running, q)
	}
	if j, err := s.do(ctx, fn); err != nil || j || calls.Load() != 3 {
		t.Errorf("a sweep after idle: err %v joined %v calls %d, want a fresh run", err, j, calls.Load())
	}
}

// A joiner whose sender gives up stops waiting; the sweep it joined goes on.
func TestSweepJoinerHonoursItsContext(t *testing.T) {
	var s sweeps
	release := make(chan struct{})
	var calls atomic.Int32
	fn := func(context.Context) error { calls.Add(1); <-release; return nil }
	go s.do(context.Background(), fn)
	waitFor(t, "the first sweep", func() bool { return calls.Load() == 1 })
	done := make(chan struct{})
	go func() { s.do(context.Background(), fn); close(done) }()
	waitFor(t, "a queued sweep", func() bool { _, q, _ := s.state(); return q })
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan error, 1)
	go func() { _, err := s.do(ctx, fn); got <- err }()
	waitFor(t, "the joiner", func() bool { _, _, n := s.state(); return n == 1 })
	cancel()
	if err := <-got; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled joiner returned %v", err)
	}
	close(release)
	<-done
	if calls.Load() != 2 {
		t.Errorf("%d sweeps, want the first and the queued one", calls.Load())
	}
}

// Over HTTP: resyncs that arrive while a resync runs and another waits are
// answered 2xx without running the handler, and counted as coalesced. A
// ping is a lighter sweep (it may read the watch cache), so it never joins
// a resync, and other events are never coalesced.
func TestServeCoalescesSweepEvents(t *testing.T) {
	reg := prometheus.NewRegistry()
	release := make(chan struct{})
	var resyncs, pings, requests atomic.Int32
	handle := func(_ context.Context, e event.Event) error {
		switch e.Type() {
		case events.Resync:
			if resyncs.Add(1) == 1 {
				<-release
			}
		case events.Ping:
			pings.Add(1)
		default:
			requests.Add(1)
		}
		return nil
	}
	sw := map[string]*sweeps{}
	url := serveWith(t, Options{Registry: reg, sweeps: sw, Functions: []Function{{Name: "f", Handle: handle}}})
	s := sw["f "+events.Resync]
	codes := make(chan int, 8)
	send := func(typ string) { codes <- post(t, url, typ, strings.NewReader(`{}`), 2) }
	go send(events.Resync)
	waitFor(t, "the first resync to run", func() bool { return resyncs.Load() == 1 })
	go send(events.Resync)
	waitFor(t, "a queued resync", func() bool { _, q, _ := s.state(); return q })
	for i := 0; i < 3; i++ {
		go send(events.Resync)
	}
	waitFor(t, "three joiners", func() bool { _, _, n := s.state(); return n == 3 })
	// Neither a ping nor a request waits for the blocked resync.
	for _, typ := range []string{events.Ping, events.SnapshotRequested} {
		if code := post(t, url, typ, strings.NewReader(`{}`), 2); code/100 != 2 {
			t.Fatalf("%s during a resync: status %d", typ, code)
		}
	}
	if pings.Load() != 1 || requests.Load() != 1 {
		t.Fatalf("during a resync: %d pings and %d requests handled, want 1 each", pings.Load(), requests.Load())
	}
	close(release)
	for i := 0; i < 5; i++ {
		if code := <-codes; code/100 != 2 {
			t.Errorf("a resync answered %d", code)
		}
	}
	if n := resyncs.Load(); n != 2 {
		t.Errorf("%d resync sweeps ran for 5 resync events, want 2", n)
	}
	if got := counter(t, reg, "coalesced"); got != 3 {
		t.Errorf("coalesced counter %v, want 3", got)
	}
}

// The queued sweep serves its joiners even when its own sender hangs up
// while it waits: one sender cannot fail it for the rest.
func TestQueuedSweepOutlivesItsSender(t *testing.T) {
	var s sweeps
	release := make(chan struct{})
	var calls atomic.Int32
	var sawCancel atomic.Bool
	fn := func(ctx context.Context) error {
		if calls.Add(1) == 1 {
			<-release
			return nil
		}
		if ctx.Err() != nil {
			sawCancel.Store(true)
			return ctx.Err()
		}
		return nil
	}
	go s.do(context.Background(), fn)
	waitFor(t, "the first sweep", func() bool { return calls.Load() == 1 })
	ctx, cancel := context.WithCancel(context.Background())
	queued := make(chan error, 1)
	go func() { _, err := s.do(ctx, fn); queued <- err }()
	waitFor(t, "a queued sweep", func() bool { _, q, _ := s.state(); return q })
	joined := make(chan error, 1)
	go func() { _, err := s.do(context.Background(), fn); joined <- err }()
	waitFor(t, "the joiner", func() bool { _, _, n := s.state(); return n == 1 })
	cancel()
	close(release)
	if err := <-joined; err != nil {
		t.Errorf("the joiner got %v after the queued sweep's sender left, want the sweep's result", err)
	}
	<-queued
	if sawCancel.Load() {
		t.Error("the queued sweep ran on its sender's cancelled context")
	}
}

// counter sums snapflow_function_events_total for one result.
func counter(t *testing.T, reg *prometheus.Registry, result string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != "snapflow_function_events_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label(m, "result") == result {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
