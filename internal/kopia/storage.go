// Package kopia is snapflow's kopia engine: it opens (and creates) kopia
// repositories on the filesystem, S3, SFTP and WebDAV backends, takes snapshots with a
// snapflow policy, and lists, pins, deletes and restores them, all through
// the kopia library in process. It knows nothing about Kubernetes objects
// beyond the policy types it translates; callers resolve Secrets first.
package kopia

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	gauth "cloud.google.com/go/auth"
	gcsclient "cloud.google.com/go/storage"
	kopiafs "github.com/kopia/kopia/fs"
	"github.com/kopia/kopia/repo/blob"
	"github.com/kopia/kopia/repo/blob/filesystem"
	"github.com/kopia/kopia/repo/blob/gcs"
	"github.com/kopia/kopia/repo/blob/s3"
	"github.com/kopia/kopia/repo/blob/sftp"
	"github.com/kopia/kopia/repo/blob/throttling"
	"github.com/kopia/kopia/repo/blob/webdav"
	pkgsftp "github.com/pkg/sftp"
	"github.com/studio-b12/gowebdav"
	"google.golang.org/api/googleapi"
)

// Backend is a resolved storage location with its credentials; exactly one
// field is set.
type Backend struct {
	Filesystem *FilesystemBackend `json:"filesystem,omitempty"`
	S3         *S3Backend         `json:"s3,omitempty"`
	SFTP       *SFTPBackend       `json:"sftp,omitempty"`
	WebDAV     *WebDAVBackend     `json:"webDav,omitempty"`
	GCS        *GCSBackend        `json:"gcs,omitempty"`
}

// GCSBackend is a Google Cloud Storage bucket, reached with a service
// account's JSON key. (The Google client also honours
// STORAGE_EMULATOR_HOST, which the tests point at an emulator.)
type GCSBackend struct {
	Bucket          string `json:"bucket"`
	Prefix          string `json:"prefix,omitempty"`
	CredentialsJSON []byte `json:"-"`
}

// SFTPBackend is a directory on an SSH server. The server's key must be
// in KnownHosts: there is no trust on first use.
type SFTPBackend struct {
	Host       string `json:"host"`
	Port       int    `json:"port,omitempty"`
	Path       string `json:"path"`
	Username   string `json:"username"`
	Password   string `json:"-"`
	PrivateKey string `json:"-"`
	KnownHosts string `json:"-"`
}

// WebDAVBackend is a collection on a WebDAV server.
type WebDAVBackend struct {
	URL      string `json:"url"`
	Username string `json:"-"`
	Password string `json:"-"`
}

// FilesystemBackend is a directory holding the repository.
type FilesystemBackend struct {
	Path string `json:"path"`
}

// S3Backend is a bucket (and prefix) on an S3-compatible service.
type S3Backend struct {
	Bucket   string `json:"bucket"`
	Prefix   string `json:"prefix,omitempty"`
	Endpoint string `json:"endpoint,omitempty"`
	Region   string `json:"region,omitempty"`
	// DisableTLS talks plain HTTP; InsecureSkipVerify accepts any certificate.
	DisableTLS         bool   `json:"disableTLS,omitempty"`
	InsecureSkipVerify bool   `json:"insecureSkipVerify,omitempty"`
	RootCA             []byte `json:"-"`
	AccessKeyID        string `json:"-"`
	SecretAccessKey    string `json:"-"`
	SessionToken       string `json:"-"`
}

// Kind names the backend kind for status.backend.
func (b Backend) Kind() string {
	switch {
	case b.Filesystem != nil:
		return "filesystem"
	case b.S3 != nil:
		return "s3"
	case b.SFTP != nil:
		return "sftp"
	case b.WebDAV != nil:
		return "webDav"
	case b.GCS != nil:
		return "gcs"
	}
	return ""
}

// String describes where the repository lives, without secrets.
func (b Backend) String() string {
	switch {
	case b.Filesystem != nil:
		return "filesystem " + b.Filesystem.Path
	case b.S3 != nil:
		ep := b.S3.Endpoint
		if ep == "" {
			ep = "s3.amazonaws.com"
		}
		return fmt.Sprintf("s3://%s/%s at %s", b.S3.Bucket, b.S3.Prefix, ep)
	case b.SFTP != nil:
		return fmt.Sprintf("sftp://%s@%s:%d%s", b.SFTP.Username, b.SFTP.Host, b.SFTP.port(), b.SFTP.Path)
	case b.WebDAV != nil:
		return "webdav " + redactURL(b.WebDAV.URL)
	case b.GCS != nil:
		return fmt.Sprintf("gs://%s/%s", b.GCS.Bucket, b.GCS.Prefix)
	}
	return "no backend"
}

