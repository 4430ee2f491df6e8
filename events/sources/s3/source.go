// Package s3 receives S3 bucket notifications over HTTP (AWS, MinIO,
// versitygw, SNS, SQS-wrapped and EventBridge bodies) and forwards each
// object record as one CloudEvent through the sink package.
package s3

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/go-logr/logr"

	"github.com/snapflow/snapflow/events"
	"github.com/snapflow/snapflow/events/sources/sink"
)

// MaxNotificationBody bounds a request: AWS messages are at most 256 KiB
// (SNS), MinIO batches stay well below this.
const MaxNotificationBody = 4 << 20

// Source turns notification bodies into CloudEvents. It keeps nothing
// between requests.
type Source struct {
	sinks      *sink.Sinks
	buckets    map[string]bool
	confirmSNS bool
	// decoder verifies SNS signatures unless --sns-verify=false.
	decoder events.S3Decoder
	// confirm fetches a SubscribeURL; a plain client with a timeout.
	confirm *http.Client
	log     logr.Logger
}

// Options configure a Source.
type Options struct {
	// Sinks are the absolute http(s) URLs every record is posted to.
	Sinks []string
	// Buckets, when set, are the only buckets whose records are forwarded.
	Buckets []string
	// ConfirmSNS visits the SubscribeURL of an SNS subscription request.
	ConfirmSNS bool
	// VerifySNS refuses SNS envelopes whose signature does not verify.
	VerifySNS bool
	// SNSTopics are the TopicArns whose signed envelopes are accepted; with
	// VerifySNS and none, every SNS envelope is refused.
	SNSTopics []string
	// SNSMaxAge bounds a signed message's age (0: events.DefaultSNSMaxAge).
	SNSMaxAge time.Duration
	// TokenFile holds the bearer token sent with every event (see sink.New).
	TokenFile string
}

// New checks the options and prepares the sinks.
func New(o Options, log logr.Logger) (*Source, error) {
	s := &Source{confirmSNS: o.ConfirmSNS, log: log, confirm: &http.Client{Timeout: 10 * time.Second}}
	if o.VerifySNS {
		s.decoder.SNS = events.NewSNSVerifier(o.SNSTopics...)
		s.decoder.SNS.MaxAge = o.SNSMaxAge
	}
	for _, u := range o.Sinks {
		if p, err := url.Parse(u); err != nil || p.Scheme == "" || p.Host == "" {
			return nil, fmt.Errorf("invalid --sink %q: want an absolute http(s) URL", u)
		}
	}
	ss, err := sink.New(o.Sinks, log, o.TokenFile)
	if err != nil {
		return nil, err
	}
	s.sinks = ss
	if len(o.Buckets) > 0 {
		s.buckets = map[string]bool{}
		for _, b := range o.Buckets {
			s.buckets[b] = true
		}
	}
	return s, nil
}

