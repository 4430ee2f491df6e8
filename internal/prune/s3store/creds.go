package s3store

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/credentials/endpointcreds"
	"github.com/aws/smithy-go/logging"
)

// Static returns a provider for keys read from a Secret.
func Static(accessKey, secretKey, sessionToken string) aws.CredentialsProvider {
	return credentials.NewStaticCredentialsProvider(accessKey, secretKey, sessionToken)
}

// DefaultChain is the credential chain used with
// --use-backup-repo-credentials=false (9.2): the standard environment
// variables, then the shared credentials file (AWS_PROFILE), then the
// container credentials endpoint (ECS tasks, EKS Pod Identity).
//
// The module set of this repository has no STS client and no IMDS client,
// so Web Identity (IRSA) and EC2 instance roles are not part of the chain;
// such deployments export keys or use Pod Identity instead.
func DefaultChain() aws.CredentialsProvider {
	return chain{envProvider{}, sharedFileProvider{}, containerProvider{}}
}

type chain []aws.CredentialsProvider

func (c chain) Retrieve(ctx context.Context) (aws.Credentials, error) {
	var errs []error
	for _, p := range c {
		cr, err := p.Retrieve(ctx)
		if err == nil && cr.HasKeys() {
			return cr, nil
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return aws.Credentials{}, fmt.Errorf("no AWS credentials found (environment, shared credentials file or container endpoint): %w", errors.Join(errs...))
}

type envProvider struct{}

func (envProvider) Retrieve(context.Context) (aws.Credentials, error) {
	id := firstEnv("AWS_ACCESS_KEY_ID", "AWS_ACCESS_KEY")
	secret := firstEnv("AWS_SECRET_ACCESS_KEY", "AWS_SECRET_KEY")
	if id == "" || secret == "" {
		return aws.Credentials{}, errors.New("environment: AWS_ACCESS_KEY_ID or AWS_SECRET_ACCESS_KEY is unset")
	}
	return aws.Credentials{AccessKeyID: id, SecretAccessKey: secret, SessionToken: os.Getenv("AWS_SESSION_TOKEN"), Source: "environment"}, nil
}

func firstEnv(names ...string) string {
	for _, n := range names {
		if v := os.Getenv(n); v != "" {
			return v
		}
	}
	return ""
}

type sharedFileProvider struct{}

func (sharedFileProvider) Retrieve(context.Context) (aws.Credentials, error) {
	path := os.Getenv("AWS_SHARED_CREDENTIALS_FILE")
	if path == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return aws.Credentials{}, errors.New("shared credentials file: no home directory")
		}
		path = filepath.Join(home, ".aws", "credentials")
	}
	profile := firstEnv("AWS_PROFILE", "AWS_DEFAULT_PROFILE")
	if profile == "" {
		profile = "default"
	}
	f, err := os.Open(path)
	if err != nil {
		return aws.Credentials{}, fmt.Errorf("shared credentials file: %w", err)
	}
	defer f.Close()
	vals, err := iniSection(f, profile)
	if err != nil {
		return aws.Credentials{}, fmt.Errorf("shared credentials file %s: %w", path, err)
	}
	cr := aws.Credentials{AccessKeyID: vals["aws_access_key_id"], SecretAccessKey: vals["aws_secret_access_key"],
		SessionToken: vals["aws_session_token"], Source: "shared-credentials-file"}
	if !cr.HasKeys() {
		return aws.Credentials{}, fmt.Errorf("shared credentials file %s: profile %q has no keys", path, profile)
	}
	return cr, nil
}

// iniSection reads the key = value pairs of one [section].
func iniSection(r io.Reader, section string) (map[string]string, error) {
	out := map[string]string{}
	in := false
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[':
			name := strings.TrimSpace(strings.Trim(line, "[]"))
			in = name == section
		case in:
			if k, v, ok := strings.Cut(line, "="); ok {
				out[strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(v)
			}
		}
	}
	return out, sc.Err()
}

type containerProvider struct{}

func (containerProvider) Retrieve(ctx context.Context) (aws.Credentials, error) {
	endpoint := os.Getenv("AWS_CONTAINER_CREDENTIALS_FULL_URI")
	if rel := os.Getenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"); endpoint == "" && rel != "" {
		endpoint = "http://169.254.170.2" + rel
	}
	if endpoint == "" {
		return aws.Credentials{}, errors.New("container endpoint: AWS_CONTAINER_CREDENTIALS_FULL_URI is unset")
	}
	p := endpointcreds.New(endpoint, func(o *endpointcreds.Options) {
		if tok := os.Getenv("AWS_CONTAINER_AUTHORIZATION_TOKEN"); tok != "" {
			o.AuthorizationToken = tok
		}
		if file := os.Getenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"); file != "" {
			o.AuthorizationTokenProvider = endpointcreds.TokenProviderFunc(func() (string, error) {
				b, err := os.ReadFile(file)
				return strings.TrimSpace(string(b)), err
			})
		}
	})
	return p.Retrieve(ctx)
}

// Mask shows the first and last 4 characters of a key id (10.9); values of
// 8 characters or fewer are all '*'.
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
// runs can be compared without showing the value (10.9).
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