// storage opens the backend; readOnly asks for read-only access where the
// backend scopes its credentials (gcs).
func (b Backend) storage(ctx context.Context, create, readOnly bool, limits throttling.Limits) (blob.Storage, error) {
	switch {
	case b.Filesystem != nil:
		if b.Filesystem.Path == "" {
			return nil, &Error{Class: ClassInvalidConfig, Err: errors.New("filesystem backend path is empty")}
		}
		if create {
			if err := os.MkdirAll(b.Filesystem.Path, fsDirMode); err != nil {
				return nil, classify(fmt.Errorf("create repository directory %s: %w", b.Filesystem.Path, err))
			}
		} else if _, err := os.Stat(b.Filesystem.Path); errors.Is(err, os.ErrNotExist) {
			return nil, &Error{Class: ClassNotInitialized, Err: fmt.Errorf("repository directory %s does not exist: %w", b.Filesystem.Path, errNotInitialized)}
		} else if err != nil {
			return nil, classify(fmt.Errorf("repository directory %s: %w", b.Filesystem.Path, err))
		}
		st, err := filesystem.New(ctx, &filesystem.Options{Path: b.Filesystem.Path, FileMode: fsFileMode, DirectoryMode: fsDirMode, Limits: limits}, create)
		if err != nil {
			return nil, classify(fmt.Errorf("open filesystem storage %s: %w", b.Filesystem.Path, err))
		}
		return st, nil
	case b.S3 != nil:
		o := b.S3
		if o.AccessKeyID == "" || o.SecretAccessKey == "" {
			// The S3 client would otherwise try the identity of wherever
			// the mover runs (a node's instance role).
			return nil, &Error{Class: ClassInvalidConfig, Err: errors.New("the s3 backend has no access keys: put AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the auth Secret; snapflow never falls back to the node's own identity")}
		}
		endpoint := o.Endpoint
		if endpoint == "" {
			endpoint = "s3.amazonaws.com"
		}
		st, err := s3.New(ctx, &s3.Options{
			BucketName: o.Bucket, Prefix: o.Prefix, Endpoint: endpoint, Region: o.Region,
			DoNotUseTLS: o.DisableTLS, DoNotVerifyTLS: o.InsecureSkipVerify, RootCA: o.RootCA,
			AccessKeyID: o.AccessKeyID, SecretAccessKey: o.SecretAccessKey, SessionToken: o.SessionToken,
			Limits: limits,
		}, create)
		if err != nil {
			return nil, classify(fmt.Errorf("open s3 storage %s: %w", b, err))
		}
		return st, nil
	case b.SFTP != nil:
		return b.SFTP.storage(ctx, create, limits)
	case b.GCS != nil:
		return b.GCS.storage(ctx, create, readOnly, limits)
	case b.WebDAV != nil:
		o := b.WebDAV
		if err := o.checkURL(); err != nil {
			return nil, err
		}
		if err := o.probe(create); err != nil {
			return nil, err
		}
		st, err := webdav.New(ctx, &webdav.Options{URL: o.URL, Username: o.Username, Password: o.Password, Limits: limits}, create)
		if err != nil {
			return nil, classify(fmt.Errorf("open webdav storage %s: %w", redactURL(o.URL), err))
		}
		return st, nil
	}
	return nil, &Error{Class: ClassInvalidConfig, Err: errors.New("no supported backend is set (snapflow's engine supports filesystem, s3, sftp, webDav and gcs)")}
}

// gcsKey is the part of a service account key file the Google client
// needs. Other credential types name URLs, files or commands the client
// would use from inside the mover (the node's metadata server, a file in
// the pod, a program), and token_uri and universe_domain move where the
// signed assertion goes: only Google's own endpoints are accepted.
type gcsKey struct {
	Type           string `json:"type"`
	ProjectID      string `json:"project_id,omitempty"`
	PrivateKeyID   string `json:"private_key_id,omitempty"`
	PrivateKey     string `json:"private_key"`
	ClientEmail    string `json:"client_email"`
	ClientID       string `json:"client_id,omitempty"`
	TokenURI       string `json:"token_uri,omitempty"`
	UniverseDomain string `json:"universe_domain,omitempty"`
}

