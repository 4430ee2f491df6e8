package kubeinv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

	"github.com/aws/smithy-go"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/snapflow/snapflow/internal/prune/s3store"
)

// Credential sources recorded in --debug output.
const (
	SourceGeneratedSecret = "status.generatedCSIDriverSecret"
	SourceSpecCredential  = "spec.credential"
	SourceDefaultChain    = "aws-sdk-default-chain"
)

// Secret key aliases accepted, in order of preference.
var (
	accessKeyNames    = []string{"accessKeyId", "accessKeyID", "access_key_id", "AWS_ACCESS_KEY_ID"}
	secretKeyNames    = []string{"secretAccessKey", "secret_access_key", "AWS_SECRET_ACCESS_KEY"}
	sessionTokenNames = []string{"sessionToken", "session_token", "AWS_SESSION_TOKEN"}
	endpointNames     = []string{"endpoint", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"}
	regionNames       = []string{"region", "AWS_REGION", "AWS_DEFAULT_REGION"}
)

// S3Flags are the operator's S3 overrides from the command-line flags.
type S3Flags struct {
	Bucket, Endpoint, Region string
	PathStyle                bool
	CAFile                   string
	InsecureSkipTLSVerify    bool
	// UseRepoCredentials is --use-backup-repo-credentials.
	UseRepoCredentials bool
}

// S3Settings is the resolved connection. The credential values are kept
// unexported and are never formatted: String and the debug lines show only
// masks and fingerprints.
type S3Settings struct {
	Bucket, Endpoint, Region string
	PathStyle                bool
	CAFile                   string
	InsecureTLS              bool
	// CredentialSource is one of the Source* constants; CredentialRef the
	// Secret read ("<none>" without one); CredentialKeys its key names.
	CredentialSource string
	CredentialRef    string
	CredentialKeys   []string
	// EndpointSource says where Endpoint came from, for error messages.
	EndpointSource string

	accessKey, secretKey, sessionToken string
}

// String never shows a credential.
func (s S3Settings) String() string {
	return fmt.Sprintf("s3 bucket=%s endpoint=%s region=%s credentials=%s", s.Bucket, s3store.RedactEndpoint(s.Endpoint), s.Region, s.CredentialSource)
}

// GoString keeps %#v from printing the unexported credential fields.
func (s S3Settings) GoString() string { return s.String() }

// Secrets returns the credential values, for redaction filters only.
func (s S3Settings) Secrets() []string {
	return []string{s.accessKey, s.secretKey, s.sessionToken}
}

// StoreConfig turns the settings into an s3store configuration.
func (s S3Settings) StoreConfig() s3store.Config {
	cfg := s3store.Config{Bucket: s.Bucket, Endpoint: s.Endpoint, Region: s.Region, PathStyle: s.PathStyle,
		CAFile: s.CAFile, InsecureSkipTLSVerify: s.InsecureTLS}
	if s.CredentialSource != SourceDefaultChain {
		cfg.Credentials = s3store.Static(s.accessKey, s.secretKey, s.sessionToken)
	}
	return cfg
}

// DebugLines are the credential and connection lines of --debug, without the
// "debug: " prefix. Values are masked or fingerprinted.
func (s S3Settings) DebugLines() []string {
	keys := strings.Join(s.CredentialKeys, ",")
	if keys == "" {
		keys = "<none>"
	}
	return []string{
		"credential_source=" + s.CredentialSource,
		"credential_ref=" + s.CredentialRef,
		"credential_keys=" + keys,
		fmt.Sprintf("access_key_id masked=%s bytes=%d sha256=%s", s3store.Mask(s.accessKey), len(s.accessKey), s3store.Fingerprint(s.accessKey)),
		fmt.Sprintf("secret_access_key present=%t bytes=%d sha256=%s", s.secretKey != "", len(s.secretKey), s3store.Fingerprint(s.secretKey)),
		fmt.Sprintf("session_token present=%t bytes=%d sha256=%s", s.sessionToken != "", len(s.sessionToken), s3store.Fingerprint(s.sessionToken)),
		fmt.Sprintf("s3 bucket=%s endpoint=%s region=%s path_style=%t insecure_tls=%t", s.Bucket, s3store.RedactEndpoint(s.Endpoint), s.Region, s.PathStyle, s.InsecureTLS),
	}
}

// ResolveS3 resolves bucket, endpoint, region, TLS and credentials. It
// reads at most one Secret, and only when flags.UseRepoCredentials is set.
// Every failure is fatal.
func (s *Source) ResolveS3(ctx context.Context, repo *Repo, flags S3Flags) (S3Settings, error) {
	out := S3Settings{PathStyle: flags.PathStyle, CAFile: flags.CAFile, CredentialRef: "<none>"}
	bucket := repo.ConfigBucket()
	if bucket == "" && repo.GeneratedStorageClassName != "" {
		var sc storagev1.StorageClass
		if err := s.Client.Get(ctx, client.ObjectKey{Name: repo.GeneratedStorageClassName}, &sc); err == nil {
			bucket = strings.TrimSpace(sc.Parameters["bucket"])
		}
	}
	switch {
	case flags.Bucket != "" && bucket != "" && flags.Bucket != bucket:
		return out, fmt.Errorf("--bucket %s differs from the bucket %s of BackupRepo %s", flags.Bucket, bucket, repo.Name)
	case bucket == "":
		bucket = flags.Bucket
	}
	if bucket == "" {
		return out, fmt.Errorf("BackupRepo %s names no bucket (spec.config.bucket): pass --bucket", repo.Name)
	}
	out.Bucket = bucket
	out.InsecureTLS = flags.InsecureSkipTLSVerify || truthy(repo.Config["insecure"]) || truthy(repo.Config["no_check_certificate"])

	var secretEndpoint, secretRegion string
	if flags.UseRepoCredentials {
		ref, source := repo.GeneratedSecret, SourceGeneratedSecret
		if ref == nil {
			ref, source = repo.Credential, SourceSpecCredential
		}
		if ref == nil {
			return out, fmt.Errorf("BackupRepo %s has neither status.generatedCSIDriverSecret nor spec.credential: pass --use-backup-repo-credentials=false to use the AWS default chain", repo.Name)
		}
		var sec corev1.Secret
		if err := s.Client.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, &sec); err != nil {
			return out, fmt.Errorf("read credential Secret %s (%s; RBAC get on that Secret): %w", ref, source, err)
		}
		out.CredentialSource, out.CredentialRef = source, ref.String()
		for k := range sec.Data {
			out.CredentialKeys = append(out.CredentialKeys, k)
		}
		sort.Strings(out.CredentialKeys)
		out.accessKey = pick(sec.Data, accessKeyNames)
		out.secretKey = pick(sec.Data, secretKeyNames)
		out.sessionToken = pick(sec.Data, sessionTokenNames)
		secretEndpoint, secretRegion = pick(sec.Data, endpointNames), pick(sec.Data, regionNames)
		if out.accessKey == "" || out.secretKey == "" {
			return out, fmt.Errorf("credential Secret %s lacks an access key or secret key (want accessKeyId and secretAccessKey)", ref)
		}
	} else {
		out.CredentialSource = SourceDefaultChain
	}
	out.Endpoint = first(flags.Endpoint, secretEndpoint, strings.TrimSpace(repo.Config["endpoint"]))
	switch out.Endpoint {
	case "":
	case flags.Endpoint:
		out.EndpointSource = "--endpoint"
	case secretEndpoint:
		out.EndpointSource = "credential Secret " + out.CredentialRef
	default:
		out.EndpointSource = "BackupRepo " + repo.Name + " spec.config.endpoint"
	}
	if err := s3store.ValidateEndpoint(out.Endpoint); err != nil {
		return out, err
	}
	out.Region = first(flags.Region, secretRegion, strings.TrimSpace(repo.Config["region"]), s3store.DefaultRegion)
	return out, nil
}

