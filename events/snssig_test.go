package events

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1" //nolint:gosec // SignatureVersion 1
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// testSigner is a self-made SNS signing identity: an RSA key and its
// certificate, served by a fetcher that counts downloads.
type testSigner struct {
	key     *rsa.PrivateKey
	certPEM []byte
}

var (
	signerOnce sync.Once
	signer     testSigner
)

func newTestSigner(t *testing.T) testSigner {
	t.Helper()
	signerOnce.Do(func() {
		key, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sns.amazonaws.com"},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour)}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			t.Fatal(err)
		}
		signer = testSigner{key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
	})
	return signer
}

// staticFetcher serves one PEM for every URL and records the URLs asked.
type staticFetcher struct {
	mu   sync.Mutex
	pem  []byte
	urls []string
	err  error
}

func (f *staticFetcher) FetchCert(_ context.Context, u string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.urls = append(f.urls, u)
	return f.pem, f.err
}

func (f *staticFetcher) asked() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.urls...)
}

const testCertURL = "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-test.pem"

// sign sets SignatureVersion, SigningCertURL and Signature on msg, building
// the string to sign independently of the code under test.
func (s testSigner) sign(t *testing.T, msg map[string]any, version string) map[string]any {
	t.Helper()
	out := map[string]any{}
	for k, v := range msg {
		out[k] = v
	}
	keys := []string{"Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type"}
	if msg["Type"] == "Notification" {
		keys = []string{"Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type"}
	}
	var canonical strings.Builder
	for _, k := range keys {
		if v, ok := msg[k].(string); ok {
			canonical.WriteString(k + "\n" + v + "\n")
		}
	}
	var sig []byte
	var err error
	if version == "1" {
		d := sha1.Sum([]byte(canonical.String())) //nolint:gosec // SignatureVersion 1
		sig, err = rsa.SignPKCS1v15(rand.Reader, s.key, crypto.SHA1, d[:])
	} else {
		d := sha256.Sum256([]byte(canonical.String()))
		sig, err = rsa.SignPKCS1v15(rand.Reader, s.key, crypto.SHA256, d[:])
	}
	if err != nil {
		t.Fatal(err)
	}
	out["SignatureVersion"] = version
	if _, ok := out["SigningCertURL"]; !ok {
		out["SigningCertURL"] = testCertURL
	}
	out["Signature"] = base64.StdEncoding.EncodeToString(sig)
	return out
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

const s3Message = `{"Records":[{"eventName":"ObjectCreated:Put","s3":{"bucket":{"name":"kb-backups"},"object":{"key":"pvc-x/a+b"}}}]}`

func notification() map[string]any {
	return map[string]any{
		"Type": "Notification", "MessageId": "22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324", "TopicArn": "arn:aws:sns:us-east-1:123456789012:kb-backups-events",
		"Subject": "Amazon S3 Notification", "Message": s3Message, "Timestamp": "2026-11-30T10:15:00.456Z",
	}
}

func confirmation() map[string]any {
	return map[string]any{
		"Type": "SubscriptionConfirmation", "MessageId": "165545c9", "Token": "2336412f", "TopicArn": "arn:aws:sns:us-east-1:123456789012:kb-backups-events",
		"Message": "You have chosen to subscribe.", "Timestamp": "2026-11-30T09:59:00.000Z",
		"SubscribeURL": "https://sns.us-east-1.amazonaws.com/?Action=ConfirmSubscription&Token=2336412f",
	}
}

// The canonical string is AWS's documented one, byte for byte.
func TestSNSStringToSign(t *testing.T) {
	n := notification()
	delete(n, "Subject")
	p, _ := newProbe(mustJSON(t, n))
	got, err := snsStringToSign(p)
	want := "Message\n" + s3Message + "\nMessageId\n22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324\nTimestamp\n2026-11-30T10:15:00.456Z\n" +
		"TopicArn\narn:aws:sns:us-east-1:123456789012:kb-backups-events\nType\nNotification\n"
	if err != nil || got != want {
		t.Fatalf("got %q %v\nwant %q", got, err, want)
	}
	p, _ = newProbe(mustJSON(t, confirmation()))
	got, _ = snsStringToSign(p)
	want = "Message\nYou have chosen to subscribe.\nMessageId\n165545c9\nSubscribeURL\nhttps://sns.us-east-1.amazonaws.com/?Action=ConfirmSubscription&Token=2336412f\n" +
		"Timestamp\n2026-11-30T09:59:00.000Z\nToken\n2336412f\nTopicArn\narn:aws:sns:us-east-1:123456789012:kb-backups-events\nType\nSubscriptionConfirmation\n"
	if got != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
}

func TestSNSVerify(t *testing.T) {
	s := newTestSigner(t)
	tampered := s.sign(t, notification(), "2")
	tampered["Message"] = strings.Replace(s3Message, "pvc-x", "pvc-y", 1)
	noSubject := notification()
	delete(noSubject, "Subject")
	// Lambda spells SigningCertUrl so and gives a message without a
	// subject "Subject": null.
	lambdaStyle := s.sign(t, noSubject, "1")
	lambdaStyle["SigningCertUrl"], lambdaStyle["Subject"] = lambdaStyle["SigningCertURL"], nil
	delete(lambdaStyle, "SigningCertURL")
	withHost := func(u string) map[string]any {
		m := notification()
		m["SigningCertURL"] = u
		return s.sign(t, m, "2")
	}
	tests := []struct {
		name    string
		msg     map[string]any
		body    []byte // instead of msg
		records int
		subURL  bool
		reason  string // empty: accepted
		fetched bool   // the certificate was asked for
	}{
		{name: "valid v1 notification", msg: s.sign(t, notification(), "1"), records: 1, fetched: true},
		{name: "valid v2 notification", msg: s.sign(t, notification(), "2"), records: 1, fetched: true},
		{name: "valid v2 without a subject", msg: s.sign(t, noSubject, "2"), records: 1, fetched: true},
		{name: "valid v1 subscription confirmation", msg: s.sign(t, confirmation(), "1"), subURL: true, fetched: true},
		{name: "lambda spelling and a null subject", body: mustJSON(t, map[string]any{"Records": []any{map[string]any{"EventSource": "aws:sns", "Sns": lambdaStyle}}}), records: 1, fetched: true},
		{name: "sqs body wrapping a signed envelope", body: mustJSON(t, map[string]any{"Body": string(mustJSON(t, s.sign(t, notification(), "2")))}), records: 1, fetched: true},
		{name: "tampered message", msg: tampered, reason: "signature mismatch", fetched: true},
		{name: "tampered message inside sqs", body: mustJSON(t, map[string]any{"Body": string(mustJSON(t, tampered))}), reason: "signature mismatch", fetched: true},
		{name: "signed by v1, claimed v2", msg: func() map[string]any { m := s.sign(t, notification(), "1"); m["SignatureVersion"] = "2"; return m }(), reason: "signature mismatch", fetched: true},
		{name: "unsigned", msg: notification(), reason: "unsigned"},
		{name: "unknown signature version", msg: func() map[string]any { m := s.sign(t, notification(), "2"); m["SignatureVersion"] = "3"; return m }(), reason: "unknown SignatureVersion"},
		{name: "signature not base64", msg: func() map[string]any { m := s.sign(t, notification(), "2"); m["Signature"] = "EXAMPLE"; return m }(), reason: "not base64"},
		{name: "certificate on another host", msg: withHost("https://evil.example.com/SimpleNotificationService-x.pem"), reason: "host \"evil.example.com\" is not allowed"},
		{name: "certificate on a lookalike host", msg: withHost("https://sns.us-east-1.amazonaws.com.evil.example/x.pem"), reason: "is not allowed"},
		{name: "certificate on a port", msg: withHost("https://sns.us-east-1.amazonaws.com:8443/x.pem"), reason: "is not allowed"},
		{name: "certificate with userinfo", msg: withHost("https://u:p@sns.us-east-1.amazonaws.com/x.pem"), reason: "is not allowed"},
		{name: "certificate over http", msg: withHost("http://sns.us-east-1.amazonaws.com/x.pem"), reason: "is not https"},
		{name: "certificate that is not a pem", msg: withHost("https://sns.us-east-1.amazonaws.com/?Action=x"), reason: ".pem"},
		{name: "china partition allowed", msg: withHost("https://sns.cn-north-1.amazonaws.com.cn/SimpleNotificationService-x.pem"), records: 1, fetched: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &staticFetcher{pem: s.certPEM}
			body := tt.body
			if body == nil {
				body = mustJSON(t, tt.msg)
			}
			n, err := S3Decoder{SNS: &SNSVerifier{Fetcher: f}}.Decode(context.Background(), body)
			if tt.fetched != (len(f.asked()) == 1) {
				t.Errorf("certificate downloads %v, want fetched=%t", f.asked(), tt.fetched)
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
	f := &staticFetcher{pem: newTestSigner(t).certPEM}
	for _, file := range []string{"sns-notification.json", "sns-subscription-confirmation.json", "lambda-sqs-sns-batch.json"} {
		body, err := os.ReadFile(filepath.Join("testdata", file))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := (S3Decoder{SNS: &SNSVerifier{Fetcher: f}}).Decode(context.Background(), body); !errors.Is(err, ErrSNSSignature) {
			t.Errorf("%s: err = %v, want ErrSNSSignature", file, err)
		}
	}
	// Bodies SNS did not wrap have nothing to verify.
	body, _ := os.ReadFile(filepath.Join("testdata", "aws-put.json"))
	if n, err := (S3Decoder{SNS: &SNSVerifier{Fetcher: f}}).Decode(context.Background(), body); err != nil || len(n.Records) != 1 {
		t.Fatalf("%+v %v", n, err)
	}
}

func TestSNSCertificateCache(t *testing.T) {
	s := newTestSigner(t)
	f := &staticFetcher{pem: s.certPEM}
	v := &SNSVerifier{Fetcher: f, CacheSize: 2}
	msgFor := func(region string) []byte {
		m := notification()
		m["SigningCertURL"] = "https://sns." + region + ".amazonaws.com/SimpleNotificationService-x.pem"
		return mustJSON(t, s.sign(t, m, "2"))
	}
	for _, region := range []string{"us-east-1", "us-east-1", "eu-west-1", "us-east-1", "ap-south-1", "eu-west-1"} {
		if err := v.Verify(context.Background(), msgFor(region)); err != nil {
			t.Fatal(err)
		}
	}
	// us-east-1 once; eu-west-1, then again after ap-south-1 pushed it out.
	if got := len(f.asked()); got != 4 || v.cached() != 2 {
		t.Fatalf("%d downloads %v, %d cached", got, f.asked(), v.cached())
	}

	// A download that fails is ours to retry (5xx), not the sender's fault,
	// and is not cached.
	bad := &SNSVerifier{Fetcher: &staticFetcher{err: errors.New("connection refused")}}
	err := bad.Verify(context.Background(), msgFor("us-east-1"))
	if err == nil || IsClientError(err) || !strings.Contains(err.Error(), "fetch the SNS signing certificate") || bad.cached() != 0 {
		t.Fatalf("err = %v, cached %d", err, bad.cached())
	}
	// A certificate out of its validity is refused.
	late := &SNSVerifier{Fetcher: f, Now: func() time.Time { return time.Now().Add(48 * time.Hour) }}
	if err := late.Verify(context.Background(), msgFor("us-east-1")); !errors.Is(err, ErrSNSSignature) || !strings.Contains(err.Error(), "valid from") {
		t.Fatalf("err = %v", err)
	}
	// A body that is no certificate is refused.
	junk := &SNSVerifier{Fetcher: &staticFetcher{pem: []byte("<html>")}}
	if err := junk.Verify(context.Background(), msgFor("us-east-1")); !errors.Is(err, ErrSNSSignature) || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Fatalf("err = %v", err)
	}
}

// The HTTPS fetcher downloads the certificate from an allowed host and
// follows no redirect away from it.
func TestHTTPSCertFetcher(t *testing.T) {
	s := newTestSigner(t)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/SimpleNotificationService-test.pem":
			_, _ = w.Write(s.certPEM)
		case "/moved.pem":
			http.Redirect(w, r, "https://evil.example.com/x.pem", http.StatusFound)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "https://")
	v := &SNSVerifier{Fetcher: HTTPSCertFetcher{Client: srv.Client()}, AllowHost: func(h string) bool { return h == host }}
	m := notification()
	m["SigningCertURL"] = srv.URL + "/SimpleNotificationService-test.pem"
	if err := v.Verify(context.Background(), mustJSON(t, s.sign(t, m, "2"))); err != nil {
		t.Fatal(err)
	}
	m["SigningCertURL"] = srv.URL + "/moved.pem"
	if err := v.Verify(context.Background(), mustJSON(t, s.sign(t, m, "2"))); err == nil || !strings.Contains(err.Error(), "302") {
		t.Fatalf("err = %v, want the redirect refused", err)
	}
	// The default host check refuses the test server.
	m["SigningCertURL"] = srv.URL + "/SimpleNotificationService-test.pem"
	if err := (&SNSVerifier{Fetcher: HTTPSCertFetcher{Client: srv.Client()}}).Verify(context.Background(), mustJSON(t, s.sign(t, m, "2"))); !errors.Is(err, ErrSNSSignature) {
		t.Fatalf("err = %v", err)
	}
}
