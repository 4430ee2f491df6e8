package sink

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

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
			s, err := New([]string{srv.URL}, logr.Discard())
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
