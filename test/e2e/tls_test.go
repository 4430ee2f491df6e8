package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/snapflow/snapflow/internal/certs"
	"github.com/snapflow/snapflow/test/harness"
	"github.com/snapflow/snapflow/webhook"
)

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// The self-managed certificate is stored in a Secret, served without a
// restart when it is renewed, and its CA follows into the caBundle.
func TestCertificateRotation(t *testing.T) {
	ctx := context.Background()
	cfgName := "rotation-test"
	none := admissionregv1.SideEffectClassNone
	cfg := &admissionregv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: cfgName},
		Webhooks: []admissionregv1.MutatingWebhook{{
			Name: "things.rotation.test", AdmissionReviewVersions: []string{"v1"}, SideEffects: &none,
			ClientConfig: admissionregv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:1/never")},
			Rules: []admissionregv1.RuleWithOperations{{Operations: []admissionregv1.OperationType{admissionregv1.Create},
				Rule: admissionregv1.Rule{APIGroups: []string{"rotation.test"}, APIVersions: []string{"v1"}, Resources: []string{"things"}}}},
		}},
	}
	if err := env.Client.Create(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{t: time.Now()}
	self := &webhook.SelfTLS{
		Client: env.Client, Namespace: harness.WebhookNamespace, SecretName: "rotation-test-tls",
		Hosts:           certs.Hosts{DNSNames: []string{"snapflow-webhook.snapflow-system.svc"}, IPs: []net.IP{net.ParseIP("127.0.0.1")}},
		Policy:          certs.Policy{CAValidity: 100 * time.Hour, CARenewBefore: 10 * time.Hour, LeafValidity: 10 * time.Hour, LeafRenewBefore: 2 * time.Hour},
		MutatingConfigs: []string{cfgName}, Interval: 20 * time.Millisecond, Log: logr.Discard(), Now: clock.Now,
	}
	if err := self.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	// One listener for the whole test: renewals must reach it without a restart.
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{GetCertificate: self.GetCertificate})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), ReadHeaderTimeout: time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	caBundle := func() []byte {
		var got admissionregv1.MutatingWebhookConfiguration
		if err := env.Client.Get(ctx, client.ObjectKey{Name: cfgName}, &got); err != nil {
			t.Fatal(err)
		}
		return got.Webhooks[0].ClientConfig.CABundle
	}
	// served connects as the API server would: trusting only the caBundle.
	served := func() *x509.Certificate {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caBundle()) {
			t.Fatal("caBundle was not written")
		}
		conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", Time: clock.Now})
		if err != nil {
			t.Fatalf("TLS with the caBundle: %v", err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0]
	}
	first := served()

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _ = self.Start(runCtx) }()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(harness.Timeout(10 * time.Second))
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	// Into the leaf's renewal window: the running loop renews the leaf and the
	// same listener serves it; the CA, and so the caBundle, stays.
	bundleBefore := string(caBundle())
	clock.Add(9 * time.Hour)
	waitFor("the leaf to be renewed", func() bool { return served().SerialNumber.Cmp(first.SerialNumber) != 0 })
	second := served()
	if second.Issuer.String() != first.Issuer.String() || string(caBundle()) != bundleBefore {
		t.Fatal("a leaf renewal must keep the CA")
	}
	if !second.NotAfter.After(first.NotAfter) {
		t.Fatal("the renewed leaf should live longer")
	}

	// Into the CA's renewal window: a new CA, trusted alongside the old one.
	clock.Add(82 * time.Hour)
	waitFor("the CA to be renewed", func() bool { return string(caBundle()) != bundleBefore })
	third := served()
	if third.SerialNumber.Cmp(second.SerialNumber) == 0 {
		t.Fatal("a CA renewal must issue a new leaf")
	}
	if n := len(certsIn(caBundle())); n != 2 {
		t.Fatalf("caBundle holds %d CAs during the overlap, want 2", n)
	}
}

func certsIn(pemBytes []byte) []*x509.Certificate {
	var out []*x509.Certificate
	for c, rest := parseOne(pemBytes); c != nil; c, rest = parseOne(rest) {
		out = append(out, c)
	}
	return out
}

func parseOne(b []byte) (*x509.Certificate, []byte) {
	block, rest := pem.Decode(b)
	if block == nil {
		return nil, nil
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, nil
	}
	return c, rest
}

// With --tls-cert/--tls-key (e.g. from cert-manager) the webhook serves the
// files and picks up a renewed pair without a restart.
func TestCertificateFiles(t *testing.T) {
	dir := t.TempDir()
	hosts := certs.Hosts{IPs: []net.IP{net.ParseIP("127.0.0.1")}}
	writePair := func() certs.Bundle {
		b, err := certs.Apply(certs.Bundle{}, certs.NewCA, hosts, certs.DefaultPolicy, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		must := func(err error) {
			if err != nil {
				t.Fatal(err)
			}
		}
		must(os.WriteFile(filepath.Join(dir, "tls.key.new"), b.Key, 0o600))
		must(os.WriteFile(filepath.Join(dir, "tls.crt.new"), b.Cert, 0o600))
		must(os.Rename(filepath.Join(dir, "tls.key.new"), filepath.Join(dir, "tls.key")))
		must(os.Rename(filepath.Join(dir, "tls.crt.new"), filepath.Join(dir, "tls.crt")))
		return b
	}
	first := writePair()
	ports, err := harness.FreePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- webhook.Run(ctx, env.Config, webhook.Options{
			Host: "127.0.0.1", Port: ports[0], Namespace: harness.WebhookNamespace,
			TLSCertFile: filepath.Join(dir, "tls.crt"), TLSKeyFile: filepath.Join(dir, "tls.key"),
			MetricsAddr: fmt.Sprintf("127.0.0.1:%d", ports[1]), HealthAddr: fmt.Sprintf("127.0.0.1:%d", ports[2]),
			Log: logr.Discard(),
		})
	}()
	defer func() {
		cancel()
		<-done
	}()
	servedBy := func(b certs.Bundle) bool {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(b.CABundle())
		conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", ports[0]), &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
		if err != nil {
			return false
		}
		conn.Close()
		return true
	}
	deadline := time.Now().Add(harness.Timeout(20 * time.Second))
	for !servedBy(first) {
		if time.Now().After(deadline) {
			t.Fatal("the webhook did not serve the certificate files")
		}
		time.Sleep(50 * time.Millisecond)
	}
	second := writePair()
	for !servedBy(second) {
		if time.Now().After(deadline.Add(20 * time.Second)) {
			t.Fatal("the webhook did not pick up the renewed files")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if servedBy(first) {
		t.Fatal("the old certificate is still served")
	}
}