const gcsTokenURI = "https://oauth2.googleapis.com/token"

// serviceAccountKey checks a key file and returns only its known fields,
// so nothing else in it reaches the Google client.
func serviceAccountKey(b []byte) ([]byte, error) {
	var k gcsKey
	if err := json.Unmarshal(b, &k); err != nil {
		return nil, errors.New("the gcs credentials under KOPIA_GCS_CREDENTIALS_JSON are not JSON: paste the service account's key file as it was downloaded")
	}
	switch {
	case k.Type != "service_account":
		return nil, fmt.Errorf("the gcs credentials are of type %q: snapflow accepts only a service account key (type service_account); external_account, authorized_user, impersonated_service_account and the like name URLs, files or commands the mover would use, so they are refused", k.Type)
	case k.PrivateKey == "" || k.ClientEmail == "":
		return nil, errors.New("the gcs service account key has no private_key or client_email: paste the whole key file")
	case k.TokenURI != "" && k.TokenURI != gcsTokenURI:
		return nil, fmt.Errorf("the gcs service account key's token_uri is %q: only Google's %s is accepted", k.TokenURI, gcsTokenURI)
	case k.UniverseDomain != "" && k.UniverseDomain != "googleapis.com":
		return nil, fmt.Errorf("the gcs service account key's universe_domain is %q: only googleapis.com is supported", k.UniverseDomain)
	}
	return json.Marshal(k)
}

// storage opens the bucket with the service account key. Without a key
// the Google client would fall back to the ambient credentials of wherever
// the mover runs (a node's identity every tenant there shares): refused.
func (o *GCSBackend) storage(ctx context.Context, create, readOnly bool, limits throttling.Limits) (blob.Storage, error) {
	if len(bytes.TrimSpace(o.CredentialsJSON)) == 0 {
		return nil, &Error{Class: ClassInvalidConfig, Err: errors.New("the gcs backend has no credentials: put the service account's JSON key in the auth Secret under KOPIA_GCS_CREDENTIALS_JSON; snapflow never falls back to the node's ambient identity")}
	}
	key, err := serviceAccountKey(o.CredentialsJSON)
	if err != nil {
		return nil, &Error{Class: ClassInvalidConfig, Err: err}
	}
	// Restores and verifications read only: the token asks for read scope.
	st, err := gcs.New(ctx, &gcs.Options{BucketName: o.Bucket, Prefix: o.Prefix, ServiceAccountCredentialJSON: key, ReadOnly: readOnly && !create, Limits: limits}, create)
	if err != nil {
		return nil, classify(fmt.Errorf("open gcs storage gs://%s/%s: %w", o.Bucket, o.Prefix, err))
	}
	return st, nil
}

func (o *SFTPBackend) port() int {
	if o.Port == 0 {
		return 22
	}
	return o.Port
}

// storage connects to the SSH server, which checks its host key against
// KnownHosts (kopia would otherwise fall back to a known_hosts file of
// the mover's home, which no mover has).
func (o *SFTPBackend) storage(ctx context.Context, create bool, limits throttling.Limits) (blob.Storage, error) {
	if strings.TrimSpace(o.KnownHosts) == "" {
		return nil, &Error{Class: ClassInvalidConfig, Err: errors.New("the sftp backend has no known_hosts entry for the server: add the server's host key line (ssh-keyscan -p PORT HOST) to the auth Secret under KOPIA_SFTP_KNOWN_HOSTS_DATA; snapflow never trusts a host key on first use")}
	}
	if o.Password == "" && o.PrivateKey == "" {
		return nil, &Error{Class: ClassInvalidConfig, Err: errors.New("the sftp backend has no credentials: put a password under KOPIA_SFTP_PASSWORD or a private key under KOPIA_SFTP_KEY_DATA in the auth Secret")}
	}
	if err := sshAnswers(ctx, net.JoinHostPort(o.Host, strconv.Itoa(o.port()))); err != nil {
		return nil, classify(fmt.Errorf("open sftp storage %s:%d%s: %w", o.Host, o.port(), o.Path, err))
	}
	st, err := sftp.New(ctx, &sftp.Options{Host: o.Host, Port: o.port(), Path: o.Path, Username: o.Username,
		Password: o.Password, KeyData: o.PrivateKey, KnownHostsData: o.KnownHosts, Limits: limits}, create)
	if err != nil {
		return nil, classify(fmt.Errorf("open sftp storage %s:%d%s: %w", o.Host, o.port(), o.Path, err))
	}
	return st, nil
}

