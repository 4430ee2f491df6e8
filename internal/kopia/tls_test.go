package kopia_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/snapflow/snapflow/internal/certs"
	"github.com/snapflow/snapflow/internal/kopia"
	"github.com/snapflow/snapflow/test/harness"
)

// An S3 endpoint with a certificate from a private CA: kopia refuses it
// unless the repository trusts that CA (tls.caBundleRef, handed to the
// engine as RootCA) or skips verification (tls.insecureSkipVerify).
func TestS3OverTLSWithAPrivateCA(t *testing.T) {
	harness.RequireTool(t, "versitygw")
	ctx := context.Background()
	bundle, err := certs.Apply(certs.Bundle{}, certs.NewCA, certs.Hosts{IPs: []net.IP{net.ParseIP("127.0.0.1")}}, certs.DefaultPolicy, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(cert, bundle.Cert, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, bundle.Key, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := harness.StartS3(harness.S3Options{TLSCert: cert, TLSKey: key})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop() })
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(bundle.CACert)
	cli := s3.New(s3.Options{Region: s.Region, BaseEndpoint: aws.String(s.URL), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, ""),
		HTTPClient:  &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}})
	if _, err := cli.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("tls-repo")}); err != nil {
		t.Fatal(err)
	}
	backend := func(mutate func(*kopia.S3Backend)) kopia.Backend {
		b := &kopia.S3Backend{Bucket: "tls-repo", Endpoint: s.Endpoint, Region: s.Region, AccessKeyID: s.AccessKey, SecretAccessKey: s.SecretKey}
		mutate(b)
		return kopia.Backend{S3: b}
	}
	// Without the CA the certificate is not trusted: nothing is created.
	if _, err := kopia.Open(ctx, kopia.OpenOptions{Backend: backend(func(*kopia.S3Backend) {}), Password: "pw", Create: &kopia.CreateOptions{}}); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("a certificate from an untrusted CA: %v, want a certificate error", err)
	}
	// Trusting the CA, the repository is created and backs up.
	exercise(t, backend(func(b *kopia.S3Backend) { b.RootCA = bundle.CACert }))
	// Skipping verification opens it too.
	r, err := kopia.Open(ctx, kopia.OpenOptions{Backend: backend(func(b *kopia.S3Backend) { b.InsecureSkipVerify = true }), Password: "pw"})
	if err != nil {
		t.Fatalf("insecureSkipVerify: %v", err)
	}
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
}
