package kopia_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/snapflow/snapflow/internal/kopia"
	"github.com/snapflow/snapflow/test/backendsrv"
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
