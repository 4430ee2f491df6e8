// Package snstest signs SNS messages with a self-made certificate, so tests
// of anything that verifies SNS signatures run without AWS. The string to
// sign is built here independently of the verifier in package events.
package snstest

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1" //nolint:gosec // SignatureVersion 1 is SHA1withRSA
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"strings"
	"sync"
	"testing"
	"time"
)

// CertURL is the SigningCertURL Sign sets when the message has none; its
// host passes the verifier's default SNS host check.
const CertURL = "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-snstest.pem"

// Signer is an RSA key and its self-signed certificate, valid from an hour
// ago for a day.
type Signer struct {
	Key     *rsa.PrivateKey
	CertPEM []byte
}

var (
	once   sync.Once
	shared *Signer
	errNew error
)

// NewSigner returns the package's signer; the key is generated once per
// test binary, since RSA generation is slow.
func NewSigner(tb testing.TB) *Signer {
	tb.Helper()
	once.Do(func() {
		key, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			errNew = err
			return
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sns.amazonaws.com"},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour)}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			errNew = err
			return
		}
		shared = &Signer{Key: key, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
	})
	if errNew != nil {
		tb.Fatalf("snstest signer: %v", errNew)
	}
	return shared
}

// Sign returns a copy of msg with SignatureVersion, SigningCertURL (unless
// set) and Signature over AWS's documented string to sign.
func (s *Signer) Sign(tb testing.TB, msg map[string]any, version string) map[string]any {
	tb.Helper()
	out := make(map[string]any, len(msg)+3)
	for k, v := range msg {
		out[k] = v
	}
	keys := []string{"Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type"}
	if msg["Type"] == "Notification" {
		keys = []string{"Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type"}
	}
	var b strings.Builder
	for _, k := range keys {
		if v, ok := msg[k].(string); ok {
			b.WriteString(k + "\n" + v + "\n")
		}
	}
	var sig []byte
	var err error
	switch version {
	case "1":
		d := sha1.Sum([]byte(b.String())) //nolint:gosec // see the import
		sig, err = rsa.SignPKCS1v15(rand.Reader, s.Key, crypto.SHA1, d[:])
	case "2":
		d := sha256.Sum256([]byte(b.String()))
		sig, err = rsa.SignPKCS1v15(rand.Reader, s.Key, crypto.SHA256, d[:])
	default:
		tb.Fatalf("snstest: SignatureVersion %q: want 1 or 2", version)
	}
	if err != nil {
		tb.Fatal(err)
	}
	out["SignatureVersion"] = version
	if _, ok := out["SigningCertURL"]; !ok {
		out["SigningCertURL"] = CertURL
	}
	out["Signature"] = base64.StdEncoding.EncodeToString(sig)
	return out
}

// Notification is a signed SNS Notification carrying message (an S3
// notification body), as SNS POSTs it to an HTTP(S) subscription.
func (s *Signer) Notification(tb testing.TB, message, version string) []byte {
	tb.Helper()
	m := s.Sign(tb, map[string]any{
		"Type": "Notification", "MessageId": "22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324",
		"TopicArn": Topic, "Subject": "Amazon S3 Notification",
		"Message": message, "Timestamp": time.Now().UTC().Format("2006-01-02T15:04:05.000Z"),
	}, version)
	b, err := json.Marshal(m)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// Fetcher serves the signer's certificate for every URL and records the
// URLs asked for; it satisfies events.CertFetcher.
type Fetcher struct {
	PEM []byte
	// Err, when set, fails every download.
	Err error

	mu   sync.Mutex
	urls []string
}

// Fetcher returns a fetcher of s's certificate.
func (s *Signer) Fetcher() *Fetcher { return &Fetcher{PEM: s.CertPEM} }

// FetchCert implements events.CertFetcher.
func (f *Fetcher) FetchCert(_ context.Context, u string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.urls = append(f.urls, u)
	return f.PEM, f.Err
}

// Asked returns the URLs fetched so far.
func (f *Fetcher) Asked() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.urls...)
}

// Topic is the TopicArn of the notifications this package signs.
const Topic = "arn:aws:sns:us-east-1:123456789012:kb-backups-events"
