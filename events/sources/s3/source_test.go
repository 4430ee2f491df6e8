package s3

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"

	"github.com/snapflow/snapflow/events"
	"github.com/snapflow/snapflow/events/snstest"
)

// An SNS delivery reaches the sink only when its signature verifies; the
// sender learns why it was refused.
func TestSourceS3VerifiesSNS(t *testing.T) {
	var mu sync.Mutex
	var forwarded []string
	sinkSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		forwarded = append(forwarded, r.Header.Get("Ce-Subject"))
		mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	}))
	defer sinkSrv.Close()

	signer := snstest.NewSigner(t)
	const message = `{"Records":[{"eventName":"ObjectCreated:Put","s3":{"bucket":{"name":"kb-backups"},"object":{"key":"pvc-x/a+b"}}}]}`
	signed := signer.Notification(t, message, "2")
	tampered := strings.Replace(string(signed), `pvc-x`, `pvc-y`, 1)
	otherHost := strings.Replace(string(signed), "sns.us-east-1.amazonaws.com", "sns.attacker.example", 1)

	tests := []struct {
		name      string
		verify    bool
		body      string
		status    int
		reason    string
		forwarded bool
		topics    []string // --sns-topic-arn (nil: the signer's topic)
	}{
		{name: "signed notification", verify: true, body: string(signed), status: http.StatusOK, forwarded: true},
		{name: "tampered message", verify: true, body: tampered, status: http.StatusForbidden, reason: "signature mismatch"},
		{name: "certificate host not allowed", verify: true, body: otherHost, status: http.StatusForbidden, reason: "is not allowed"},
		{name: "unsigned envelope", verify: true, body: `{"Type":"Notification","TopicArn":"t","Message":` + jsonString(message) + `}`, status: http.StatusForbidden, reason: "unsigned"},
		{name: "listed topics refuse an unsigned records body", verify: true, body: message, status: http.StatusForbidden, reason: "only notifications inside a signed SNS envelope"},
		{name: "listed topics refuse an unsigned SQS body", verify: true, body: `{"MessageId":"m","Body":` + jsonString(message) + `}`, status: http.StatusForbidden, reason: "only notifications inside a signed SNS envelope"},
		{name: "listed topics take a signed envelope inside SQS", verify: true, body: `{"MessageId":"m","Body":` + jsonString(string(signed)) + `}`, status: http.StatusOK, forwarded: true},
		{name: "--sns-verify=false accepts the tampered message", verify: false, body: tampered, status: http.StatusOK, forwarded: true},
		{name: "signed by a topic not listed", verify: true, topics: []string{"arn:aws:sns:us-east-1:123456789012:other"}, body: string(signed), status: http.StatusForbidden, reason: "not in the SNS topic allowlist"},
		{name: "no --sns-topic-arn refuses sns", verify: true, topics: []string{}, body: string(signed), status: http.StatusForbidden, reason: "no SNS topic is trusted"},
		{name: "no --sns-topic-arn still forwards other formats", verify: true, topics: []string{}, body: message, status: http.StatusOK, forwarded: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mu.Lock()
			forwarded = nil
			mu.Unlock()
			topics := []string{snstest.Topic}
			if tt.topics != nil {
				topics = tt.topics
			}
			src, err := New(Options{Sinks: []string{sinkSrv.URL}, VerifySNS: tt.verify, SNSTopics: topics}, logr.Discard())
			if err != nil {
				t.Fatal(err)
			}
			if tt.verify {
				if src.decoder.SNS == nil || strings.Join(src.decoder.SNS.Topics, ",") != strings.Join(topics, ",") {
					t.Fatalf("verification is not on with the topics %v: %+v", topics, src.decoder.SNS)
				}
				src.decoder.SNS = &events.SNSVerifier{Fetcher: signer.Fetcher(), Topics: topics}
			} else if src.decoder.SNS != nil {
				t.Fatal("--sns-verify=false left verification on")
			}
			srv := httptest.NewServer(src)
			defer srv.Close()
			resp, err := http.Post(srv.URL, "text/plain; charset=UTF-8", strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.status || !strings.Contains(string(b), tt.reason) {
				t.Fatalf("%d %s, want %d naming %q", resp.StatusCode, b, tt.status, tt.reason)
			}
			mu.Lock()
			defer mu.Unlock()
			if tt.forwarded != (len(forwarded) == 1) {
				t.Fatalf("forwarded %v", forwarded)
			}
			if tt.forwarded && !strings.HasPrefix(forwarded[0], "pvc-") {
				t.Fatalf("subject %q", forwarded[0])
			}
		})
	}
}

func jsonString(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`)
	return `"` + r.Replace(s) + `"`
}

// A sink that refuses a record has seen it: the notification is answered
// as handled, so SNS does not deliver it again; a sink that cannot be
// reached gets the sender to retry.
func TestSourceS3SinkRefusalIsFinal(t *testing.T) {
	const body = `{"Records":[{"eventName":"ObjectCreated:Put","s3":{"bucket":{"name":"kb-backups"},"object":{"key":"pvc-x/a"}}}]}`
	for _, tt := range []struct {
		name       string
		sinkStatus int
		want       int
	}{
		{"refused", http.StatusBadRequest, http.StatusOK},
		{"server error", http.StatusInternalServerError, http.StatusBadGateway},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sinkSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(tt.sinkStatus) }))
			defer sinkSrv.Close()
			src, err := New(Options{Sinks: []string{sinkSrv.URL}}, logr.Discard())
			if err != nil {
				t.Fatal(err)
			}
			rec := httptest.NewRecorder()
			src.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body)))
			if rec.Code != tt.want {
				t.Fatalf("status %d, want %d: %s", rec.Code, tt.want, rec.Body.String())
			}
		})
	}
}
