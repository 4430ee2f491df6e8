package sink

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/go-logr/logr"
)

func TestSendRetriesServerErrorsButNotRefusals(t *testing.T) {
	tests := []struct {
		name     string
		codes    []int // answered in turn, the last one repeated
		wantErr  bool
		attempts int32
	}{
		{"accepted", []int{http.StatusAccepted}, false, 1},
		{"refused is not retried", []int{http.StatusBadRequest}, true, 1},
		{"server error then accepted", []int{http.StatusInternalServerError, http.StatusInternalServerError, http.StatusOK}, false, 3},
		{"server error throughout", []int{http.StatusServiceUnavailable}, true, 6},
		// A receiver shedding load (a flood of made-up tokens) is retried.
		{"too many requests then accepted", []int{http.StatusTooManyRequests, http.StatusAccepted}, false, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var n atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				i := int(n.Add(1)) - 1
				if i >= len(tt.codes) {
					i = len(tt.codes) - 1
				}
				w.WriteHeader(tt.codes[i])
			}))
			defer srv.Close()
			s, err := New([]string{srv.URL}, logr.Discard(), "")
			if err != nil {
				t.Fatal(err)
			}
			e := cloudevents.NewEvent()
			e.SetID("1")
			e.SetType("t")
			e.SetSource("s")
			err = s.Send(context.Background(), e)
			if (err != nil) != tt.wantErr || n.Load() != tt.attempts {
				t.Fatalf("err = %v after %d attempts; want error %v after %d", err, n.Load(), tt.wantErr, tt.attempts)
			}
			// Only a refusal is final for a sender that retries on error.
			if want := tt.codes[len(tt.codes)-1] == http.StatusBadRequest; Refused(err) != want {
				t.Fatalf("Refused(%v) = %v, want %v", err, Refused(err), want)
			}
		})
	}
}

// A sink that hangs must not delay another sink's events, and resyncs
// waiting behind the hung delivery coalesce into one.
func TestQueueLanesAreIndependentAndResyncsCoalesce(t *testing.T) {
	release := make(chan struct{})
	var slowGot atomic.Int32
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		slowGot.Add(1)
		<-release
		w.WriteHeader(http.StatusAccepted)
	}))
	defer slow.Close()
	fastGot := make(chan string, 16)
	fast := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fastGot <- r.Header.Get("Ce-Id")
		w.WriteHeader(http.StatusAccepted)
	}))
	defer fast.Close()
	s, err := New([]string{slow.URL, fast.URL}, logr.Discard(), "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	q := s.Start(ctx, QueueOptions{Coalesce: []string{"resync"}, CoalesceKey: func(e cloudevents.Event) string {
		if e.Type() == "progress" {
			return "progress " + e.Subject()
		}
		return ""
	}})
	ev := func(id, typ string) cloudevents.Event {
		e := cloudevents.NewEvent()
		e.SetID(id)
		e.SetType(typ)
		e.SetSource("s")
		return e
	}
	want := func(id string) {
		t.Helper()
		if got := <-fastGot; got != id {
			t.Fatalf("fast sink got %q, want %q", got, id)
		}
	}
	q.Post(ev("first", "update"))
	want("first")
	// The fast lane can finish before the slow lane has even sent: wait
	// until the slow sink hangs on "first", or the rest proves nothing.
	for deadline := time.Now().Add(30 * time.Second); slowGot.Load() == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the slow sink never received the first event")
		}
	}
	if _, c := q.Post(ev("r0", "resync")); c != 0 {
		t.Fatalf("nothing waits yet, but %d lanes coalesced r0", c)
	}
	want("r0")
	// r0 still waits on the slow lane only.
	if _, c := q.Post(ev("r1", "resync")); c != 1 {
		t.Fatalf("r1 should coalesce on the hung lane only, coalesced on %d", c)
	}
	want("r1")
	// Keyed events coalesce per key: one per Job waits, others pass.
	job := func(id, subject string) cloudevents.Event {
		e := ev(id, "progress")
		e.SetSubject(subject)
		return e
	}
	if _, c := q.Post(job("a1", "jobs/a")); c != 0 {
		t.Fatalf("a1 coalesced on %d lanes", c)
	}
	want("a1")
	if _, c := q.Post(job("a2", "jobs/a")); c != 1 {
		t.Fatalf("a2 should coalesce with a1 on the hung lane, coalesced on %d", c)
	}
	want("a2")
	if _, c := q.Post(job("b1", "jobs/b")); c != 0 {
		t.Fatalf("another Job's event coalesced on %d lanes", c)
	}
	want("b1")
	if _, c := q.Post(ev("u2", "update")); c != 0 {
		t.Fatalf("an unkeyed event coalesced on %d lanes", c)
	}
	want("u2")
	close(release)
	cancel()
	q.Wait()
	if n := slowGot.Load(); n < 1 || n > 5 {
		t.Fatalf("slow sink saw %d requests, want the update, at most one resync, one event per Job and the update", n)
	}
}

// With a token file, every event carries its token (client-go re-reads the
// file as the kubelet rotates it); a missing file is refused at start.
func TestSendCarriesTheTokenFile(t *testing.T) {
	var got atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Header.Get("Authorization"))
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("first\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := New([]string{srv.URL}, logr.Discard(), file)
	if err != nil {
		t.Fatal(err)
	}
	e := cloudevents.NewEvent()
	e.SetID("1")
	e.SetSource("test")
	e.SetType("dev.snapflow.resync")
	if err := s.Send(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	if h, _ := got.Load().(string); h != "Bearer first" {
		t.Fatalf("Authorization %q, want the file's token", h)
	}
	if _, err := New([]string{srv.URL}, logr.Discard(), filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Fatal("a missing token file must be refused at start")
	}
}
