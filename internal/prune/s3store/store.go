// Package s3store is the S3 adapter of the orphan-pruning tool: delimiter
// and version listings, bounded manifest reads, the bucket versioning query
// and Multi-Object Delete with Content-MD5, for AWS S3, S3-compatible servers
// and the Cloud Storage XML API.
//
// The adapter makes no decision: every listing is filtered through the
// planner's whole-segment Contains and handed to internal/prune.
package s3store

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// DefaultRegion is used when neither a flag, the Secret nor the repo config
// names one.
const DefaultRegion = "us-east-1"

// Config is everything needed to reach the bucket.
type Config struct {
	Bucket string
	// Endpoint is an absolute URL; empty means the SDK's AWS endpoint.
	Endpoint string
	Region   string
	// PathStyle selects path-style addressing; virtual-hosted otherwise.
	PathStyle bool
	// CAFile is a PEM bundle added to the system pool.
	CAFile                string
	InsecureSkipTLSVerify bool
	// Credentials signs every request; nil means DefaultChain.
	Credentials aws.CredentialsProvider
	// Debug receives the SDK's canonical requests and strings-to-sign with
	// every credential value redacted; nil disables signing diagnostics.
	Debug io.Writer
	// MaxKeys caps each list page (0 leaves the server default); tests use
	// a small value to exercise pagination.
	MaxKeys int32
	// HTTPClient replaces the transport (tests); CAFile and TLS flags are
	// then ignored.
	HTTPClient *http.Client

	// forceGCS applies the Cloud Storage behaviour to any endpoint, so the
	// unit tests can exercise it against a loopback server.
	forceGCS bool
}

// Stats counts the requests a run made, for benchmarks and --debug.
type Stats struct {
	ListPages         int64 `json:"listPages"`
	VersionListPages  int64 `json:"versionListPages"`
	ManifestGets      int64 `json:"manifestGets"`
	ManifestHeads     int64 `json:"manifestHeads"`
	VersioningQueries int64 `json:"versioningQueries"`
	DeleteRequests    int64 `json:"deleteRequests"`
	DeletedObjects    int64 `json:"deletedObjects"`
}

type counters struct {
	listPages, versionPages, gets, heads, versioning, deletes, deleted atomic.Int64
}

// Store is a bucket handle. It is safe for concurrent use.
type Store struct {
	cli     *s3.Client
	bucket  string
	gcs     bool
	maxKeys int32
	n       counters
}

// New validates cfg and builds the client. It sends no request; without
// Credentials it reads the AWS config files of the default chain.
func New(cfg Config) (*Store, error) {
	if strings.TrimSpace(cfg.Bucket) == "" {
		return nil, errors.New("no bucket: set spec.config.bucket on the BackupRepo or pass --bucket")
	}
	if err := ValidateEndpoint(cfg.Endpoint); err != nil {
		return nil, err
	}
	region := cfg.Region
	if region == "" {
		region = DefaultRegion
	}
	gcs := cfg.forceGCS || IsGCSEndpoint(cfg.Endpoint)
	httpClient := cfg.HTTPClient
	if httpClient == nil {
		tlsCfg, err := tlsConfig(cfg.CAFile, cfg.InsecureSkipTLSVerify)
		if err != nil {
			return nil, err
		}
		httpClient = &http.Client{Transport: awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
			tr.TLSClientConfig = tlsCfg
		}).GetTransport()}
	}
	creds := cfg.Credentials
	if creds == nil {
		var err error
		if creds, err = DefaultChain(context.Background(), region); err != nil {
			return nil, err
		}
	}
	var red *redactor
	if cfg.Debug != nil {
		red = &redactor{w: cfg.Debug}
		creds = &redactingProvider{next: creds, red: red}
	}
	opts := s3.Options{
		Region:       region,
		UsePathStyle: cfg.PathStyle,
		Credentials:  aws.NewCredentialsCache(creds),
		HTTPClient:   httpClient,
		// Only DeleteObjects needs a request checksum, and it gets
		// Content-MD5; nothing else should grow flexible checksums.
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	}
	if cfg.Endpoint != "" {
		opts.BaseEndpoint = aws.String(cfg.Endpoint)
	}
	if red != nil {
		opts.Logger = red
		opts.ClientLogMode = aws.LogSigning
	}
	if gcs {
		opts.APIOptions = append(opts.APIOptions, gcsSigningCompat)
	}
	return &Store{cli: s3.New(opts), bucket: cfg.Bucket, gcs: gcs, maxKeys: cfg.MaxKeys}, nil
}

// GCS reports whether the endpoint is the Cloud Storage XML API.
func (s *Store) GCS() bool { return s.gcs }

// Bucket returns the bucket name.
func (s *Store) Bucket() string { return s.bucket }

// Stats returns the request counters so far.
func (s *Store) Stats() Stats {
	return Stats{
		ListPages: s.n.listPages.Load(), VersionListPages: s.n.versionPages.Load(),
		ManifestGets: s.n.gets.Load(), ManifestHeads: s.n.heads.Load(), VersioningQueries: s.n.versioning.Load(),
		DeleteRequests: s.n.deletes.Load(), DeletedObjects: s.n.deleted.Load(),
	}
}

// ValidateEndpoint requires an absolute URL with a scheme and a host.
// The error never repeats the value, which may carry userinfo.
func ValidateEndpoint(endpoint string) error {
	if endpoint == "" {
		return nil
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return errors.New("invalid S3 endpoint: want an absolute URL such as https://s3.example.com")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("invalid S3 endpoint scheme %q: want http or https", u.Scheme)
	}
	return nil
}

// RedactEndpoint prints an endpoint without userinfo, query or fragment,
// for --debug output.
func RedactEndpoint(endpoint string) string {
	if endpoint == "" {
		return "<sdk-default>"
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return "<invalid>"
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}

func tlsConfig(caFile string, insecure bool) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: insecure} //nolint:gosec // operator opt-in (--insecure-skip-tls-verify)
	if caFile == "" {
		return cfg, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("read --ca-file: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--ca-file %s holds no PEM certificate", caFile)
	}
	cfg.RootCAs = pool
	return cfg, nil
}