// probe asks the server for the repository's collection within a minute
// (kopia's own client has no timeout, so a server that never answers
// would hold the mover until its deadline), and with create makes the
// collection and its parents: kopia creates only the directories below it.
func (o *WebDAVBackend) probe(create bool) error {
	u, _ := url.Parse(o.URL) // checkURL parsed it
	dir := u.Path
	u.Path, u.RawPath = "", ""
	c := gowebdav.NewClient(u.String(), o.Username, o.Password)
	c.SetTimeout(backendProbeTimeout)
	_, err := c.Stat(dir)
	switch {
	case err == nil:
		return nil
	case gowebdav.IsErrNotFound(err) && !create:
		return nil // opening it says the repository is not initialized
	case gowebdav.IsErrNotFound(err) || gowebdav.IsErrCode(err, http.StatusConflict):
		if err := c.MkdirAll(dir, 0o700); err != nil {
			return classify(fmt.Errorf("create the webdav collection %s: %w", redactURL(o.URL), err))
		}
		return nil
	}
	return classify(fmt.Errorf("reach the webdav collection %s: %w", redactURL(o.URL), err))
}

// backendProbeTimeout bounds the first exchange with an SSH or WebDAV
// server, which kopia's clients make without a timeout (a variable so
// tests can shorten it).
var backendProbeTimeout = time.Minute

// sshAnswers dials addr and waits for the SSH banner within the probe
// timeout: kopia dials without one, so a server that accepts and never
// speaks would hold the mover until its deadline.
func sshAnswers(ctx context.Context, addr string) error {
	d := net.Dialer{Timeout: backendProbeTimeout}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close() //nolint:errcheck // a probe
	if err := conn.SetReadDeadline(time.Now().Add(backendProbeTimeout)); err != nil {
		return err
	}
	line, err := bufio.NewReaderSize(conn, 256).ReadString('\n')
	if err != nil {
		return fmt.Errorf("the server at %s accepted the connection but sent no SSH banner within %s: %w", addr, backendProbeTimeout, err)
	}
	if !strings.HasPrefix(line, "SSH-") {
		return &Error{Class: ClassInvalidConfig, Err: fmt.Errorf("the server at %s is not an SSH server (it said %q): check spec.backend.sftp host and port", addr, strings.TrimSpace(line))}
	}
	return nil
}

// checkURL refuses credentials, a query or a fragment in a WebDAV URL:
// the URL travels in the work spec and in messages, the credentials
// belong in the auth Secret.
func (o *WebDAVBackend) checkURL() error {
	u, err := url.Parse(o.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return &Error{Class: ClassInvalidConfig, Err: fmt.Errorf("webdav url %q is not an http:// or https:// URL", redactURL(o.URL))}
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return &Error{Class: ClassInvalidConfig, Err: fmt.Errorf("webdav url %s carries credentials, a query or a fragment: put the credentials in the auth Secret (KOPIA_WEBDAV_USERNAME, KOPIA_WEBDAV_PASSWORD) and give the URL alone", redactURL(o.URL))}
	}
	return nil
}

// redactURL hides a password in a URL; an unparsable one is not shown.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// Error classes a caller can act on; they end up in status.failure.class.
const (
	ClassWrongPassword  = "WrongPassword"
	ClassNotInitialized = "RepositoryNotInitialized"
	ClassUnreachable    = "Unreachable"
	ClassBucketMissing  = "BucketMissing"
	ClassAccessDenied   = "AccessDenied"
	ClassInvalidConfig  = "InvalidConfig"
	// ClassHostKeyRejected: the SSH server's key is not the one known_hosts
	// names (or none is named for it).
	ClassHostKeyRejected = "HostKeyRejected"
	ClassSourceMissing   = "SourceMissing"
	ClassSnapshotMissing = "SnapshotNotFound"
	// ClassSourceNotAllowed: the snapshot belongs to a source the run's
	// owner may not touch (another namespace's, in a shared repository).
	ClassSourceNotAllowed = "SourceNotAllowed"
	ClassPartial          = "PartialSnapshot"
	// ClassUploadLimit: the run stopped at upload.limitMb before the
	// snapshot was whole, as kopia's --upload-limit-mb does.
	ClassUploadLimit = "UploadLimitReached"
	// ClassCommandFailed: a stream source's command, or a streamExec
	// restore's, exited non-zero or could not be run.
	ClassCommandFailed = "CommandFailed"
	ClassInternal      = "Internal"
)

