package events

import (
	"container/list"
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha1" //nolint:gosec // SNS SignatureVersion 1 is SHA1withRSA by definition
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"
)

// ErrSNSSignature marks an SNS message whose signature cannot be trusted:
// unsigned, an unknown SignatureVersion, a signing certificate from a host
// that is not SNS, or a signature that does not match. It is the sender's
// fault (4xx): redelivering the same message cannot fix it.
var ErrSNSSignature = errors.New("sns signature rejected")

func snsRejected(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrSNSSignature, fmt.Sprintf(format, args...))
}

// CertFetcher returns the PEM signing certificate at an SNS SigningCertURL.
// The URL has passed the host check before it is asked for.
type CertFetcher interface {
	FetchCert(ctx context.Context, certURL string) ([]byte, error)
}

// maxCertPEM bounds a certificate download; SNS's are about 2 KiB.
const maxCertPEM = 64 << 10

// HTTPSCertFetcher downloads certificates over HTTPS. It follows no
// redirect, so the host check on the URL is the host that answers.
type HTTPSCertFetcher struct {
	// Client is the HTTP client (tests trust their own server with it);
	// nil is a client with a 10s timeout.
	Client *http.Client
}

// FetchCert implements CertFetcher.
func (f HTTPSCertFetcher) FetchCert(ctx context.Context, certURL string) ([]byte, error) {
	c := f.Client
	if c == nil {
		c = &http.Client{Timeout: 10 * time.Second}
	}
	noRedirect := *c
	noRedirect.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, certURL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", certURL, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxCertPEM+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", certURL, err)
	}
	if len(b) > maxCertPEM {
		return nil, fmt.Errorf("GET %s: certificate larger than %d bytes", certURL, maxCertPEM)
	}
	return b, nil
}

// snsCertHost is where SNS publishes its signing certificates.
var snsCertHost = regexp.MustCompile(`^sns\.[a-z0-9-]+\.amazonaws\.com(\.cn)?$`)

// IsSNSHost says whether host (as in a URL, so with any port) is an SNS
// regional endpoint: sns.<region>.amazonaws.com or .amazonaws.com.cn.
func IsSNSHost(host string) bool { return snsCertHost.MatchString(host) }

// DefaultSNSMaxAge is the oldest message accepted: SNS's default HTTP
// delivery policy retries for well under a minute, a custom one for longer,
// so an hour keeps real retries and refuses old captures.
const DefaultSNSMaxAge = time.Hour

// snsClockSkew is how far in the future a Timestamp may be.
const snsClockSkew = 5 * time.Minute

// defaultCertCache bounds the certificates kept: SNS uses one per region
// and rotates it rarely.
const defaultCertCache = 32

// SNSVerifier checks SNS message signatures as AWS documents them
// ("Verifying the signatures of Amazon SNS messages") and that the message
// came from a topic the operator trusts: a valid signature proves only that
// some SNS topic sent it, and anyone can create one. It is safe for
// concurrent use; the zero value fetches certificates over HTTPS from SNS
// hosts only and trusts no topic.
type SNSVerifier struct {
	// Topics are the TopicArns whose messages are accepted; none trusts no
	// topic, so every SNS envelope is refused.
	Topics []string
	// Fetcher gets signing certificates; nil is HTTPSCertFetcher{}.
	Fetcher CertFetcher
	// AllowHost says whether a SigningCertURL host (with its port, if the
	// URL has one) may sign; nil is IsSNSHost. Tests point it at their
	// own server.
	AllowHost func(host string) bool
	// CacheSize bounds the certificates cached by URL (0: 32).
	CacheSize int
	// Now is the clock for certificate validity and message age; nil is
	// time.Now.
	Now func() time.Time
	// MaxAge bounds how old a message's Timestamp may be (0: DefaultSNSMaxAge),
	// so a captured notification cannot be replayed later. Within it a
	// replay is a redelivery, which the handlers absorb (they are idempotent).
	MaxAge time.Duration

	mu    sync.Mutex
	lru   *list.List // of *certEntry, most recent first
	byURL map[string]*list.Element
}

type certEntry struct {
	url  string
	cert *x509.Certificate
}

