package webhook

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A body over the limit is refused before the handler reads it whole,
// whether its length is declared or it arrives chunked.
func TestLimitBody(t *testing.T) {
	var read int
	h := LimitBody(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		read = len(b)
		if err != nil {
			http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
			return
		}
		w.WriteHeader(http.StatusOK)
	}), 1024)
	for _, tc := range []struct {
		name    string
		body    []byte
		chunked bool
		want    int
		maxRead int
	}{
		{"within the limit", bytes.Repeat([]byte("a"), 1024), false, http.StatusOK, 1024},
		{"declared over the limit", bytes.Repeat([]byte("a"), 4096), false, http.StatusRequestEntityTooLarge, 0},
		{"chunked over the limit", bytes.Repeat([]byte("a"), 4096), true, http.StatusRequestEntityTooLarge, 1024},
	} {
		t.Run(tc.name, func(t *testing.T) {
			read = 0
			req := httptest.NewRequest(http.MethodPost, "/validate", bytes.NewReader(tc.body))
			if tc.chunked {
				req.ContentLength = -1
				req.Body = io.NopCloser(strings.NewReader(string(tc.body)))
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.want || read > tc.maxRead {
				t.Fatalf("status %d after reading %d bytes, want %d reading at most %d", rec.Code, read, tc.want, tc.maxRead)
			}
		})
	}
}
