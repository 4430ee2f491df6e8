package kopia

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	kopiafs "github.com/kopia/kopia/fs"
	"github.com/kopia/kopia/repo/blob/throttling"
	pkgsftp "github.com/pkg/sftp"
	"github.com/studio-b12/gowebdav"
	"google.golang.org/api/googleapi"

	gauth "cloud.google.com/go/auth"
	gcsclient "cloud.google.com/go/storage"
)

// Mistakes in an SSH or WebDAV setup get a class a person can act on.
func TestClassifyBackendSetup(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{errors.New("ssh: handshake failed: knownhosts: key mismatch"), ClassHostKeyRejected},
		{errors.New("ssh: handshake failed: ssh: no common algorithm for host key; client offered: [ssh-ed25519], server offered: [rsa-sha2-512]"), ClassHostKeyRejected},
		{errors.New("unable to getHostKey: knownhosts: /tmp/kh:1: illegal base64 data"), ClassInvalidConfig},
		{errors.New("unable to create ssh config: error parsing private key: ssh: no key found"), ClassInvalidConfig},
		{errors.New("ssh: this private key is passphrase protected"), ClassInvalidConfig},
		{errors.New("ssh: handshake failed: ssh: unable to authenticate, attempted methods [none password]"), ClassAccessDenied},
		{&fs.PathError{Op: "ReadStream", Path: "kopia.repository.f", Err: gowebdav.StatusError{Status: 401}}, ClassAccessDenied},
		{&fs.PathError{Op: "ReadStream", Path: "kopia.repository.f", Err: gowebdav.StatusError{Status: 503}}, ClassUnreachable},
		{fmt.Errorf("unable to list from the bucket: %w", &googleapi.Error{Code: 403, Message: "mover@p.iam.gserviceaccount.com does not have storage.objects.list access"}), ClassAccessDenied},
		{fmt.Errorf("PutBlob: %w", &googleapi.Error{Code: 503, Message: "backend error"}), ClassUnreachable},
		{fmt.Errorf("unable to list from the bucket: %w", &gauth.Error{Response: &http.Response{StatusCode: 400}, Err: errors.New(`"invalid_grant" "Invalid JWT Signature."`)}), ClassAccessDenied},
		{fmt.Errorf("unable to list from the bucket: %w", gcsclient.ErrBucketNotExist), ClassBucketMissing},
		{fmt.Errorf("unable to list from the bucket: %w", &googleapi.Error{Code: 400, Message: "Invalid bucket name"}), ClassInvalidConfig},
	} {
		if got := ClassOf(classify(tc.err)); got != tc.want {
			t.Errorf("%v: class %s, want %s", tc.err, got, tc.want)
		}
	}
}

// A WebDAV URL with credentials in it is refused without showing them.
func TestWebDAVURLKeepsNoSecrets(t *testing.T) {
	b := Backend{WebDAV: &WebDAVBackend{URL: "https://ops:hunter2@dav.example.com/r"}}
	_, err := b.storage(context.Background(), false, false, throttling.Limits{})
	if ClassOf(err) != ClassInvalidConfig || strings.Contains(err.Error(), "hunter2") || strings.Contains(b.String(), "hunter2") {
		t.Fatalf("class %s, error %q, String %q: want InvalidConfig and no password", ClassOf(err), err, b.String())
	}
}