// NewSNSVerifier is a verifier for production: HTTPS, SNS hosts only, and
// messages of the listed topics only.
func NewSNSVerifier(topics ...string) *SNSVerifier { return &SNSVerifier{Topics: topics} }

// trustsTopic says whether arn is one of the verifier's topics.
func (v *SNSVerifier) trustsTopic(arn string) bool {
	for _, t := range v.Topics {
		if t == arn {
			return true
		}
	}
	return false
}

// Verify checks the signature of one SNS message: the JSON that SNS POSTs
// to an HTTP(S) subscription or that SQS and Lambda carry.
func (v *SNSVerifier) Verify(ctx context.Context, message []byte) error {
	p, err := newProbe(message)
	if err != nil {
		return Malformed("sns message is not a JSON object: %v", err)
	}
	return v.verify(ctx, p)
}

// snsSigned lists the fields, in order, whose "Name\nvalue\n" lines make
// the string SNS signs; Subject only when the message has one.
var snsSigned = map[string][]string{
	"Notification":             {"Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type"},
	"SubscriptionConfirmation": {"Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type"},
	"UnsubscribeConfirmation":  {"Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type"},
}

// snsStringToSign builds the canonical string of an SNS message. Field
// names are matched case-insensitively, since Lambda spells some
// differently (SigningCertUrl) from an HTTP delivery.
func snsStringToSign(p probe) (string, error) {
	typ := p.str("type")
	fields, ok := snsSigned[typ]
	if !ok {
		return "", Malformed("sns message Type %q is not Notification, SubscriptionConfirmation or UnsubscribeConfirmation", typ)
	}
	var b strings.Builder
	for _, f := range fields {
		k := strings.ToLower(f)
		if f == "Subject" && !p.has(k) {
			continue
		}
		if !p.has(k) {
			return "", snsRejected("unsigned: the %s lacks the signed field %s", typ, f)
		}
		b.WriteString(f + "\n" + p.str(k) + "\n")
	}
	return b.String(), nil
}

func (v *SNSVerifier) verify(ctx context.Context, p probe) error {
	sig, certURL := p.str("signature"), p.str("signingcerturl")
	if sig == "" || certURL == "" {
		return snsRejected("unsigned: the message has no Signature or SigningCertURL")
	}
	var hash crypto.Hash
	switch ver := p.str("signatureversion"); ver {
	case "1":
		hash = crypto.SHA1
	case "2":
		hash = crypto.SHA256
	default:
		return snsRejected("unknown SignatureVersion %q: want 1 (SHA1withRSA) or 2 (SHA256withRSA)", ver)
	}
	canonical, err := snsStringToSign(p)
	if err != nil {
		return err
	}
	if arn := p.str("topicarn"); !v.trustsTopic(arn) {
		if len(v.Topics) == 0 {
			return snsRejected("no SNS topic is trusted, so the message of topic %q is refused: list the topic your bucket notifies in the SNS topic allowlist (--sns-topic-arn, KBBACKUP_PRUNE_SNS_TOPIC_ARNS)", arn)
		}
		return snsRejected("topic %q is not in the SNS topic allowlist (%s)", arn, strings.Join(v.Topics, ", "))
	}
	raw, err := base64.StdEncoding.DecodeString(sig)
	if err != nil {
		return snsRejected("the Signature is not base64: %v", err)
	}
	u, err := url.Parse(certURL)
	allow := v.AllowHost
	if allow == nil {
		allow = IsSNSHost
	}
	switch {
	case err != nil:
		return snsRejected("SigningCertURL is not a URL: %v", err)
	case u.Scheme != "https":
		return snsRejected("SigningCertURL %s is not https", certURL)
	case u.User != nil || !allow(u.Host):
		return snsRejected("SigningCertURL host %q is not allowed: certificates come from sns.<region>.amazonaws.com only", u.Host)
	case !strings.HasSuffix(u.Path, ".pem"):
		return snsRejected("SigningCertURL %s does not name a .pem certificate", certURL)
	}
	cert, err := v.cert(ctx, u.String())
	if err != nil {
		return err
	}
	pub, ok := cert.PublicKey.(*rsa.PublicKey)
	if !ok {
		return snsRejected("the certificate at %s has no RSA key", certURL)
	}
	var digest []byte
	if hash == crypto.SHA1 {
		d := sha1.Sum([]byte(canonical)) //nolint:gosec // see the import
		digest = d[:]
	} else {
		d := sha256.Sum256([]byte(canonical))
		digest = d[:]
	}
	if err := rsa.VerifyPKCS1v15(pub, hash, digest, raw); err != nil {
		return snsRejected("signature mismatch: the %s %s was not signed by the certificate at %s (altered in transit or forged)",
			p.str("type"), p.str("messageid"), certURL)
	}
	return v.fresh(p)
}

