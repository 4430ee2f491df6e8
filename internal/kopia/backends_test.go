package kopia_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/snapflow/snapflow/internal/kopia"
	"github.com/snapflow/snapflow/test/backendsrv"
	"github.com/snapflow/snapflow/test/harness"
)

func TestWebDAVRepository(t *testing.T) {
	srv := backendsrv.StartWebDAV(t.TempDir(), "backup", "dav-secret")
	t.Cleanup(srv.Close)
	exercise(t, kopia.Backend{WebDAV: &kopia.WebDAVBackend{URL: srv.URL + "/repo", Username: "backup", Password: "dav-secret"}})

	// Wrong credentials are told apart from a missing repository.
	_, err := kopia.Open(context.Background(), kopia.OpenOptions{Password: "pw",
		Backend: kopia.Backend{WebDAV: &kopia.WebDAVBackend{URL: srv.URL + "/repo", Username: "backup", Password: "wrong"}}})
	if kopia.ClassOf(err) != kopia.ClassAccessDenied {
		t.Fatalf("wrong WebDAV password: class %s (%v), want %s", kopia.ClassOf(err), err, kopia.ClassAccessDenied)
	}
}

func TestSFTPRepository(t *testing.T) {
	authorized, key, err := backendsrv.ClientKey()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := backendsrv.StartSFTP("backup", "ssh-secret", authorized)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	at := func(mut func(*kopia.SFTPBackend)) kopia.Backend {
		b := &kopia.SFTPBackend{Host: srv.Host, Port: srv.Port, Path: "/backups/repo", Username: "backup", PrivateKey: key, KnownHosts: srv.KnownHosts}
		mut(b)
		return kopia.Backend{SFTP: b}
	}
	exercise(t, at(func(*kopia.SFTPBackend) {}))

	// The same repository opens with the password instead of the key.
	r, err := kopia.Open(context.Background(), kopia.OpenOptions{Password: "pw", ReadOnly: true,
		Backend: at(func(b *kopia.SFTPBackend) { b.PrivateKey, b.Password = "", "ssh-secret" })})
	if err != nil {
		t.Fatalf("open with the SSH password: %v", err)
	}
	r.Close(context.Background())

	other, err := backendsrv.StartSFTP("backup", "ssh-secret", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Close)
	for _, tc := range []struct {
		name  string
		mut   func(*kopia.SFTPBackend)
		class string
		says  string
	}{
		{"wrong password", func(b *kopia.SFTPBackend) { b.PrivateKey, b.Password = "", "wrong" }, kopia.ClassAccessDenied, "unable to authenticate"},
		{"no known_hosts entry: never trusted on first use", func(b *kopia.SFTPBackend) { b.KnownHosts = "" }, kopia.ClassInvalidConfig, "KOPIA_SFTP_KNOWN_HOSTS_DATA"},
		{"another server's key", func(b *kopia.SFTPBackend) {
			b.KnownHosts = strings.Replace(other.KnownHosts, "127.0.0.1]:"+strconv.Itoa(other.Port), "127.0.0.1]:"+strconv.Itoa(srv.Port), 1)
		}, kopia.ClassHostKeyRejected, "knownhosts"},
		{"known_hosts for another host only", func(b *kopia.SFTPBackend) { b.KnownHosts = other.KnownHosts }, kopia.ClassHostKeyRejected, "knownhosts"},
		{"no credentials", func(b *kopia.SFTPBackend) { b.PrivateKey = "" }, kopia.ClassInvalidConfig, "KOPIA_SFTP_PASSWORD"},
	} {
		_, err := kopia.Open(context.Background(), kopia.OpenOptions{Password: "pw", Backend: at(tc.mut)})
		if kopia.ClassOf(err) != tc.class || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: class %s (%v), want %s saying %q", tc.name, kopia.ClassOf(err), err, tc.class, tc.says)
		}
	}
}

// A fake service account key: the emulator accepts any, and the Google
// client, pointed at it, sends none.
const gcsKey = `{"type":"service_account","project_id":"test","private_key_id":"1","private_key":"unused by the emulator","client_email":"mover@test.iam.gserviceaccount.com","client_id":"1","token_uri":"https://oauth2.googleapis.com/token"}`

func TestGCSRepository(t *testing.T) {
	harness.RequireTool(t, "fake-gcs-server")
	g, err := harness.StartGCS("kopia-repo")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Stop)
	t.Setenv("STORAGE_EMULATOR_HOST", g.Host)
	at := func(mut func(*kopia.GCSBackend)) kopia.Backend {
		b := &kopia.GCSBackend{Bucket: "kopia-repo", Prefix: "tryit/", CredentialsJSON: []byte(gcsKey)}
		mut(b)
		return kopia.Backend{GCS: b}
	}
	exercise(t, at(func(*kopia.GCSBackend) {}))
	if s := at(func(*kopia.GCSBackend) {}).String(); strings.Contains(s, "private_key") || s != "gs://kopia-repo/tryit/" {
		t.Fatalf("String() = %q", s)
	}

	for _, tc := range []struct {
		name  string
		mut   func(*kopia.GCSBackend)
		class string
		says  string
	}{
		{"a bucket that does not exist", func(b *kopia.GCSBackend) { b.Bucket = "no-such-bucket" }, kopia.ClassBucketMissing, "no-such-bucket"},
		{"no key: never the node's identity", func(b *kopia.GCSBackend) { b.CredentialsJSON = nil }, kopia.ClassInvalidConfig, "KOPIA_GCS_CREDENTIALS_JSON"},
		{"a key that is not JSON", func(b *kopia.GCSBackend) { b.CredentialsJSON = []byte("-----BEGIN PRIVATE KEY-----") }, kopia.ClassInvalidConfig, "not JSON"},
	} {
		_, err := kopia.Open(context.Background(), kopia.OpenOptions{Password: "pw", Create: &kopia.CreateOptions{}, Backend: at(tc.mut)})
		if kopia.ClassOf(err) != tc.class || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: class %s (%v), want %s saying %q", tc.name, kopia.ClassOf(err), err, tc.class, tc.says)
		}
	}
}