// Only what the source did wrong may be called a file error; anything the
// storage did is the storage's, whatever the entry it surfaced on.
func TestEntryFromStorageTellsStorageFromSource(t *testing.T) {
	const source = "/data"
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"a source file that cannot be opened", fmt.Errorf("unable to open file: %w", &fs.PathError{Op: "open", Path: "/data/db/x", Err: syscall.EACCES}), false},
		{"a source read error", &fs.PathError{Op: "read", Path: "/data/x", Err: syscall.EIO}, false},
		{"the source directory itself", &fs.PathError{Op: "readdirent", Path: "/data", Err: syscall.EIO}, false},
		{"a relative source path", &fs.PathError{Op: "open", Path: "x", Err: syscall.EACCES}, false},
		{"an entry kopia cannot type", fmt.Errorf("entry: %w", kopiafs.ErrUnknown), false},
		{"a rename in a filesystem repository", fmt.Errorf("PutBlobInPath: %w", &os.LinkError{Op: "rename", Old: "/repository/p1/x.tmp", New: "/repository/p1/x", Err: syscall.ESTALE}), true},
		{"an expired session token", fmt.Errorf("PutBlob: %w", errors.New("The provided token has expired")), true},
		{"an error that names no path", errors.New("something the storage said"), true},
		{"a sibling that only shares the prefix", &fs.PathError{Op: "write", Path: "/data-repo/p0/blob", Err: syscall.ENOSPC}, true},
		{"a filesystem repository that is full", fmt.Errorf("PutBlob: %w", &fs.PathError{Op: "write", Path: "/repository/p1/blob", Err: syscall.ENOSPC}), true},
		{"a refused connection", fmt.Errorf("unable to write content chunk: %w", refused), true},
		{"a refused connection, flattened by a wrapper", errors.New("unable to complete PutBlob(p123) despite 10 retries: dial tcp 127.0.0.1:9000: connect: connection refused"), true},
		{"S3 throttling", errors.New("PutBlob(p1): SlowDown: Please reduce your request rate"), true},
		{"a WebDAV server out of space, on a relative blob path", &fs.PathError{Op: "Write", Path: "p1/x.f", Err: gowebdav.StatusError{Status: 507}}, true},
		{"an SFTP failure on a blob path under the source's prefix", &fs.PathError{Op: "open", Path: "/data/repo/p1/x", Err: &pkgsftp.StatusError{Code: 4}}, true},
		{"a lost SFTP connection", fmt.Errorf("PutBlob: %w", pkgsftp.ErrSSHFxConnectionLost), true},
		{"none", nil, false},
	}
	for _, tc := range tests {
		if got := entryFromStorage(tc.err, source); got != tc.want {
			t.Errorf("%s: entryFromStorage = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A server that accepts and never answers, or answers as something else
// than SSH, fails the open quickly instead of hanging the mover.
func TestSFTPServerThatDoesNotSpeakSSH(t *testing.T) {
	old := backendProbeTimeout
	backendProbeTimeout = 300 * time.Millisecond
	t.Cleanup(func() { backendProbeTimeout = old })
	for _, tc := range []struct {
		name, says, class string
	}{
		{"silent", "", ClassUnreachable},
		{"a web server", "HTTP/1.1 400 Bad Request\r\n", ClassInvalidConfig},
	} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = conn.Write([]byte(tc.says))
			time.Sleep(2 * time.Second)
			_ = conn.Close()
		}()
		port := ln.Addr().(*net.TCPAddr).Port
		b := Backend{SFTP: &SFTPBackend{Host: "127.0.0.1", Port: port, Path: "/r", Username: "u", Password: "p", KnownHosts: "[127.0.0.1]:1 ssh-ed25519 AAAA"}}
		start := time.Now()
		_, err = b.storage(context.Background(), false, false, throttling.Limits{})
		if ClassOf(err) != tc.class || time.Since(start) > 10*time.Second {
			t.Errorf("%s: class %s after %s (%v), want %s at once", tc.name, ClassOf(err), time.Since(start), err, tc.class)
		}
		_ = ln.Close()
	}
}

// Only a service account key reaches the Google client, and only its
// known fields: other credential types would make the mover fetch URLs,
// read files or run commands a tenant names.
func TestServiceAccountKeyOnly(t *testing.T) {
	const good = `{"type":"service_account","private_key":"-----BEGIN PRIVATE KEY-----\\nx\\n-----END PRIVATE KEY-----\\n","client_email":"m@p.iam.gserviceaccount.com"}`
	for _, tc := range []struct {
		name, key, says string
	}{
		{"external account reading the metadata server", `{"type":"external_account","token_url":"https://evil.example/t","credential_source":{"url":"http://metadata.google.internal/computeMetadata/v1/instance/service-accounts/default/token","headers":{"Metadata-Flavor":"Google"}}}`, "only a service account key"},
		{"authorized user", `{"type":"authorized_user","client_id":"x","client_secret":"y","refresh_token":"z"}`, "only a service account key"},
		{"impersonation", `{"type":"impersonated_service_account","service_account_impersonation_url":"https://evil.example/"}`, "only a service account key"},
		{"no type", `{"private_key":"k","client_email":"m"}`, "only a service account key"},
		{"a token endpoint of its own", `{"type":"service_account","private_key":"k","client_email":"m","token_uri":"http://127.0.0.1:9/token"}`, "token_uri"},
		{"another universe", `{"type":"service_account","private_key":"k","client_email":"m","universe_domain":"evil.example"}`, "universe_domain"},
		{"no private key", `{"type":"service_account","client_email":"m"}`, "private_key"},
		{"not JSON", `-----BEGIN PRIVATE KEY-----`, "not JSON"},
	} {
		_, err := serviceAccountKey([]byte(tc.key))
		if err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.says)
		}
	}
	// Fields a key file does not have are dropped, not passed on.
	out, err := serviceAccountKey([]byte(strings.Replace(good, "{", `{"credential_source":{"file":"/proc/self/environ"},`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "credential_source") || !strings.Contains(string(out), "m@p.iam.gserviceaccount.com") {
		t.Fatalf("cleaned key %s", out)
	}
	// Through the backend: refused before any connection.
	b := Backend{GCS: &GCSBackend{Bucket: "b", CredentialsJSON: []byte(`{"type":"external_account"}`)}}
	if _, err := b.storage(context.Background(), false, false, throttling.Limits{}); ClassOf(err) != ClassInvalidConfig {
		t.Fatalf("class %s (%v), want InvalidConfig", ClassOf(err), err)
	}
}
