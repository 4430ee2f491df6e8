package s3store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/smithy-go/logging"
)

// Static returns a provider for keys read from a Secret.
func Static(accessKey, secretKey, sessionToken string) aws.CredentialsProvider {
	return credentials.NewStaticCredentialsProvider(accessKey, secretKey, sessionToken)
}

// DefaultChain is the AWS SDK's own default credential chain, used with
// --use-backup-repo-credentials=false. In the SDK's order: keys in the
// environment, the shared config and credentials profile (static keys,
// role_arn with source_profile or credential_source, sso, credential_process,
// web_identity_token_file), web identity from the environment (IRSA: STS
// AssumeRoleWithWebIdentity), the container endpoint (ECS tasks, EKS Pod
// Identity), then the EC2 instance role from IMDS.
//
// Only credentials come from the chain: the S3 client keeps the region that
// the BackupRepo or the flags name. region merely seeds the chain's own STS
// and SSO clients when neither AWS_REGION nor the profile sets one. The
// files are read now so a broken profile fails before the run starts; no
// request is sent until the first credentials are needed.
func DefaultChain(ctx context.Context, region string, optFns ...func(*config.LoadOptions) error) (aws.CredentialsProvider, error) {
	opts := []func(*config.LoadOptions) error{
		config.WithDefaultRegion(region),
		// STS, SSO and IMDS answers carry secrets; none of their logging
		// may reach the terminal, whatever the environment asks for.
		config.WithLogger(logging.Nop{}),
		config.WithClientLogMode(0),
	}
	cfg, err := config.LoadDefaultConfig(ctx, append(opts, optFns...)...)
	if err != nil {
		return nil, fmt.Errorf("load the AWS default credential chain from the environment and the %s: %w", profileSource(), err)
	}
	if cfg.Credentials == nil {
		return nil, fmt.Errorf("the AWS default credential chain resolved no provider (%s)", chainSources())
	}
	return chainProvider{next: cfg.Credentials}, nil
}

// chainProvider names the places the chain looked when it comes back
// empty: the SDK's own error mentions only the last one (usually IMDS).
type chainProvider struct{ next aws.CredentialsProvider }

func (p chainProvider) Retrieve(ctx context.Context) (aws.Credentials, error) {
	cr, err := p.next.Retrieve(ctx)
	if err != nil {
		return aws.Credentials{}, fmt.Errorf("no usable credentials from the AWS default chain: %w; it looks, in order, at %s: configure one of them, or read the keys from the BackupRepo credential Secret with --use-backup-repo-credentials=true", err, chainSources())
	}
	return cr, nil
}

// chainSources describes the default chain's search order with the
// environment it sees, so an operator knows what to set.
func chainSources() string {
	imds := "the EC2 instance role from the instance metadata service"
	if strings.EqualFold(os.Getenv("AWS_EC2_METADATA_DISABLED"), "true") {
		imds += " (disabled by AWS_EC2_METADATA_DISABLED)"
	}
	return strings.Join([]string{
		"AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
		profileSource(),
		"AWS_ROLE_ARN with AWS_WEB_IDENTITY_TOKEN_FILE (IRSA)",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI or AWS_CONTAINER_CREDENTIALS_RELATIVE_URI (ECS, EKS Pod Identity)",
		imds,
	}, ", ")
}

// profileSource names the shared profile and files the chain reads.
func profileSource() string {
	profile := firstEnv("AWS_PROFILE", "AWS_DEFAULT_PROFILE")
	if profile == "" {
		profile = "default"
	}
	configFile := firstEnv("AWS_CONFIG_FILE")
	if configFile == "" {
		configFile = config.DefaultSharedConfigFilename()
	}
	credsFile := firstEnv("AWS_SHARED_CREDENTIALS_FILE")
	if credsFile == "" {
		credsFile = config.DefaultSharedCredentialsFilename()
	}
	return fmt.Sprintf("profile %q in %s and %s", profile, configFile, credsFile)
}

func firstEnv(names ...string) string {
	for _, n := range names {
		if v := os.Getenv(n); v != "" {
			return v
		}
	}
	return ""
}

// Mask shows the first and last 4 characters of a key id for --debug; values
// of 8 characters or fewer are all '*'.
func Mask(v string) string {
	switch {
	case v == "":
		return "<empty>"
	case len(v) <= 8:
		return strings.Repeat("*", len(v))
	}
	return v[:4] + "..." + v[len(v)-4:]
}

// Fingerprint is the first 12 hex characters of the SHA-256 of v, so two
// runs can be compared without showing the value.
func Fingerprint(v string) string {
	if v == "" {
		return "<empty>"
	}
	sum := sha256.Sum256([]byte(v))
	return hex.EncodeToString(sum[:])[:12]
}

// redactor is the SDK logger for --debug: it writes each signing log line
// as "debug: ..." with every known credential value, the session token
// header and any Signature= value removed.
type redactor struct {
	mu      sync.Mutex
	w       io.Writer
	secrets []string
}

var (
	signatureRE = regexp.MustCompile(`(?i)(signature=)[0-9a-f]+`)
	tokenLineRE = regexp.MustCompile(`(?im)^(x-amz-security-token:).*$`)
	credRE      = regexp.MustCompile(`(?i)(credential=)[^/,\s]+`)
)

func (r *redactor) add(vals ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, v := range vals {
		if len(v) >= 4 {
			r.secrets = append(r.secrets, v)
		}
	}
}

// Redact removes credential material from s.
func (r *redactor) Redact(s string) string {
	r.mu.Lock()
	secrets := append([]string(nil), r.secrets...)
	r.mu.Unlock()
	s = signatureRE.ReplaceAllString(s, "${1}<redacted>")
	s = tokenLineRE.ReplaceAllString(s, "${1}<redacted>")
	s = credRE.ReplaceAllString(s, "${1}<redacted>")
	for _, v := range secrets {
		s = strings.ReplaceAll(s, v, "<redacted>")
	}
	return s
}

// Logf implements logging.Logger.
func (r *redactor) Logf(_ logging.Classification, format string, v ...any) {
	msg := r.Redact(fmt.Sprintf(format, v...))
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, line := range strings.Split(strings.TrimRight(msg, "\n"), "\n") {
		fmt.Fprintf(r.w, "debug: %s\n", line)
	}
}

// redactingProvider teaches the redactor every credential it hands out,
// including ones the default chain finds later.
type redactingProvider struct {
	next aws.CredentialsProvider
	red  *redactor
}

func (p *redactingProvider) Retrieve(ctx context.Context) (aws.Credentials, error) {
	cr, err := p.next.Retrieve(ctx)
	if err == nil {
		p.red.add(cr.AccessKeyID, cr.SecretAccessKey, cr.SessionToken)
	}
	return cr, err
}
