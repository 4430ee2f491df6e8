package certs

import (
	"crypto/x509"
	"net"
	"testing"
	"time"
)

var hosts = Hosts{DNSNames: []string{"snapflow-webhook.snapflow-system.svc"}, IPs: []net.IP{net.ParseIP("127.0.0.1")}}

func TestLifecycle(t *testing.T) {
	p := Policy{CAValidity: 100 * time.Hour, CARenewBefore: 10 * time.Hour, LeafValidity: 10 * time.Hour, LeafRenewBefore: 2 * time.Hour}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

	if a, why := Plan(Bundle{}, hosts, p, t0); a != NewCA {
		t.Fatalf("empty bundle: %s (%s), want a new CA", a, why)
	}
	b, err := Apply(Bundle{}, NewCA, hosts, p, t0)
	if err != nil {
		t.Fatal(err)
	}
	if a, why := Plan(b, hosts, p, t0.Add(time.Hour)); a != Keep {
		t.Fatalf("fresh bundle: %s (%s)", a, why)
	}
	// Inside the leaf's renew window: a new leaf from the same CA.
	at := t0.Add(9 * time.Hour)
	a, _ := Plan(b, hosts, p, at)
	if a != NewLeaf {
		t.Fatalf("leaf near expiry: %s, want a new leaf", a)
	}
	b2, err := Apply(b, a, hosts, p, at)
	if err != nil {
		t.Fatal(err)
	}
	if string(b2.CACert) != string(b.CACert) || string(b2.Cert) == string(b.Cert) {
		t.Fatal("leaf renewal must keep the CA and replace the leaf")
	}
	verify(t, b2, at.Add(time.Minute))

	// A new host name (e.g. the service was renamed) needs a new leaf.
	more := Hosts{DNSNames: append([]string{"webhook.example"}, hosts.DNSNames...), IPs: hosts.IPs}
	if a, _ := Plan(b2, more, p, at.Add(time.Minute)); a != NewLeaf {
		t.Fatalf("uncovered host: %s", a)
	}

	// Inside the CA's renew window: new CA, and the old one stays trusted.
	late := t0.Add(91 * time.Hour)
	if a, _ := Plan(b2, hosts, p, late); a != NewCA {
		t.Fatalf("CA near expiry: %s", a)
	}
	b3, err := Apply(b2, NewCA, hosts, p, late)
	if err != nil {
		t.Fatal(err)
	}
	if string(b3.PreviousCA) != string(b2.CACert) {
		t.Fatal("the previous CA must stay in the bundle during the overlap")
	}
	verify(t, b3, late.Add(time.Minute))
	// The leaf never outlives its CA.
	leaf, _ := parseCert(b3.Cert)
	ca, _ := parseCert(b3.CACert)
	if leaf.NotAfter.After(ca.NotAfter) {
		t.Fatal("leaf outlives CA")
	}
	// Round trip through Secret data.
	if got := FromData(b3.Data()); string(got.CABundle()) != string(b3.CABundle()) {
		t.Fatal("Secret data round trip")
	}
}

func verify(t *testing.T, b Bundle, at time.Time) {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b.CABundle()) {
		t.Fatal("CA bundle does not parse")
	}
	leaf, err := parseCert(b.Cert)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"snapflow-webhook.snapflow-system.svc", "127.0.0.1"} {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: pool, CurrentTime: at}); err != nil {
			t.Fatalf("verify %s: %v", name, err)
		}
	}
	if _, err := b.TLSCertificate(); err != nil {
		t.Fatal(err)
	}
}

func TestPlanRejectsForeignLeaf(t *testing.T) {
	p := DefaultPolicy
	now := time.Now()
	a, _ := Apply(Bundle{}, NewCA, hosts, p, now)
	b, _ := Apply(Bundle{}, NewCA, hosts, p, now)
	mixed := a
	mixed.Cert, mixed.Key = b.Cert, b.Key
	if act, why := Plan(mixed, hosts, p, now); act != NewLeaf {
		t.Fatalf("leaf from another CA: %s (%s)", act, why)
	}
}
