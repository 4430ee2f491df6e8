package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/snapflow/snapflow/events"
)

// serve starts one function on a loopback port and returns its URL and a
// count of the events it was handed.
func serve(t *testing.T) (string, *atomic.Int32, *prometheus.Registry) {
	t.Helper()
	var calls atomic.Int32
	reg := prometheus.NewRegistry()
	url := serveWith(t, Options{Registry: reg,
		Functions: []Function{{Name: "f", Handle: func(context.Context, event.Event) error { calls.Add(1); return nil }}}})
	return url, &calls, reg
}

func post(t *testing.T, url, typ string, body io.Reader, length int64) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, body)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = length
	req.Header.Set("Ce-Specversion", "1.0")
	req.Header.Set("Ce-Id", "1")
	req.Header.Set("Ce-Source", "test")
	req.Header.Set("Ce-Type", typ)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		// The server may close the connection on an oversized body.
		return 0
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// An oversized body is refused before it is decoded, whether or not the
// sender declares its length; a normal event still goes through.
func TestOversizedBodiesAreRefusedUndecoded(t *testing.T) {
	url, calls, _ := serve(t)
	big := bytes.Repeat([]byte(" "), MaxEventBody+1)
	tests := []struct {
		name   string
		body   io.Reader
		length int64
		ok     bool
	}{
		{"declared length over the limit", bytes.NewReader(big), int64(len(big)), false},
		{"chunked body over the limit", io.MultiReader(bytes.NewReader(big)), -1, false},
		{"small event", strings.NewReader(`{}`), 2, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := calls.Load()
			code := post(t, url, events.Resync, tt.body, tt.length)
			handled := calls.Load() > before
			if handled != tt.ok || (tt.ok && code/100 != 2) || (!tt.ok && code/100 == 2) {
				t.Fatalf("status %d, handled %v; want handled=%v", code, handled, tt.ok)
			}
		})
	}
}

// A structured-mode body that is not a CloudEvent gets a 400 that says
// why (a 500 would be retried by a broker for ever); an oversized one
// without a declared length gets a 413. Neither reaches the handler.
func TestStructuredGarbageIsRefusedWithTheReason(t *testing.T) {
	url, calls, _ := serve(t)
	tests := []struct {
		name   string
		body   io.Reader
		length int64
		code   int
		says   string
	}{
		{"not JSON", strings.NewReader("garbage"), 7, http.StatusBadRequest, "not a structured-mode CloudEvent"},
		{"cut short", strings.NewReader(`{"specversion":"1.0","id":"1","source":"x","type":"t","data":`), -1, http.StatusBadRequest, "unexpected end of JSON input"},
		{"missing attributes", strings.NewReader(`{"specversion":"1.0"}`), -1, http.StatusBadRequest, "id: MUST be a non-empty string"},
		{"chunked over the limit", io.MultiReader(strings.NewReader(`{"data":"`), bytes.NewReader(bytes.Repeat([]byte("x"), MaxEventBody))), -1, http.StatusRequestEntityTooLarge, "limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, url, tt.body)
			if err != nil {
				t.Fatal(err)
			}
			req.ContentLength = tt.length
			req.Header.Set("Content-Type", "application/cloudevents+json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.code || !strings.Contains(string(body), tt.says) {
				t.Fatalf("status %d %q, want %d saying %q", resp.StatusCode, body, tt.code, tt.says)
			}
			if n := calls.Load(); n != 0 {
				t.Fatalf("the handler was called %d times", n)
			}
		})
	}
}

// Invented event types share one metric series, so a sender cannot grow
// the function's memory by minting types.
func TestMetricTypeLabelIsBounded(t *testing.T) {
	url, _, reg := serve(t)
	for i := 0; i < 20; i++ {
		post(t, url, fmt.Sprintf("evil.type.%d", i), strings.NewReader(`{}`), 2)
	}
	post(t, url, events.Resync, strings.NewReader(`{}`), 2)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]bool{}
	for _, mf := range mfs {
		if mf.GetName() != "snapflow_function_events_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "type" {
					types[l.GetValue()] = true
				}
			}
		}
	}
	if len(types) != 2 || !types["other"] || !types[events.Resync] {
		t.Fatalf("type labels %v, want only other and %s", types, events.Resync)
	}
}

// An API server event about one of the kube source's kinds counts as a
// reconcile of that kind, with its failures by class; ticks, requests and
// invented kinds do not count.
func TestReconcileMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	url := serveWith(t, Options{Registry: reg, Functions: []Function{{Name: "f", Handle: func(_ context.Context, e event.Event) error {
		if e.ID() == "fail" {
			return errors.New("the API server went away")
		}
		return nil
	}}}})
	send := func(id, kind string) {
		req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range map[string]string{"Ce-Specversion": "1.0", "Ce-Id": id, "Ce-Source": "test", "Ce-Type": "dev.knative.apiserver.resource.update", "Content-Type": "application/json"} {
			req.Header.Set(k, v)
		}
		if kind != "" {
			req.Header.Set("Ce-Kind", kind)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	send("1", "Snapshot")
	send("2", "Snapshot")
	send("fail", "Snapshot")
	send("3", "Restore")
	send("4", "Secret") // not a kind the functions react to
	send("5", "")
	post(t, url, events.Resync, strings.NewReader(`{}`), 2)
	got := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range m.GetLabel() {
				key += " " + l.GetValue()
			}
			switch {
			case m.GetCounter() != nil:
				got[key] = m.GetCounter().GetValue()
			case m.GetHistogram() != nil:
				got[key] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	want := map[string]float64{
		"kopiur_controller_reconciliations_total Snapshot":        3,
		"kopiur_controller_reconciliations_total Restore":         1,
		"kopiur_controller_reconcile_errors_total retry Snapshot": 1, // labels in name order
		"kopiur_controller_reconcile_duration_seconds Snapshot":   3,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	for k := range got {
		if strings.Contains(k, "Secret") || (strings.HasPrefix(k, "kopiur_controller_reconciliations_total") && k != "kopiur_controller_reconciliations_total Snapshot" && k != "kopiur_controller_reconciliations_total Restore") {
			t.Errorf("unexpected series %s", k)
		}
	}
}
