package events

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snapflow/snapflow/events/snstest"
)

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

const s3Message = `{"Records":[{"eventName":"ObjectCreated:Put","s3":{"bucket":{"name":"kb-backups"},"object":{"key":"pvc-x/a+b"}}}]}`

// now is a Timestamp as SNS writes it, for messages the verifier must
// find fresh.
func now() string { return time.Now().UTC().Format("2006-01-02T15:04:05.000Z") }

func notification() map[string]any {
	return map[string]any{
		"Type": "Notification", "MessageId": "22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324", "TopicArn": "arn:aws:sns:us-east-1:123456789012:kb-backups-events",
		"Subject": "Amazon S3 Notification", "Message": s3Message, "Timestamp": now(),
	}
}

func confirmation() map[string]any {
	return map[string]any{
		"Type": "SubscriptionConfirmation", "MessageId": "165545c9", "Token": "2336412f", "TopicArn": "arn:aws:sns:us-east-1:123456789012:kb-backups-events",
		"Message": "You have chosen to subscribe.", "Timestamp": now(),
		"SubscribeURL": "https://sns.us-east-1.amazonaws.com/?Action=ConfirmSubscription&Token=2336412f",
	}
}

// The canonical string is AWS's documented one, byte for byte.
func TestSNSStringToSign(t *testing.T) {
	n := notification()
	delete(n, "Subject")
	n["Timestamp"] = "2026-11-30T10:15:00.456Z"
	p, _ := newProbe(mustJSON(t, n))
	got, err := snsStringToSign(p)
	want := "Message\n" + s3Message + "\nMessageId\n22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324\nTimestamp\n2026-11-30T10:15:00.456Z\n" +
		"TopicArn\narn:aws:sns:us-east-1:123456789012:kb-backups-events\nType\nNotification\n"
	if err != nil || got != want {
		t.Fatalf("got %q %v\nwant %q", got, err, want)
	}
	c := confirmation()
	c["Timestamp"] = "2026-11-30T09:59:00.000Z"
	p, _ = newProbe(mustJSON(t, c))
	got, _ = snsStringToSign(p)
	want = "Message\nYou have chosen to subscribe.\nMessageId\n165545c9\nSubscribeURL\nhttps://sns.us-east-1.amazonaws.com/?Action=ConfirmSubscription&Token=2336412f\n" +
		"Timestamp\n2026-11-30T09:59:00.000Z\nToken\n2336412f\nTopicArn\narn:aws:sns:us-east-1:123456789012:kb-backups-events\nType\nSubscriptionConfirmation\n"
	if got != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
}

// testTopic is the topic the test notifications come from.
const testTopic = snstest.Topic

