package kopia_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snapflow/snapflow/internal/kopia"
)

// A Restore's spec.options reach the files it writes: each case restores
// one snapshot over a target prepared to tell the option's effect apart,
// and checks the effect, not the mapping.
func TestRestoreOptionsReachTheFilesystem(t *testing.T) {
	ctx := context.Background()
	r := newFilesystemRepo(t)
	data := t.TempDir()
	write := func(rel, content string, mode os.FileMode) {
		t.Helper()
		p := filepath.Join(data, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // past the umask
			t.Fatal(err)
		}
	}
	write("private.txt", "secret", 0o600)
	write("dir/file.txt", "in a directory", 0o644)
	// A file that is one large hole: sparse when written as such.
	sparse, err := os.Create(filepath.Join(data, "sparse.img"))
	if err != nil {
		t.Fatal(err)
	}
	if err := sparse.Truncate(8 << 20); err != nil {
		t.Fatal(err)
	}
	sparse.Close()
	if err := os.Symlink("private.txt", filepath.Join(data, "link")); err != nil {
		t.Fatal(err)
	}
	old := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := os.Chtimes(filepath.Join(data, "dir", "file.txt"), old, old); err != nil {
		t.Fatal(err)
	}
	snap, err := r.Snapshot(ctx, kopia.SnapshotRequest{Dir: data, Source: src})
	if err != nil {
		t.Fatal(err)
	}
	defaults := kopia.RestoreOptions{Parallel: 2, OverwriteFiles: true, OverwriteDirectories: true, OverwriteSymlinks: true, IgnorePermissionErrors: true}
	restore := func(t *testing.T, prepare func(dir string), change func(*kopia.RestoreOptions)) (string, kopia.RestoreStats, error) {
		t.Helper()
		dir := t.TempDir()
		if prepare != nil {
			prepare(dir)
		}
		o := defaults
		change(&o)
		st, err := r.Restore(ctx, snap.ID, dir, o)
		return dir, st, err
	}
	mode := func(t *testing.T, p string) os.FileMode {
		t.Helper()
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Mode()
	}
	t.Run("skipPermissions", func(t *testing.T) {
		// kopia creates each file private (0600) and then gives it the
		// backed-up mode, which skipPermissions leaves out.
		shared := filepath.Join("dir", "file.txt")
		dir, _, err := restore(t, nil, func(o *kopia.RestoreOptions) {})
		if err != nil || mode(t, filepath.Join(dir, shared)).Perm() != 0o644 {
			t.Fatalf("by default the backed-up mode 0644 is restored: %v %v", mode(t, filepath.Join(dir, shared)), err)
		}
		dir, _, err = restore(t, nil, func(o *kopia.RestoreOptions) { o.SkipPermissions = true })
		if err != nil || mode(t, filepath.Join(dir, shared)).Perm() == 0o644 {
			t.Fatalf("skipPermissions restored the backed-up mode 0644: %v", err)
		}
	})
	t.Run("skipTimes", func(t *testing.T) {
		for _, skip := range []bool{false, true} {
			dir, _, err := restore(t, nil, func(o *kopia.RestoreOptions) { o.SkipTimes = skip })
			if err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(filepath.Join(dir, "dir", "file.txt"))
			if err != nil {
				t.Fatal(err)
			}
			if got := fi.ModTime().UTC().Equal(old); got == skip {
				t.Fatalf("skipTimes %v: modification time %v", skip, fi.ModTime())
			}
		}
	})
	t.Run("writeSparseFiles", func(t *testing.T) {
		blocks := func(skipSparse bool) int64 {
			dir, _, err := restore(t, nil, func(o *kopia.RestoreOptions) { o.WriteSparseFiles = !skipSparse })
			if err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(filepath.Join(dir, "sparse.img"))
			if err != nil || fi.Size() != 8<<20 {
				t.Fatalf("sparse.img: %v %v", fi, err)
			}
			return fi.Sys().(*syscall.Stat_t).Blocks * 512
		}
		dense, holes := blocks(true), blocks(false)
		if dense < 8<<20 {
			t.Skipf("this filesystem stores zero-filled files sparsely on its own (%d bytes allocated), so the option cannot be told apart here", dense)
		}
		if holes >= 1<<20 {
			t.Fatalf("writeSparseFiles: %d bytes allocated for an 8 MiB hole (without it: %d)", holes, dense)
		}
	})
	occupied := func(dir string) {
		if err := os.WriteFile(filepath.Join(dir, "private.txt"), []byte("local edit"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("overwriteFiles and ignoreErrors", func(t *testing.T) {
		if _, _, err := restore(t, occupied, func(o *kopia.RestoreOptions) { o.OverwriteFiles = false }); err == nil {
			t.Fatal("overwriteFiles false over an existing file: no error")
		}
		dir, st, err := restore(t, occupied, func(o *kopia.RestoreOptions) { o.OverwriteFiles, o.IgnoreErrors = false, true })
		if err != nil || st.Errors == 0 {
			t.Fatalf("ignoreErrors: %v, %d errors counted", err, st.Errors)
		}
		if b, _ := os.ReadFile(filepath.Join(dir, "private.txt")); string(b) != "local edit" {
			t.Fatalf("the existing file was replaced: %q", b)
		}
		if b, _ := os.ReadFile(filepath.Join(dir, "dir", "file.txt")); string(b) != "in a directory" {
			t.Fatalf("ignoreErrors did not go on with the rest: %q", b)
		}
	})
	t.Run("overwriteDirectories", func(t *testing.T) {
		existing := func(dir string) {
			if err := os.MkdirAll(filepath.Join(dir, "dir"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, err := restore(t, existing, func(o *kopia.RestoreOptions) { o.OverwriteDirectories = false }); err == nil || !strings.Contains(err.Error(), "dir") {
			t.Fatalf("overwriteDirectories false over an existing directory: %v", err)
		}
		if _, _, err := restore(t, existing, func(o *kopia.RestoreOptions) {}); err != nil {
			t.Fatalf("by default an existing directory is restored into: %v", err)
		}
	})
	t.Run("overwriteSymlinks", func(t *testing.T) {
		existing := func(dir string) {
			if err := os.Symlink("elsewhere", filepath.Join(dir, "link")); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, err := restore(t, existing, func(o *kopia.RestoreOptions) { o.OverwriteSymlinks = false }); err == nil {
			t.Fatal("overwriteSymlinks false over an existing symlink: no error")
		}
		dir, _, err := restore(t, existing, func(o *kopia.RestoreOptions) {})
		if err != nil {
			t.Fatal(err)
		}
		if target, _ := os.Readlink(filepath.Join(dir, "link")); target != "private.txt" {
			t.Fatalf("by default the symlink is replaced: it points at %q", target)
		}
	})
	t.Run("writeFilesAtomically", func(t *testing.T) {
		dir, _, err := restore(t, nil, func(o *kopia.RestoreOptions) { o.WriteFilesAtomically = true })
		if err != nil {
			t.Fatal(err)
		}
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if strings.Contains(e.Name(), ".tmp") || strings.HasPrefix(e.Name(), ".") {
				t.Fatalf("an atomic write left %s behind", e.Name())
			}
		}
		sameTree(t, data, dir)
	})
}