// Error is an engine error with a class and whether a retry may help.
type Error struct {
	Class string
	Err   error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Retryable says whether the same request may succeed later without a change.
func (e *Error) Retryable() bool {
	return e.Class == ClassUnreachable || e.Class == ClassInternal
}

// Hint tells a person what to do about an error of this class.
func (e *Error) Hint() string {
	switch e.Class {
	case ClassWrongPassword:
		return "the repository exists but the password does not open it: check the Secret named by spec.encryption.passwordSecretRef"
	case ClassNotInitialized:
		return "no kopia repository at this location: set spec.create.enabled: true to create one, or point the backend at an existing repository"
	case ClassUnreachable:
		return "the storage endpoint did not answer: check spec.backend (endpoint, TLS settings) and the network path from the mover"
	case ClassBucketMissing:
		return "the bucket does not exist: create it, or fix spec.backend.s3.bucket"
	case ClassAccessDenied:
		return "the storage refused the credentials: check the Secret named by the backend's auth.secretRef"
	case ClassHostKeyRejected:
		return "the SSH server's host key does not match the known_hosts entries in the auth Secret (KOPIA_SFTP_KNOWN_HOSTS_DATA): check that the host is the right one, then update the entry"
	case ClassSourceMissing:
		return "the source directory is not there: check that the PVC is mounted and holds data"
	case ClassCommandFailed:
		return "the workload command failed (its stderr ends the message): run it by hand with kubectl exec, fix it or the workload, and run again"
	}
	return ""
}

// ClassOf returns the class of err, or ClassInternal.
func ClassOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Class
	}
	return ClassInternal
}

// entryFromStorage says whether an error kopia reports for one entry of an
// upload came from the repository's storage rather than from reading the
// source. Only an error that names a path under the source directory (or
// an entry kopia cannot type) is the source's; anything else (a network
// error, a storage status, an expired token, a rename in a filesystem
// repository) is the storage's. Erring that way is safe: the run is
// retried and fails as Unreachable, never saved with files missing.
func entryFromStorage(err error, source string) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, kopiafs.ErrUnknown) {
		return false
	}
	// WebDAV and SFTP report their failures as path errors on the blob's
	// path, which may be relative: the status inside says whose it is.
	// A Google API error is always the bucket's.
	var davErr gowebdav.StatusError
	var sftpErr *pkgsftp.StatusError
	var gErr *googleapi.Error
	if errors.As(err, &davErr) || errors.As(err, &sftpErr) || errors.Is(err, pkgsftp.ErrSSHFxConnectionLost) || errors.As(err, &gErr) {
		return true
	}
	var pathErr *fs.PathError
	var linkErr *os.LinkError
	switch {
	case errors.As(err, &pathErr):
		return !under(pathErr.Path, source)
	case errors.As(err, &linkErr):
		return !under(linkErr.Old, source) && !under(linkErr.New, source)
	}
	return true
}