func pick(data map[string][]byte, names []string) string {
	for _, n := range names {
		if v := strings.TrimSpace(string(data[n])); v != "" {
			return v
		}
	}
	return ""
}

func first(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

func truthy(v string) bool {
	b, err := strconv.ParseBool(strings.TrimSpace(v))
	return err == nil && b
}

// Explain turns an S3 error into one that says what went wrong and where
// the endpoint and the credentials came from, as a Repository's errors
// do, instead of the SDK's chain (which says "https response error" even
// for an http endpoint). An error it does not recognise is returned as is.
func (s S3Settings) Explain(err error) error {
	if err == nil {
		return nil
	}
	endpoint := s3store.RedactEndpoint(s.Endpoint)
	if endpoint == "" {
		endpoint = "<sdk-default>"
	}
	where := "S3 endpoint " + endpoint
	if s.EndpointSource != "" {
		where += " (from " + s.EndpointSource + ")"
	}
	creds := s.CredentialSource
	if s.CredentialRef != "" {
		creds = "Secret " + s.CredentialRef + " (" + s.CredentialSource + ")"
	}
	code := ""
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		code = apiErr.ErrorCode()
	}
	msg := strings.ToLower(err.Error())
	var opErr *net.OpError
	var dnsErr *net.DNSError
	switch {
	case code == "InvalidAccessKeyId" || code == "SignatureDoesNotMatch" || code == "AccessDenied" || code == "Forbidden" || code == "InvalidToken" || code == "ExpiredToken":
		return fmt.Errorf("%s refused the credentials from %s (%s) for bucket %s: check the access key and secret key there, and that they may list and delete in the bucket: %w", where, creds, code, s.Bucket, err)
	case code == "NoSuchBucket":
		return fmt.Errorf("bucket %s does not exist at %s: check the BackupRepo's spec.config.bucket or --bucket: %w", s.Bucket, where, err)
	case strings.Contains(msg, "http response to https client"):
		return fmt.Errorf("%s speaks plain HTTP: write the endpoint with http:// : %w", where, err)
	case strings.Contains(msg, "x509:") || strings.Contains(msg, "tls:"):
		return fmt.Errorf("%s failed TLS verification: pass its CA with --ca-file, or check the endpoint's scheme: %w", where, err)
	case errors.As(err, &dnsErr) || errors.As(err, &opErr) || strings.Contains(msg, "connection refused") || strings.Contains(msg, "no such host") || strings.Contains(msg, "i/o timeout"):
		return fmt.Errorf("cannot reach %s: check the endpoint, and that this machine can connect to it: %w", where, err)
	}
	return err
}
