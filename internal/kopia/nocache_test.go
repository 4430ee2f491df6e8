package kopia_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/snapflow/snapflow/internal/kopia"
)

// TestNoCache covers the one-pass readers: a restore leaves no cache behind,
// and a verification sees damage that a warm cache would have hidden.
func TestNoCache(t *testing.T) {
	ctx := context.Background()
	work := t.TempDir()
	r, dir, data, id := seededRepo(t, work)
	backend := kopia.Backend{Filesystem: &kopia.FilesystemBackend{Path: dir}}
	// Warm the persistent cache with every content of the snapshot.
	if _, err := r.Restore(ctx, id, t.TempDir(), kopia.RestoreOptions{Parallel: 2}); err != nil {
		t.Fatal(err)
	}
	r.Close(ctx)

	t.Run("a restore without a cache writes the same bytes and no cache", func(t *testing.T) {
		nc := t.TempDir()
		r, err := kopia.Open(ctx, kopia.OpenOptions{Backend: backend, Password: "pw", WorkDir: nc, ReadOnly: true, NoCache: true})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close(ctx)
		out := t.TempDir()
		st, err := r.Restore(ctx, id, out, kopia.RestoreOptions{Parallel: 4})
		if err != nil || st.Files != 8 {
			t.Fatalf("restore = %+v, %v", st, err)
		}
		_ = filepath.WalkDir(data, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(data, p)
			want, _ := os.ReadFile(p)
			got, err := os.ReadFile(filepath.Join(out, rel))
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("%s differs after restore: %v", rel, err)
			}
			return nil
		})
		if _, err := os.Stat(filepath.Join(nc, "cache")); !os.IsNotExist(err) {
			t.Fatalf("a cache directory was created: %v", err)
		}
	})

	t.Run("verification reads storage, not the warm cache", func(t *testing.T) {
		corruptPacks(t, dir)
		verify := func(noCache bool) kopia.VerifyResult {
			r, err := kopia.Open(ctx, kopia.OpenOptions{Backend: backend, Password: "pw", WorkDir: work, ReadOnly: true, NoCache: noCache})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close(ctx)
			v, err := r.Verify(ctx, []string{id}, kopia.VerifyOptions{FilesPercent: 100})
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		// A client with the warm cache reads the old bytes and passes: the
		// reason the verify mover opens without one.
		if v := verify(false); v.Errors != 0 {
			t.Fatalf("expected the warm cache to hide the damage (kopia's cache changed?): %+v", v)
		}
		if v := verify(true); v.Errors == 0 {
			t.Fatalf("verification without a cache missed the corrupted packs: %+v", v)
		}
	})
}
