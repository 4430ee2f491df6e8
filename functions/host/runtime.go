// Package host serves snapflow's functions: each is a CloudEvents
// receiver over HTTP (Knative Serving calls it on $PORT), with health and
// metrics endpoints, structured logs carrying the event id, and an emitter
// that sends to K_SINK (a SinkBinding) when set.
package host

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/protocol"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/snapflow/snapflow/events"
	"github.com/snapflow/snapflow/events/sources/kube"
)

// MaxEventBody bounds a request body. snapflow's events carry one object
// (ApiServerSource) or a small request; etcd refuses objects over 1.5 MiB,
// so anything past this is not an event of ours and must not cost memory.
const MaxEventBody = 3 << 20

// Handler handles one event. A nil error acknowledges it; an events client
// error is refused with 400; any other error is a 500 so the sender retries.
type Handler func(ctx context.Context, e event.Event) error

// Function is one named handler.
type Function struct {
	Name   string
	Handle Handler
	// Requests are the event types a sender outside Options.Auth's trusted
	// list may send (the handler authorizes each against the sender's
	// RBAC); every other type needs a trusted sender.
	Requests []string
}

// Options configure Serve.
type Options struct {
	// Addr is host:port to listen on (":$PORT" on Knative).
	Addr      string
	Functions []Function
	Log       logr.Logger
	// Registry receives the runtime's metrics; a fresh one when nil.
	Registry *prometheus.Registry
	// Listening, when set, receives the bound address once serving.
	Listening chan<- string
	// Auth, when set, refuses requests without a valid bearer token before
	// anything is decoded. Nil serves anyone: only for a loopback dev
	// server or a deployment that turned sender authentication off.
	Auth *Authenticator

	// sweeps, when set, receives each function's sweep coalescer (tests).
	sweeps map[string]*sweeps
}