// fresh refuses a signed message whose Timestamp is too old (a replay of a
// captured message) or in the future.
func (v *SNSVerifier) fresh(p probe) error {
	ts, err := time.Parse(time.RFC3339Nano, p.str("timestamp"))
	if err != nil {
		return snsRejected("the Timestamp %q is not an RFC 3339 time", p.str("timestamp"))
	}
	now := v.now()
	maxAge := v.MaxAge
	if maxAge <= 0 {
		maxAge = DefaultSNSMaxAge
	}
	switch {
	case now.Sub(ts) > maxAge:
		return snsRejected("stale: the %s %s was sent at %s, more than %s ago (a replay, or a retry policy longer than --sns-max-age or KBBACKUP_PRUNE_SNS_MAX_AGE)",
			p.str("type"), p.str("messageid"), ts.UTC().Format(time.RFC3339), maxAge)
	case ts.Sub(now) > snsClockSkew:
		return snsRejected("the %s %s is dated %s, in the future: check this node's clock", p.str("type"), p.str("messageid"), ts.UTC().Format(time.RFC3339))
	}
	return nil
}

func (v *SNSVerifier) now() time.Time {
	if v.Now != nil {
		return v.Now()
	}
	return time.Now()
}

// cert returns the certificate at certURL, from the cache when it holds
// it. A failed download is not cached, so the next delivery tries again.
func (v *SNSVerifier) cert(ctx context.Context, certURL string) (*x509.Certificate, error) {
	now := v.now()
	v.mu.Lock()
	if el, ok := v.byURL[certURL]; ok {
		v.lru.MoveToFront(el)
		c := el.Value.(*certEntry).cert
		v.mu.Unlock()
		return c, checkValidity(c, certURL, now)
	}
	v.mu.Unlock()

	fetcher := v.Fetcher
	if fetcher == nil {
		fetcher = HTTPSCertFetcher{}
	}
	// A fetch failure is ours or the network's, not the sender's: it is
	// not ErrSNSSignature, so a handler answers 5xx and SNS retries.
	pemBytes, err := fetcher.FetchCert(ctx, certURL)
	if err != nil {
		return nil, fmt.Errorf("fetch the SNS signing certificate: %w", err)
	}
	block, _ := pem.Decode(pemBytes)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, snsRejected("%s holds no PEM certificate", certURL)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, snsRejected("the certificate at %s does not parse: %v", certURL, err)
	}
	if err := checkValidity(c, certURL, now); err != nil {
		return nil, err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.byURL == nil {
		v.byURL, v.lru = map[string]*list.Element{}, list.New()
	}
	if _, ok := v.byURL[certURL]; !ok {
		v.byURL[certURL] = v.lru.PushFront(&certEntry{url: certURL, cert: c})
	}
	limit := v.CacheSize
	if limit <= 0 {
		limit = defaultCertCache
	}
	for v.lru.Len() > limit {
		old := v.lru.Back()
		v.lru.Remove(old)
		delete(v.byURL, old.Value.(*certEntry).url)
	}
	return c, nil
}

// cached reports how many certificates the verifier holds (tests).
func (v *SNSVerifier) cached() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.lru == nil {
		return 0
	}
	return v.lru.Len()
}

func checkValidity(c *x509.Certificate, certURL string, now time.Time) error {
	if now.Before(c.NotBefore) || now.After(c.NotAfter) {
		return snsRejected("the certificate at %s is valid from %s to %s only", certURL,
			c.NotBefore.UTC().Format(time.RFC3339), c.NotAfter.UTC().Format(time.RFC3339))
	}
	return nil
}
