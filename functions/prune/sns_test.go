package prune

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/snapflow/snapflow/events"
	"github.com/snapflow/snapflow/events/snstest"
	"github.com/snapflow/snapflow/functions/host"
)

func TestFromEnvSNSVerify(t *testing.T) {
	for _, tt := range []struct {
		value string
		skip  bool
		bad   bool
	}{{"", false, false}, {"true", false, false}, {"false", true, false}, {"maybe", false, true}} {
		s, err := FromEnv(func(k string) string {
			if k == "KBBACKUP_PRUNE_SNS_VERIFY" {
				return tt.value
			}
			return ""
		})
		if tt.bad != (err != nil) || err != nil && !strings.Contains(err.Error(), "SNS_VERIFY") || s.SkipSNSVerify != tt.skip {
			t.Errorf("SNS_VERIFY=%q: skip %t err %v", tt.value, s.SkipSNSVerify, err)
		}
	}
}

func TestFromEnvSNSTopics(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "KBBACKUP_PRUNE_SNS_TOPIC_ARNS" {
				return v
			}
			return ""
		}
	}
	s, err := FromEnv(env(" arn:aws:sns:us-east-1:1:a, ,arn:aws-cn:sns:cn-north-1:2:b "))
	if err != nil || strings.Join(s.SNSTopics, " ") != "arn:aws:sns:us-east-1:1:a arn:aws-cn:sns:cn-north-1:2:b" {
		t.Fatalf("topics %q err %v", s.SNSTopics, err)
	}
	if _, err := FromEnv(env("kb-backups-events")); err == nil || !strings.Contains(err.Error(), "SNS_TOPIC_ARNS") || !strings.Contains(err.Error(), "not an SNS topic ARN") {
		t.Fatalf("a bare topic name: err %v, want one naming SNS_TOPIC_ARNS", err)
	}
}

func TestFromEnvSNSMaxAge(t *testing.T) {
	for _, tt := range []struct {
		value   string
		want    time.Duration
		wantErr bool
	}{
		{"", 0, false},
		{"3h", 3 * time.Hour, false},
		{"an hour", 0, true},
	} {
		s, err := FromEnv(func(k string) string {
			if k == "KBBACKUP_PRUNE_SNS_MAX_AGE" {
				return tt.value
			}
			return ""
		})
		if (err != nil) != tt.wantErr || s.SNSMaxAge != tt.want {
			t.Errorf("SNS_MAX_AGE=%q: max age %s err %v, want %s (error %v)", tt.value, s.SNSMaxAge, err, tt.want, tt.wantErr)
		}
		if err != nil && !strings.Contains(err.Error(), "SNS_MAX_AGE") {
			t.Errorf("SNS_MAX_AGE=%q: error %v does not name the variable", tt.value, err)
		}
	}
}

// An S3 adapter event whose data is an SNS envelope (SNS to SQS without raw
// delivery) is acknowledged over HTTP when signed and refused with 400
// naming the reason when tampered with, unless verification is off.
func TestHandleS3VerifiesSNSOverHTTP(t *testing.T) {
	signer := snstest.NewSigner(t)
	const message = `{"Records":[{"eventName":"ObjectCreated:Put","s3":{"bucket":{"name":"kb-backups"},"object":{"key":"` + root + `/x"}}}]}`
	signed := string(signer.Notification(t, message, "1"))
	tampered := strings.Replace(signed, root+"/x", root+"/y", 1)
	tests := []struct {
		name   string
		skip   bool
		body   string
		status int
		reason string
		// fetched: the signing certificate was asked for.
		fetched bool
		// topics the deployment trusts (nil: the signer's topic).
		topics []string
	}{
		{name: "signed", body: signed, status: http.StatusOK, fetched: true},
		{name: "tampered", body: tampered, status: http.StatusBadRequest, reason: "signature mismatch", fetched: true},
		{name: "unknown signature version", body: strings.Replace(signed, `"SignatureVersion":"1"`, `"SignatureVersion":"9"`, 1), status: http.StatusBadRequest, reason: "unknown SignatureVersion"},
		{name: "verification off", skip: true, body: tampered, status: http.StatusOK},
		{name: "signed by a topic the deployment does not trust", topics: []string{"arn:aws:sns:us-east-1:123456789012:someone-elses"}, body: signed, status: http.StatusBadRequest, reason: "not in the SNS topic allowlist"},
		{name: "no topic configured", topics: []string{}, body: signed, status: http.StatusBadRequest, reason: "no SNS topic is trusted"},
		{name: "unsigned records once topics are listed", body: message, status: http.StatusBadRequest, reason: "only notifications inside a signed SNS envelope"},
		{name: "unsigned records without topics", topics: []string{}, body: message, status: http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// No BackupRepo: a notification that decodes asks for no work,
			// so the status is the verifier's alone.
			fetcher := signer.Fetcher()
			topics := []string{snstest.Topic}
			if tt.topics != nil {
				topics = tt.topics
			}
			f := &Function{Settings: Settings{SkipSNSVerify: tt.skip, SNSTopics: topics}, SNS: &events.SNSVerifier{Fetcher: fetcher}}
			ctx, cancel := context.WithCancel(context.Background())
			listening := make(chan string, 1)
			done := make(chan error, 1)
			go func() {
				done <- host.Serve(ctx, host.Options{Addr: "127.0.0.1:0", Functions: []host.Function{{Name: "prune", Handle: f.Handle}},
					Log: logr.Discard(), Listening: listening})
			}()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					t.Error(err)
				}
			}()
			var addr string
			select {
			case addr = <-listening:
			case err := <-done:
				t.Fatal(err)
			case <-time.After(10 * time.Second):
				t.Fatal("the function did not start")
			}
			req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/", strings.NewReader(tt.body))
			req.Header.Set("Ce-Specversion", "1.0")
			req.Header.Set("Ce-Type", events.S3TypePrefix+"ObjectCreated:Put")
			req.Header.Set("Ce-Source", "arn:aws:sqs:us-east-1:123456789012:kb-backups-events")
			req.Header.Set("Ce-Id", "m-1")
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.status || !strings.Contains(string(b), tt.reason) {
				t.Fatalf("%d %s, want %d naming %q", resp.StatusCode, b, tt.status, tt.reason)
			}
			if asked := fetcher.Asked(); tt.fetched != (len(asked) == 1) {
				t.Fatalf("certificate downloads %v, want fetched=%t", asked, tt.fetched)
			}
		})
	}
}