// Serve listens on addr until ctx ends.
func Serve(ctx context.Context, addr string, src *Source, log logr.Logger) error {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.Handle("/", src)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info("s3 source listening", "addr", ln.Addr().String())
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func (s *Source) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST an S3 bucket notification here", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxNotificationBody+1))
	if err != nil {
		http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
		return
	}
	if len(body) > MaxNotificationBody {
		http.Error(w, fmt.Sprintf("notification larger than %d bytes", MaxNotificationBody), http.StatusRequestEntityTooLarge)
		return
	}
	n, err := s.decoder.Decode(r.Context(), body)
	switch {
	case errors.Is(err, events.ErrSNSSignature):
		s.log.Info("refused an SNS message whose signature does not verify", "reason", err.Error())
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	case events.IsClientError(err):
		s.log.Info("refused a body that is not an s3 notification", "reason", err.Error())
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	case err != nil:
		// The signing certificate could not be downloaded: SNS retries.
		s.log.Error(err, "could not verify an SNS message")
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	switch {
	case n.SubscribeURL != "":
		s.subscribe(r.Context(), w, n)
		return
	case n.Test:
		s.log.Info("s3 test event acknowledged")
		_, _ = io.WriteString(w, "test event acknowledged\n")
		return
	}
	forwarded, failed := 0, 0
	for _, rec := range n.Records {
		if s.buckets != nil && !s.buckets[rec.Bucket] {
			s.log.V(1).Info("record of an unlisted bucket dropped", "bucket", rec.Bucket)
			continue
		}
		e, err := s3CloudEvent(rec)
		if err != nil {
			s.log.Info("refused a record that makes no CloudEvent", "bucket", rec.Bucket, "key", rec.Key, "event", rec.EventName, "reason", err.Error())
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if err := s.sinks.Send(r.Context(), e); sink.Refused(err) {
			// A sink's refusal is final and not an error of the source.
			s.log.Info("sink refused the event", "id", e.ID(), "reason", err.Error())
		} else if err != nil {
			s.log.Error(err, "forward failed", "id", e.ID(), "bucket", rec.Bucket, "key", rec.Key)
			failed++
			continue
		}
		forwarded++
	}
	if failed > 0 {
		// Records already forwarded are sent again on a retry; their ids
		// are stable, and the functions are idempotent.
		http.Error(w, fmt.Sprintf("%d of %d records could not be forwarded", failed, failed+forwarded), http.StatusBadGateway)
		return
	}
	fmt.Fprintf(w, "forwarded %d records\n", forwarded)
}

// snsConfirmHost matches the SNS endpoints that sign subscriptions.
var snsConfirmHost = regexp.MustCompile(`^sns\.[a-z0-9-]+\.amazonaws\.com(\.cn)?$`)

// subscribe handles an SNS SubscriptionConfirmation. The endpoint is
// unauthenticated, so it only ever visits an SNS ConfirmSubscription URL:
// anything else would let a caller make it fetch arbitrary URLs.
func (s *Source) subscribe(ctx context.Context, w http.ResponseWriter, n events.S3Notification) {
	u, err := url.Parse(n.SubscribeURL)
	if err != nil || u.Scheme != "https" || !snsConfirmHost.MatchString(u.Hostname()) || u.Query().Get("Action") != "ConfirmSubscription" {
		http.Error(w, "SubscribeURL is not an SNS ConfirmSubscription URL", http.StatusBadRequest)
		return
	}
	if !s.confirmSNS {
		s.log.Info("SNS subscription awaits confirmation: visit the SubscribeURL, or run with --confirm-sns-subscriptions",
			"topic", n.TopicARN, "subscribeURL", n.SubscribeURL)
		_, _ = io.WriteString(w, "subscription not confirmed automatically; see the source's log\n")
		return
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	resp, err := s.confirm.Do(req)
	if err != nil {
		http.Error(w, "confirm the SNS subscription: "+err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusOK {
		http.Error(w, fmt.Sprintf("confirm the SNS subscription: %s", resp.Status), http.StatusBadGateway)
		return
	}
	s.log.Info("SNS subscription confirmed", "topic", n.TopicARN)
	_, _ = io.WriteString(w, "subscription confirmed\n")
}

// s3CloudEvent is one record as a CloudEvent. The id hashes the record, so
// a notification delivered twice (SNS retries, a 502 above) gives the same
// id; the bucket and event name are extensions a Trigger can filter on.
func s3CloudEvent(r events.S3Record) (event.Event, error) {
	e := cloudevents.NewEvent()
	h := sha256.New()
	for _, s := range []string{r.Bucket, r.Key, r.EventName, r.VersionID, r.Sequencer, r.ETag, r.Time.UTC().Format(time.RFC3339Nano)} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	e.SetID(hex.EncodeToString(h.Sum(nil))[:32])
	e.SetType(events.S3ObjectNotification)
	e.SetSource((&url.URL{Scheme: "s3", Host: r.Bucket}).String())
	e.SetSubject(r.Key)
	if !r.Time.IsZero() {
		e.SetTime(r.Time)
	}
	e.SetExtension("bucket", r.Bucket)
	e.SetExtension("eventname", strings.ReplaceAll(r.EventName, ":", "."))
	if err := e.SetData(cloudevents.ApplicationJSON, r); err != nil {
		return e, fmt.Errorf("encode the s3 record of %s: %w", r.Key, err)
	}
	return e, e.Validate()
}
