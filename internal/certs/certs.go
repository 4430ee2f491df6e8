// Package certs mints and renews the webhook's serving certificates: a CA the
// API server trusts through the webhook configurations' caBundle, and a leaf
// signed by it. It has no clock: callers pass now, so rotation is testable.
package certs

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"
)

// Secret keys, the kubernetes.io/tls layout plus the CA.
const (
	KeyCACert = "ca.crt"
	KeyCAKey  = "ca.key"
	KeyCert   = "tls.crt"
	KeyKey    = "tls.key"
)

// Policy says how long certificates live and when they are renewed.
type Policy struct {
	CAValidity, LeafValidity time.Duration
	// Renew a certificate once less than this remains.
	CARenewBefore, LeafRenewBefore time.Duration
}

// DefaultPolicy is a 10-year CA and a 1-year leaf renewed 90 days before expiry.
var DefaultPolicy = Policy{
	CAValidity: 10 * 365 * 24 * time.Hour, LeafValidity: 365 * 24 * time.Hour,
	CARenewBefore: 365 * 24 * time.Hour, LeafRenewBefore: 90 * 24 * time.Hour,
}

// Bundle is PEM material as stored in the Secret.
type Bundle struct {
	CACert, CAKey, Cert, Key []byte
	// PreviousCA is kept in the caBundle for one leaf lifetime after a CA
	// rotation, so a replica still serving the old leaf stays trusted.
	PreviousCA []byte
}

// FromData reads a bundle from Secret data; missing keys stay empty.
func FromData(data map[string][]byte) Bundle {
	return Bundle{CACert: data[KeyCACert], CAKey: data[KeyCAKey], Cert: data[KeyCert], Key: data[KeyKey], PreviousCA: data["ca-previous.crt"]}
}

// Data is the bundle as Secret data.
func (b Bundle) Data() map[string][]byte {
	d := map[string][]byte{KeyCACert: b.CACert, KeyCAKey: b.CAKey, KeyCert: b.Cert, KeyKey: b.Key}
	if len(b.PreviousCA) > 0 {
		d["ca-previous.crt"] = b.PreviousCA
	}
	return d
}

// CABundle is what the API server should trust.
func (b Bundle) CABundle() []byte {
	return append(append([]byte(nil), b.CACert...), b.PreviousCA...)
}

// TLSCertificate is the serving certificate.
func (b Bundle) TLSCertificate() (*tls.Certificate, error) {
	c, err := tls.X509KeyPair(b.Cert, b.Key)
	if err != nil {
		return nil, fmt.Errorf("load serving certificate: %w", err)
	}
	return &c, nil
}

// Hosts are the names and addresses the leaf must cover.
type Hosts struct {
	DNSNames []string
	IPs      []net.IP
}

// Action is what Plan decides.
type Action int

const (
	Keep Action = iota
	NewLeaf
	NewCA
)

func (a Action) String() string {
	return [...]string{"keep", "renew leaf", "renew CA and leaf"}[a]
}

// Plan decides whether b can keep serving at now.
func Plan(b Bundle, hosts Hosts, p Policy, now time.Time) (Action, string) {
	ca, err := parseCert(b.CACert)
	if err != nil {
		return NewCA, "no usable CA: " + err.Error()
	}
	if _, err := parseKey(b.CAKey); err != nil {
		return NewCA, "no usable CA key: " + err.Error()
	}
	if now.After(ca.NotAfter.Add(-p.CARenewBefore)) {
		return NewCA, fmt.Sprintf("CA expires %s", ca.NotAfter.Format(time.RFC3339))
	}
	leaf, err := parseCert(b.Cert)
	if err != nil {
		return NewLeaf, "no usable serving certificate: " + err.Error()
	}
	if _, err := tls.X509KeyPair(b.Cert, b.Key); err != nil {
		return NewLeaf, "serving key does not match: " + err.Error()
	}
	if err := leaf.CheckSignatureFrom(ca); err != nil {
		return NewLeaf, "serving certificate is not signed by the CA"
	}
	if now.After(leaf.NotAfter.Add(-p.LeafRenewBefore)) {
		return NewLeaf, fmt.Sprintf("serving certificate expires %s", leaf.NotAfter.Format(time.RFC3339))
	}
	if !covers(leaf, hosts) {
		return NewLeaf, "serving certificate does not cover every host name"
	}
	return Keep, ""
}

// Apply carries out an action and returns the new bundle.
func Apply(b Bundle, a Action, hosts Hosts, p Policy, now time.Time) (Bundle, error) {
	switch a {
	case Keep:
		return b, nil
	case NewCA:
		prev := b.CACert
		if _, err := parseCert(prev); err != nil {
			prev = nil
		}
		caCert, caKey, err := newCA(p, now)
		if err != nil {
			return Bundle{}, err
		}
		b = Bundle{CACert: caCert, CAKey: caKey, PreviousCA: prev}
	}
	ca, err := parseCert(b.CACert)
	if err != nil {
		return Bundle{}, err
	}
	caKey, err := parseKey(b.CAKey)
	if err != nil {
		return Bundle{}, err
	}
	cert, key, err := newLeaf(ca, caKey, hosts, p, now)
	if err != nil {
		return Bundle{}, err
	}
	b.Cert, b.Key = cert, key
	return b, nil
}

func covers(leaf *x509.Certificate, h Hosts) bool {
	for _, n := range h.DNSNames {
		if leaf.VerifyHostname(n) != nil {
			return false
		}
	}
	for _, ip := range h.IPs {
		if leaf.VerifyHostname(ip.String()) != nil {
			return false
		}
	}
	return true
}

func serial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

func newCA(p Policy, now time.Time) ([]byte, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate CA key: %w", err)
	}
	sn, err := serial()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: "snapflow-webhook-ca", Organization: []string{"snapflow"}},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(p.CAValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("sign CA: %w", err)
	}
	return encode(der, key)
}

func newLeaf(ca *x509.Certificate, caKey *ecdsa.PrivateKey, h Hosts, p Policy, now time.Time) ([]byte, []byte, error) {
	if len(h.DNSNames) == 0 && len(h.IPs) == 0 {
		return nil, nil, errors.New("a serving certificate needs at least one DNS name or IP address")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate serving key: %w", err)
	}
	sn, err := serial()
	if err != nil {
		return nil, nil, err
	}
	notAfter := now.Add(p.LeafValidity)
	if notAfter.After(ca.NotAfter) {
		notAfter = ca.NotAfter
	}
	cn := "snapflow-webhook"
	if len(h.DNSNames) > 0 {
		cn = h.DNSNames[0]
	}
	tmpl := &x509.Certificate{
		SerialNumber: sn,
		Subject:      pkix.Name{CommonName: cn},
		DNSNames:     h.DNSNames,
		IPAddresses:  h.IPs,
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("sign serving certificate: %w", err)
	}
	return encode(der, key)
}

func encode(der []byte, key *ecdsa.PrivateKey) ([]byte, []byte, error) {
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("encode key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), nil
}

func parseCert(b []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(bytes.TrimSpace(b))
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("no PEM certificate")
	}
	return x509.ParseCertificate(block.Bytes)
}

func parseKey(b []byte) (*ecdsa.PrivateKey, error) {
	block, _ := pem.Decode(bytes.TrimSpace(b))
	if block == nil {
		return nil, errors.New("no PEM key")
	}
	return x509.ParseECPrivateKey(block.Bytes)
}