func TestSNSVerify(t *testing.T) {
	s := snstest.NewSigner(t)
	tampered := s.Sign(t, notification(), "2")
	tampered["Message"] = strings.Replace(s3Message, "pvc-x", "pvc-y", 1)
	noSubject := notification()
	delete(noSubject, "Subject")
	// Lambda spells SigningCertUrl so and gives a message without a
	// subject "Subject": null.
	lambdaStyle := s.Sign(t, noSubject, "1")
	lambdaStyle["SigningCertUrl"], lambdaStyle["Subject"] = lambdaStyle["SigningCertURL"], nil
	delete(lambdaStyle, "SigningCertURL")
	at := func(ts string) map[string]any {
		m := notification()
		m["Timestamp"] = ts
		return s.Sign(t, m, "2")
	}
	ago := func(d time.Duration) string { return time.Now().Add(-d).UTC().Format(time.RFC3339Nano) }
	withHost := func(u string) map[string]any {
		m := notification()
		m["SigningCertURL"] = u
		return s.Sign(t, m, "2")
	}
	tests := []struct {
		name    string
		msg     map[string]any
		body    []byte // instead of msg
		records int
		subURL  bool
		reason  string // empty: accepted
		fetched bool   // the certificate was asked for
		topics  []string
	}{
		{name: "valid v1 notification", msg: s.Sign(t, notification(), "1"), records: 1, fetched: true},
		{name: "valid v2 notification", msg: s.Sign(t, notification(), "2"), records: 1, fetched: true},
		{name: "valid v2 without a subject", msg: s.Sign(t, noSubject, "2"), records: 1, fetched: true},
		{name: "valid v1 subscription confirmation", msg: s.Sign(t, confirmation(), "1"), subURL: true, fetched: true},
		{name: "lambda spelling and a null subject", body: mustJSON(t, map[string]any{"Records": []any{map[string]any{"EventSource": "aws:sns", "Sns": lambdaStyle}}}), records: 1, fetched: true},
		{name: "sqs body wrapping a signed envelope", body: mustJSON(t, map[string]any{"Body": string(mustJSON(t, s.Sign(t, notification(), "2")))}), records: 1, fetched: true},
		{name: "tampered message", msg: tampered, reason: "signature mismatch", fetched: true},
		{name: "tampered message inside sqs", body: mustJSON(t, map[string]any{"Body": string(mustJSON(t, tampered))}), reason: "signature mismatch", fetched: true},
		{name: "signed by v1, claimed v2", msg: func() map[string]any { m := s.Sign(t, notification(), "1"); m["SignatureVersion"] = "2"; return m }(), reason: "signature mismatch", fetched: true},
		{name: "unsigned", msg: notification(), reason: "unsigned"},
		{name: "unknown signature version", msg: func() map[string]any { m := s.Sign(t, notification(), "2"); m["SignatureVersion"] = "3"; return m }(), reason: "unknown SignatureVersion"},
		{name: "signature not base64", msg: func() map[string]any { m := s.Sign(t, notification(), "2"); m["Signature"] = "EXAMPLE"; return m }(), reason: "not base64"},
		{name: "certificate on another host", msg: withHost("https://evil.example.com/SimpleNotificationService-x.pem"), reason: "host \"evil.example.com\" is not allowed"},
		{name: "certificate on a lookalike host", msg: withHost("https://sns.us-east-1.amazonaws.com.evil.example/x.pem"), reason: "is not allowed"},
		{name: "certificate on a port", msg: withHost("https://sns.us-east-1.amazonaws.com:8443/x.pem"), reason: "is not allowed"},
		{name: "certificate with userinfo", msg: withHost("https://u:p@sns.us-east-1.amazonaws.com/x.pem"), reason: "is not allowed"},
		{name: "certificate over http", msg: withHost("http://sns.us-east-1.amazonaws.com/x.pem"), reason: "is not https"},
		{name: "certificate that is not a pem", msg: withHost("https://sns.us-east-1.amazonaws.com/?Action=x"), reason: ".pem"},
		{name: "signed by a topic not in the allowlist", msg: s.Sign(t, notification(), "2"), topics: []string{"arn:aws:sns:us-east-1:123456789012:other"}, reason: "is not in the SNS topic allowlist"},
		{name: "no topic trusted", msg: s.Sign(t, notification(), "2"), topics: []string{}, reason: "no SNS topic is trusted"},
		{name: "one of several trusted topics", msg: s.Sign(t, notification(), "2"), topics: []string{"arn:aws:sns:eu-west-1:1:a", testTopic}, records: 1, fetched: true},
		{name: "sent 50 minutes ago (a retry)", msg: at(ago(50 * time.Minute)), records: 1, fetched: true},
		{name: "a replay two hours later", msg: at(ago(2 * time.Hour)), reason: "stale", fetched: true},
		{name: "a confirmation replayed a day later", msg: func() map[string]any {
			m := confirmation()
			m["Timestamp"] = ago(24 * time.Hour)
			return s.Sign(t, m, "1")
		}(), reason: "stale", fetched: true},
		{name: "dated in the future", msg: at(ago(-time.Hour)), reason: "in the future", fetched: true},
		{name: "a few seconds ahead (clock skew)", msg: at(ago(-30 * time.Second)), records: 1, fetched: true},
		{name: "timestamp not a time", msg: at("yesterday"), reason: "not an RFC 3339 time", fetched: true},
		{name: "china partition allowed", msg: withHost("https://sns.cn-north-1.amazonaws.com.cn/SimpleNotificationService-x.pem"), records: 1, fetched: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := s.Fetcher()
			body := tt.body
			if body == nil {
				body = mustJSON(t, tt.msg)
			}
			topics := []string{testTopic}
			if tt.topics != nil {
				topics = tt.topics
			}
			n, err := S3Decoder{SNS: &SNSVerifier{Fetcher: f, Topics: topics}}.Decode(context.Background(), body)
			if tt.fetched != (len(f.Asked()) == 1) {
				t.Errorf("certificate downloads %v, want fetched=%t", f.Asked(), tt.fetched)
			}
			if tt.reason != "" {
				if !errors.Is(err, ErrSNSSignature) || !IsClientError(err) || !strings.Contains(err.Error(), tt.reason) {
					t.Fatalf("err = %v, want ErrSNSSignature naming %q", err, tt.reason)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(n.Records) != tt.records || tt.subURL != (n.SubscribeURL != "") || n.TopicARN == "" {
				t.Fatalf("decoded %+v", n)
			}
			if tt.records > 0 && n.Records[0].Key != "pvc-x/a b" {
				t.Fatalf("key %q", n.Records[0].Key)
			}
		})
	}
}

// The captured SNS bodies carry AWS's example signatures: a verifying
// decoder refuses them, which is why the recorded-format test decodes
// without verification.
func TestSNSVerifyRefusesRecordedExamples(t *testing.T) {
	f := snstest.NewSigner(t).Fetcher()
	for _, file := range []string{"sns-notification.json", "sns-subscription-confirmation.json", "lambda-sqs-sns-batch.json"} {
		body, err := os.ReadFile(filepath.Join("testdata", file))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := (S3Decoder{SNS: &SNSVerifier{Fetcher: f, Topics: []string{testTopic}}}).Decode(context.Background(), body); !errors.Is(err, ErrSNSSignature) {
			t.Errorf("%s: err = %v, want ErrSNSSignature", file, err)
		}
	}
	// Bodies SNS did not wrap carry no proof of their sender: once topics
	// are listed they are refused; a verifier without topics (SNS refused
	// altogether) still decodes them.
	body, _ := os.ReadFile(filepath.Join("testdata", "aws-put.json"))
	if _, err := (S3Decoder{SNS: &SNSVerifier{Fetcher: f, Topics: []string{testTopic}}}).Decode(context.Background(), body); !errors.Is(err, ErrSNSSignature) || !strings.Contains(err.Error(), "signed SNS envelope") {
		t.Fatalf("an unsigned body with topics listed: %v", err)
	}
	if n, err := (S3Decoder{SNS: &SNSVerifier{Fetcher: f}}).Decode(context.Background(), body); err != nil || len(n.Records) != 1 {
		t.Fatalf("%+v %v", n, err)
	}
}

func TestSNSCertificateCache(t *testing.T) {
	s := snstest.NewSigner(t)
	f := s.Fetcher()
	v := &SNSVerifier{Fetcher: f, CacheSize: 2, Topics: []string{testTopic}}
	msgFor := func(region string) []byte {
		m := notification()
		m["SigningCertURL"] = "https://sns." + region + ".amazonaws.com/SimpleNotificationService-x.pem"
		return mustJSON(t, s.Sign(t, m, "2"))
	}
	for _, region := range []string{"us-east-1", "us-east-1", "eu-west-1", "us-east-1", "ap-south-1", "eu-west-1"} {
		if err := v.Verify(context.Background(), msgFor(region)); err != nil {
			t.Fatal(err)
		}
	}
	// us-east-1 once; eu-west-1, then again after ap-south-1 pushed it out.
	if got := len(f.Asked()); got != 4 || v.cached() != 2 {
		t.Fatalf("%d downloads %v, %d cached", got, f.Asked(), v.cached())
	}

	// A download that fails is ours to retry (5xx), not the sender's fault,
	// and is not cached.
	bad := &SNSVerifier{Fetcher: &snstest.Fetcher{Err: errors.New("connection refused")}, Topics: []string{testTopic}}
	err := bad.Verify(context.Background(), msgFor("us-east-1"))
	if err == nil || IsClientError(err) || !strings.Contains(err.Error(), "fetch the SNS signing certificate") || bad.cached() != 0 {
		t.Fatalf("err = %v, cached %d", err, bad.cached())
	}
	// A certificate out of its validity is refused.
	late := &SNSVerifier{Fetcher: f, Now: func() time.Time { return time.Now().Add(48 * time.Hour) }, Topics: []string{testTopic}}
	if err := late.Verify(context.Background(), msgFor("us-east-1")); !errors.Is(err, ErrSNSSignature) || !strings.Contains(err.Error(), "valid from") {
		t.Fatalf("err = %v", err)
	}
	// A body that is no certificate is refused.
	junk := &SNSVerifier{Fetcher: &snstest.Fetcher{PEM: []byte("<html>")}, Topics: []string{testTopic}}
	if err := junk.Verify(context.Background(), msgFor("us-east-1")); !errors.Is(err, ErrSNSSignature) || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Fatalf("err = %v", err)
	}
}