// under says whether path is source or inside it; a relative path is
// taken as the source's (kopia names source entries relative to it).
func under(path, source string) bool {
	if !filepath.IsAbs(path) {
		return true
	}
	rel, err := filepath.Rel(source, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// storageSignature says whether a whole operation's error came from the
// storage: a network error, or what kopia's blob layer and S3 put in the
// message of a failed write or read.
func storageSignature(err error) bool {
	var opErr *net.OpError
	var dnsErr *net.DNSError
	if errors.As(err, &opErr) || errors.As(err, &dnsErr) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	msg := strings.ToLower(err.Error())
	for _, sign := range storageSignatures {
		if strings.Contains(msg, sign) {
			return true
		}
	}
	return false
}

// storageSignatures are what kopia's blob layer and S3 put in the errors of
// a failed write or read of the repository.
var storageSignatures = []string{"putblob(", "putblobinpath", "getblob(", "getmetadata(", "connection refused", "connection reset",
	"i/o timeout", "no such host", "broken pipe", "service unavailable", "slowdown", "slow down", "internalerror", "too many requests", "requesttimeout"}

// classify wraps err with the class its content implies.
func classify(err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	msg := strings.ToLower(err.Error())
	var opErr *net.OpError
	var dnsErr *net.DNSError
	var davErr gowebdav.StatusError
	var gErr *googleapi.Error
	var tokErr *gauth.Error
	switch {
	case errors.Is(err, errInvalidPassword):
		return &Error{Class: ClassWrongPassword, Err: err}
	case strings.Contains(msg, "knownhosts: key is unknown") || strings.Contains(msg, "knownhosts: key mismatch"):
		return &Error{Class: ClassHostKeyRejected, Err: err}
	case strings.Contains(msg, "ssh: unable to authenticate"):
		return &Error{Class: ClassAccessDenied, Err: err}
	case strings.Contains(msg, "no common algorithm for host key"):
		return &Error{Class: ClassHostKeyRejected, Err: err}
	case strings.Contains(msg, "unable to gethostkey") || strings.Contains(msg, "knownhosts:") ||
		strings.Contains(msg, "error parsing private key") || strings.Contains(msg, "passphrase protected") || strings.Contains(msg, "no common algorithm"):
		return &Error{Class: ClassInvalidConfig, Err: err}
	case errors.As(err, &davErr) && (davErr.Status == http.StatusUnauthorized || davErr.Status == http.StatusForbidden):
		return &Error{Class: ClassAccessDenied, Err: err}
	case errors.As(err, &gErr) && (gErr.Code == http.StatusUnauthorized || gErr.Code == http.StatusForbidden):
		return &Error{Class: ClassAccessDenied, Err: err}
	case errors.As(err, &gErr) && (gErr.Code >= http.StatusInternalServerError || gErr.Code == http.StatusTooManyRequests):
		return &Error{Class: ClassUnreachable, Err: err}
	case errors.As(err, &gErr) && gErr.Code == http.StatusBadRequest:
		return &Error{Class: ClassInvalidConfig, Err: err}
	case errors.As(err, &tokErr) && tokErr.Response != nil && (tokErr.Response.StatusCode >= http.StatusInternalServerError || tokErr.Response.StatusCode == http.StatusTooManyRequests):
		return &Error{Class: ClassUnreachable, Err: err}
	case errors.As(err, &tokErr) && tokErr.Response != nil:
		// The token endpoint refused the key: revoked, deleted or wrong.
		return &Error{Class: ClassAccessDenied, Err: err}
	case errors.As(err, &davErr) && davErr.Status >= http.StatusInternalServerError:
		return &Error{Class: ClassUnreachable, Err: err}
	case errors.Is(err, errNotInitialized):
		return &Error{Class: ClassNotInitialized, Err: err}
	case errors.Is(err, gcsclient.ErrBucketNotExist) || strings.Contains(msg, "bucket doesn't exist") || strings.Contains(msg, "nosuchbucket") || strings.Contains(msg, "bucket does not exist") || strings.Contains(msg, "specified bucket does not exist"):
		return &Error{Class: ClassBucketMissing, Err: err}
	case strings.Contains(msg, "access denied") || strings.Contains(msg, "accessdenied") || strings.Contains(msg, "invalidaccesskeyid") || strings.Contains(msg, "signaturedoesnotmatch") || strings.Contains(msg, "signature we calculated does not match"):
		return &Error{Class: ClassAccessDenied, Err: err}
	case errors.Is(err, os.ErrNotExist):
		return &Error{Class: ClassInvalidConfig, Err: err}
	case errors.As(err, &opErr), errors.As(err, &dnsErr), strings.Contains(msg, "connection refused"), strings.Contains(msg, "no such host"), strings.Contains(msg, "i/o timeout"):
		return &Error{Class: ClassUnreachable, Err: err}
	case storageSignature(err):
		return &Error{Class: ClassUnreachable, Err: err}
	}
	return &Error{Class: ClassInternal, Err: err}
}

// A filesystem repository is shared by movers of several users (an
// inherited identity, a restore's) through its group, so its blobs and
// directories are the group's too, not kopia's owner-only defaults. The
// mover's umask (0007) keeps these bits.
const (
	fsFileMode = os.FileMode(0o660)
	fsDirMode  = os.FileMode(0o770)
)