// Serve runs the functions until ctx ends, then drains in-flight requests.
// With one function it answers on "/" as a Knative Service does; with
// several (snapflow dev) each answers on "/<name>".
func Serve(ctx context.Context, o Options) error {
	reg := o.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	handled := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "snapflow_function_events_total", Help: "CloudEvents handled, by function, event type and result (ack, coalesced, forbidden, refused, retry).",
	}, []string{"function", "type", "result"})
	duration := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "snapflow_function_event_duration_seconds", Help: "Time to handle one CloudEvent.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
	}, []string{"function"})
	// Kopiur's controller series, for its dashboards: an API server
	// event about an object is what a controller's reconcile is here.
	reconciled := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kopiur_controller_reconciliations_total", Help: "API server events about an object that a function handled, by the object's kind (ticks and requests are not counted).",
	}, []string{"kind"})
	reconcileErrors := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kopiur_controller_reconcile_errors_total", Help: "Those events that did not end well, by kind and class: retry (the handler failed; the sender retries), refused (a malformed event) or forbidden (an untrusted sender).",
	}, []string{"kind", "class"})
	reconcileSeconds := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "kopiur_controller_reconcile_duration_seconds", Help: "Time a function took to handle one API server event, by the object's kind.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
	}, []string{"kind"})
	reg.MustRegister(handled, duration, reconciled, reconcileErrors, reconcileSeconds)

	mux := http.NewServeMux()
	var ready atomic.Bool
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready.Load() {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	for _, f := range o.Functions {
		p, err := cloudevents.NewHTTP()
		if err != nil {
			return fmt.Errorf("cloudevents protocol: %w", err)
		}
		f := f
		sw := map[string]*sweeps{events.Resync: {}, events.Ping: {}}
		if o.sweeps != nil {
			for typ, s := range sw {
				o.sweeps[f.Name+" "+typ] = s
			}
		}
		fn := func(ctx context.Context, e event.Event) protocol.Result {
			start := time.Now()
			log := o.Log.WithValues("function", f.Name, "eventID", e.ID(), "eventType", e.Type(), "subject", e.Subject())
			if s, ok := SenderOf(ctx); ok {
				log = log.WithValues("sender", s.User.Username)
				if !s.Trusted && !slices.Contains(f.Requests, e.Type()) {
					handled.WithLabelValues(f.Name, typeLabel(e.Type()), "forbidden").Inc()
					log.Info("refused an event from an untrusted sender")
					return cehttp.NewResult(http.StatusForbidden, "%s may not send %s events to %s", s.User.Username, typeLabel(e.Type()), f.Name)
				}
			}
			var err error
			joined := false
			if isSweep(e.Type()) {
				joined, err = sw[e.Type()].do(ctx, func(ctx context.Context) error { return f.Handle(logr.NewContext(ctx, log), e) })
			} else {
				err = f.Handle(logr.NewContext(ctx, log), e)
			}
			took := time.Since(start)
			duration.WithLabelValues(f.Name).Observe(took.Seconds())
			kind, isReconcile := reconciledKind(e)
			if isReconcile {
				reconciled.WithLabelValues(kind).Inc()
				reconcileSeconds.WithLabelValues(kind).Observe(took.Seconds())
				if class := errorClass(err); class != "" {
					reconcileErrors.WithLabelValues(kind, class).Inc()
				}
			}
			switch {
			case joined && err == nil:
				handled.WithLabelValues(f.Name, typeLabel(e.Type()), "coalesced").Inc()
				log.V(1).Info("joined a queued sweep", "took", time.Since(start).String())
				return protocol.ResultACK
			case errors.Is(err, ErrForbidden):
				handled.WithLabelValues(f.Name, typeLabel(e.Type()), "forbidden").Inc()
				log.Info("refused", "reason", err.Error())
				return cehttp.NewResult(http.StatusForbidden, "%s", err.Error())
			case err == nil:
				handled.WithLabelValues(f.Name, typeLabel(e.Type()), "ack").Inc()
				log.V(1).Info("handled", "took", time.Since(start).String())
				return protocol.ResultACK
			case events.IsClientError(err):
				handled.WithLabelValues(f.Name, typeLabel(e.Type()), "refused").Inc()
				log.Info("refused", "reason", err.Error())
				return cehttp.NewResult(http.StatusBadRequest, "%s", err.Error())
			default:
				handled.WithLabelValues(f.Name, typeLabel(e.Type()), "retry").Inc()
				log.Error(err, "handler failed; the sender should retry")
				return cehttp.NewResult(http.StatusInternalServerError, "%s", err.Error())
			}
		}
		h, err := cloudevents.NewHTTPReceiveHandler(ctx, p, fn)
		if err != nil {
			return fmt.Errorf("receive handler for %s: %w", f.Name, err)
		}
		path := "/"
		if len(o.Functions) > 1 {
			path = "/" + f.Name
		}
		mux.Handle(path, refuseNonEvents(authenticate(o.Auth, f, o.Log.WithValues("function", f.Name), checkStructured(h))))
	}
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", o.Addr, err)
	}
	// A slow sender may hold a connection only so long; handlers that run
	// longer (a restore waiting on a Job) stay inside WriteTimeout.
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 10 * time.Minute, IdleTimeout: 2 * time.Minute}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	ready.Store(true)
	o.Log.Info("serving functions", "addr", ln.Addr().String(), "functions", names(o.Functions))
	if o.Listening != nil {
		o.Listening <- ln.Addr().String()
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	ready.Store(false)
	// Knative gives a revision 30s to drain by default.
	sctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// refuseNonEvents answers a clear 400 for requests that cannot be CloudEvents
// (no ce-* headers and no structured content type) instead of a bare error.
func refuseNonEvents(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "POST a CloudEvent here", http.StatusMethodNotAllowed)
			return
		}
		if r.Header.Get("Ce-Specversion") == "" && !structured(r) {
			http.Error(w, "not a CloudEvent: send binary mode (ce-* headers) or structured mode (application/cloudevents+json)", http.StatusBadRequest)
			return
		}
		if r.ContentLength > MaxEventBody {
			http.Error(w, fmt.Sprintf("event body of %d bytes is over the %d-byte limit", r.ContentLength, MaxEventBody), http.StatusRequestEntityTooLarge)
			return
		}
		// A body without a length is cut at the limit while it is read, so
		// it never sits in memory whole.
		r.Body = http.MaxBytesReader(w, r.Body, MaxEventBody)
		h.ServeHTTP(w, r)
	})
}

