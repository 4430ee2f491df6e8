package kopia_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snapflow/snapflow/internal/kopia"
)

// packBlobs lists the data pack files of a filesystem repository.
func packBlobs(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	_ = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		rel, _ := filepath.Rel(dir, p)
		if err == nil && !info.IsDir() && strings.HasPrefix(rel, "p") {
			out = append(out, p)
		}
		return nil
	})
	if len(out) == 0 {
		t.Fatal("the repository has no pack blobs")
	}
	return out
}

// seededRepo creates a filesystem repository (password "pw") holding one
// snapshot of 8 seeded files; work is the client's work directory.
func seededRepo(t *testing.T, work string) (r *kopia.Repo, dir, data, id string) {
	t.Helper()
	ctx := context.Background()
	dir = filepath.Join(t.TempDir(), "repo")
	r, err := kopia.Open(ctx, kopia.OpenOptions{Backend: kopia.Backend{Filesystem: &kopia.FilesystemBackend{Path: dir}}, Password: "pw", Create: &kopia.CreateOptions{}, WorkDir: work})
	if err != nil {
		t.Fatal(err)
	}
	data = t.TempDir()
	seed(t, data, 8)
	res, err := r.Snapshot(ctx, kopia.SnapshotRequest{Dir: data, Source: src})
	if err != nil {
		t.Fatal(err)
	}
	return r, dir, data, res.ID
}

// corruptPacks flips the middle quarter of every pack blob's bytes.
func corruptPacks(t *testing.T, dir string) {
	t.Helper()
	for _, p := range packBlobs(t, dir) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for i := len(b) / 4; i < len(b)/2; i++ {
			b[i] ^= 0xff
		}
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func TestVerify(t *testing.T) {
	ctx := context.Background()
	open := func(t *testing.T) (*kopia.Repo, string, string) {
		r, dir, _, id := seededRepo(t, t.TempDir())
		return r, dir, id
	}

	t.Run("a good snapshot passes, reading every file", func(t *testing.T) {
		r, _, id := open(t)
		defer r.Close(ctx)
		res, err := r.Verify(ctx, []string{id}, kopia.VerifyOptions{FilesPercent: 100})
		if err != nil || res.Errors != 0 || res.FilesRead != 8 || res.BytesRead != 8*4096 {
			t.Fatalf("verify = %+v, %v", res, err)
		}
	})
	t.Run("a missing pack blob fails without reading files", func(t *testing.T) {
		r, dir, id := open(t)
		defer r.Close(ctx)
		for _, p := range packBlobs(t, dir) {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
		}
		res, err := r.Verify(ctx, []string{id}, kopia.VerifyOptions{})
		if err != nil || res.Errors == 0 || !strings.Contains(strings.Join(res.Messages, "\n"), "missing blob") {
			t.Fatalf("verify = %+v, %v", res, err)
		}
	})
	t.Run("corrupted content fails when files are read", func(t *testing.T) {
		r, dir, id := open(t)
		r.Close(ctx)
		corruptPacks(t, dir)
		// A fresh client: nothing cached from before the damage.
		r2, err := kopia.Open(ctx, kopia.OpenOptions{Backend: kopia.Backend{Filesystem: &kopia.FilesystemBackend{Path: dir}}, Password: "pw", WorkDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		defer r2.Close(ctx)
		res, err := r2.Verify(ctx, []string{id}, kopia.VerifyOptions{FilesPercent: 100})
		if err != nil || res.Errors == 0 {
			t.Fatalf("verify = %+v, %v", res, err)
		}
	})
}