// The HTTPS fetcher downloads the certificate from an allowed host and
// follows no redirect away from it.
func TestHTTPSCertFetcher(t *testing.T) {
	s := snstest.NewSigner(t)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/SimpleNotificationService-test.pem":
			_, _ = w.Write(s.CertPEM)
		case "/moved.pem":
			http.Redirect(w, r, "https://evil.example.com/x.pem", http.StatusFound)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "https://")
	v := &SNSVerifier{Fetcher: HTTPSCertFetcher{Client: srv.Client()}, AllowHost: func(h string) bool { return h == host }, Topics: []string{testTopic}}
	m := notification()
	m["SigningCertURL"] = srv.URL + "/SimpleNotificationService-test.pem"
	if err := v.Verify(context.Background(), mustJSON(t, s.Sign(t, m, "2"))); err != nil {
		t.Fatal(err)
	}
	m["SigningCertURL"] = srv.URL + "/moved.pem"
	if err := v.Verify(context.Background(), mustJSON(t, s.Sign(t, m, "2"))); err == nil || !strings.Contains(err.Error(), "302") {
		t.Fatalf("err = %v, want the redirect refused", err)
	}
	// The default host check refuses the test server.
	m["SigningCertURL"] = srv.URL + "/SimpleNotificationService-test.pem"
	if err := (&SNSVerifier{Fetcher: HTTPSCertFetcher{Client: srv.Client()}, Topics: []string{testTopic}}).Verify(context.Background(), mustJSON(t, s.Sign(t, m, "2"))); !errors.Is(err, ErrSNSSignature) {
		t.Fatalf("err = %v", err)
	}
}