// checkStructured reads a structured-mode body (already bounded) and
// refuses one that is not a CloudEvent. It runs after authentication, so
// an anonymous sender cannot make the function parse anything.
func checkStructured(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if structured(r) {
			// The SDK answers a structured event it cannot parse with a bare
			// 500, which a broker retries for ever: refuse it here, with why.
			body, err := io.ReadAll(r.Body)
			var tooBig *http.MaxBytesError
			switch {
			case errors.As(err, &tooBig):
				http.Error(w, fmt.Sprintf("event body is over the %d-byte limit", MaxEventBody), http.StatusRequestEntityTooLarge)
				return
			case err != nil:
				http.Error(w, "read the event: "+err.Error(), http.StatusBadRequest)
				return
			}
			if err := parseStructured(body); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		h.ServeHTTP(w, r)
	})
}

func structured(r *http.Request) bool {
	return r.Header.Get("Ce-Specversion") == "" && strings.HasPrefix(r.Header.Get("Content-Type"), "application/cloudevents")
}

// parseStructured says what is wrong with a structured-mode event the SDK
// would fail to decode.
func parseStructured(body []byte) error {
	var e event.Event
	if err := json.Unmarshal(body, &e); err != nil {
		return fmt.Errorf("not a structured-mode CloudEvent (application/cloudevents+json): %v", err)
	}
	return nil
}

// authenticate admits a request only from a sender whose token the API
// server vouches for, and a sender outside the trusted list only with a
// request event type; refusals happen before the event is decoded.
func authenticate(a *Authenticator, f Function, log logr.Logger, h http.Handler) http.Handler {
	if a == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, code, why := a.Authenticate(r.Context(), r)
		if code != 0 {
			log.Info("refused a request", "status", code, "reason", why, "remote", r.RemoteAddr)
			http.Error(w, why, code)
			return
		}
		// In binary mode the type is a header: refuse before decoding.
		if t := r.Header.Get("Ce-Type"); !s.Trusted && (len(f.Requests) == 0 || (t != "" && !slices.Contains(f.Requests, t))) {
			log.Info("refused an untrusted sender", "sender", s.User.Username, "remote", r.RemoteAddr)
			http.Error(w, fmt.Sprintf("%s may not send events to %s: only the deployment's trusted senders may", s.User.Username, f.Name), http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r.WithContext(WithSender(r.Context(), s)))
	})
}

// typeLabel keeps the metric's type label to the event types snapflow
// knows: a sender inventing types must not mint a series per request.
// reconciledKind is the kind of the object an API server event is about,
// when it is one the kube source sends; any other value is not counted,
// so a sender cannot mint label values.
func reconciledKind(e event.Event) (string, bool) {
	k, ok := e.Extensions()["kind"].(string)
	if !ok {
		return "", false
	}
	for _, gvk := range kube.DefaultKinds {
		if gvk.Kind == k {
			return k, true
		}
	}
	return "", false
}

// errorClass is the reconcile error class of a handler's outcome ("" for
// success).
func errorClass(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrForbidden):
		return "forbidden"
	case events.IsClientError(err):
		return "refused"
	}
	return "retry"
}

func typeLabel(t string) string {
	if events.Known(t) {
		return t
	}
	return "other"
}

func names(fs []Function) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Name
	}
	return out
}

// Log is the logger Serve put in a handler's context (carrying the event
// id), or a discarding one outside a handler.
func Log(ctx context.Context) logr.Logger {
	l, err := logr.FromContext(ctx)
	if err != nil {
		return logr.Discard()
	}
	return l
}

// Now reads a function's clock: the injected one (tests, the demo) or the
// wall clock.
func Now(clock func() time.Time) time.Time {
	if clock != nil {
		return clock()
	}
	return time.Now()
}
