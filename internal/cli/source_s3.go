package cli

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
	"github.com/cloudevents/sdk-go/v2/protocol"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/snapflow/snapflow/events"
)

const sourceS3Long = `s3 accepts S3 bucket notifications over plain HTTP and forwards each
object record as a ` + events.S3ObjectNotification + ` CloudEvent to every --sink
(one per function, or a broker), for clusters without Knative's own sources.

It understands what S3 servers POST to a webhook: the AWS notification
message, MinIO's webhook body, versitygw's --event-webhook-url body, an SNS
HTTP(S) subscription (Notification, and SubscriptionConfirmation: with
--confirm-sns-subscriptions it visits the SubscribeURL of an SNS host, else
it logs the URL for you to visit), SQS-wrapped messages and EventBridge
S3 events. s3:TestEvent is acknowledged without forwarding.

SNS envelopes must carry a valid SNS signature (--sns-verify, on by
default): the signing certificate is fetched over HTTPS from
sns.<region>.amazonaws.com only. An unsigned or forged envelope, an unknown
SignatureVersion or a certificate on another host gets 403 naming why.
Other formats (webhooks, SNS raw message delivery) carry no signature, and
the endpoint does not authenticate their senders: expose it only to the
S3 server and SNS.

A body that is not a notification gets 400. When a sink cannot be reached
after a few retries, or the SNS certificate cannot be downloaded, the
request gets 502, so a sender that retries (SNS) delivers again; versitygw
does not retry, and the functions' periodic resync catches up with what
was lost.`

// maxNotificationBody bounds a request: AWS messages are at most 256 KiB
// (SNS), MinIO batches stay well below this.
const maxNotificationBody = 4 << 20

func newSourceS3Cmd() *cobra.Command {
	var addr string
	var sinks, buckets []string
	var confirmSNS, snsVerify, devLogs bool
	cmd := &cobra.Command{
		Use:   "s3 --sink URL [--sink URL...]",
		Short: "Receive S3 bucket notifications over HTTP and POST one CloudEvent per object record to the sinks",
		Long:  sourceS3Long,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(sinks) == 0 {
				return errors.New("--sink is required: the URL of a function or broker (repeat for several)")
			}
			log := zap.New(zap.UseDevMode(devLogs)).WithName("s3-source")
			ctrl.SetLogger(log)
			if !snsVerify {
				log.Info("SNS signature verification is off (--sns-verify=false): forged SNS envelopes are accepted")
			}
			src, err := newS3Source(sinks, buckets, confirmSNS, snsVerify, log)
			if err != nil {
				return err
			}
			return serveS3Source(cmd.Context(), addr, src, log)
		},
	}
	cmd.Flags().StringVar(&addr, "addr", ":8080", "listen address")
	cmd.Flags().StringArrayVar(&sinks, "sink", nil, "URL to POST CloudEvents to (repeatable)")
	cmd.Flags().StringArrayVar(&buckets, "bucket", nil, "forward only records of this bucket (repeatable; default all)")
	cmd.Flags().BoolVar(&confirmSNS, "confirm-sns-subscriptions", false, "confirm SNS subscriptions by visiting their SubscribeURL (SNS hosts only)")
	cmd.Flags().BoolVar(&snsVerify, "sns-verify", true, "refuse SNS envelopes without a valid SNS signature (certificates from sns.<region>.amazonaws.com over HTTPS)")
	cmd.Flags().BoolVar(&devLogs, "dev-logs", false, "human-readable logs instead of JSON")
	return cmd
}

// s3Source turns notification bodies into CloudEvents. It keeps nothing
// between requests.
type s3Source struct {
	sinks      []string
	clients    []cloudevents.Client
	buckets    map[string]bool
	confirmSNS bool
	// decoder verifies SNS signatures unless --sns-verify=false.
	decoder events.S3Decoder
	// confirm fetches a SubscribeURL; a plain client with a timeout.
	confirm *http.Client
	log     logr.Logger
}

func newS3Source(sinks, buckets []string, confirmSNS, snsVerify bool, log logr.Logger) (*s3Source, error) {
	s := &s3Source{sinks: sinks, confirmSNS: confirmSNS, log: log, confirm: &http.Client{Timeout: 10 * time.Second}}
	if snsVerify {
		s.decoder.SNS = events.NewSNSVerifier()
	}
	for _, u := range sinks {
		if p, err := url.Parse(u); err != nil || p.Scheme == "" || p.Host == "" {
			return nil, fmt.Errorf("invalid --sink %q: want an absolute http(s) URL", u)
		}
		c, err := cloudevents.NewClientHTTP(cloudevents.WithTarget(u))
		if err != nil {
			return nil, fmt.Errorf("cloudevents client for %s: %w", u, err)
		}
		s.clients = append(s.clients, c)
	}
	if len(buckets) > 0 {
		s.buckets = map[string]bool{}
		for _, b := range buckets {
			s.buckets[b] = true
		}
	}
	return s, nil
}

func serveS3Source(ctx context.Context, addr string, src *s3Source, log logr.Logger) error {
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
	log.Info("s3 source listening", "addr", ln.Addr().String(), "sinks", src.sinks)
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

func (s *s3Source) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST an S3 bucket notification here", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxNotificationBody+1))
	if err != nil {
		http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
		return
	}
	if len(body) > maxNotificationBody {
		http.Error(w, fmt.Sprintf("notification larger than %d bytes", maxNotificationBody), http.StatusRequestEntityTooLarge)
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
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if err := s.send(r.Context(), e); err != nil {
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

// send delivers e to every sink, retrying like snapflow's kube source; a
// sink's 4xx refusal is final and not an error of the source.
func (s *s3Source) send(ctx context.Context, e event.Event) error {
	var errs []error
	for i, c := range s.clients {
		delay := 50 * time.Millisecond
		for attempt := 1; ; attempt++ {
			res := c.Send(ctx, e)
			if protocol.IsACK(res) {
				break
			}
			var hr *cehttp.Result
			if errors.As(res, &hr) && hr.StatusCode >= 400 && hr.StatusCode < 500 {
				s.log.Info("sink refused the event", "sink", s.sinks[i], "id", e.ID(), "status", hr.StatusCode, "reason", fmt.Sprint(res))
				break
			}
			if attempt == 6 || ctx.Err() != nil {
				errs = append(errs, fmt.Errorf("send %s to %s: %w", e.ID(), s.sinks[i], res))
				break
			}
			time.Sleep(delay)
			delay *= 2
		}
	}
	return errors.Join(errs...)
}

// snsConfirmHost matches the SNS endpoints that sign subscriptions.
var snsConfirmHost = regexp.MustCompile(`^sns\.[a-z0-9-]+\.amazonaws\.com(\.cn)?$`)

// subscribe handles an SNS SubscriptionConfirmation. The endpoint is
// unauthenticated, so it only ever visits an SNS ConfirmSubscription URL:
// anything else would let a caller make it fetch arbitrary URLs.
func (s *s3Source) subscribe(ctx context.Context, w http.ResponseWriter, n events.S3Notification) {
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
