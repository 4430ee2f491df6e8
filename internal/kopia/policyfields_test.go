package kopia_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/internal/kopia"
)

// A SnapshotPolicy's compression, files.ignoreCacheDirs and
// errorHandling.ignoreUnknownTypes reach kopia's uploader from the spec a
// user writes (through PolicyFromSpec, as the mover builds it), and change
// what is stored: compressed data takes less room, a directory tagged as a
// cache is left out, and a named pipe does not fail the backup.
func TestPolicyFieldsShapeTheSnapshot(t *testing.T) {
	ctx := context.Background()
	data := t.TempDir()
	text := bytes.Repeat([]byte("the same line of an easily compressed log file\n"), 90_000) // about 4 MiB
	if err := os.WriteFile(filepath.Join(data, "app.log"), text, 0o644); err != nil {
		t.Fatal(err)
	}
	// Kept as is: neverCompress names its extension.
	if err := os.WriteFile(filepath.Join(data, "archive.gz"), bytes.Repeat([]byte("not really gzip, but named so\n"), 36_000), 0o644); err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(data, "thumbnails")
	if err := os.MkdirAll(cache, 0o755); err != nil {
		t.Fatal(err)
	}
	// The tag the Cache Directory Tagging Specification defines.
	if err := os.WriteFile(filepath.Join(cache, "CACHEDIR.TAG"), []byte("Signature: 8a477f597d28d172789f06886806bc55\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cache, "thumb.bin"), []byte("regenerated on demand"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(data, "control.pipe"), 0o600); err != nil {
		t.Fatal(err)
	}
	yes, no := true, false

	backup := func(spec snapv1.SnapshotPolicySpec) (repoBytes int64, restored string, res kopia.SnapshotResult, err error) {
		t.Helper()
		repoDir := t.TempDir()
		r, err := kopia.Open(ctx, kopia.OpenOptions{Backend: kopia.Backend{Filesystem: &kopia.FilesystemBackend{Path: repoDir}}, Password: "pw",
			Create: &kopia.CreateOptions{}, Username: src.Username, Hostname: src.Hostname})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close(ctx)
		res, err = r.Snapshot(ctx, kopia.SnapshotRequest{Dir: data, Source: src, Policy: kopia.PolicyFromSpec(&spec)})
		if err != nil {
			return 0, "", res, err
		}
		restored = t.TempDir()
		if _, err := r.Restore(ctx, res.ID, restored, kopia.RestoreOptions{}); err != nil {
			t.Fatal(err)
		}
		return treeBytes(t, repoDir), restored, res, nil
	}

	// kopia skips tagged caches unless told not to.
	plain, plainDir, _, err := backup(snapv1.SnapshotPolicySpec{Files: &snapv1.Files{IgnoreCacheDirs: &no}, ErrorHandling: &snapv1.ErrorHandling{IgnoreUnknownTypes: &yes}})
	if err != nil {
		t.Fatal(err)
	}
	shaped, shapedDir, shapedRes, err := backup(snapv1.SnapshotPolicySpec{
		Compression:   &snapv1.Compression{Compressor: "zstd", NeverCompress: []string{"*.gz"}},
		Files:         &snapv1.Files{IgnoreCacheDirs: &yes},
		ErrorHandling: &snapv1.ErrorHandling{IgnoreUnknownTypes: &yes},
	})
	if err != nil {
		t.Fatal(err)
	}
	if shapedRes.Stats.FilesFailed != 0 || shapedRes.Incomplete != "" {
		t.Fatalf("ignoreUnknownTypes: true still counted the named pipe as an error: %+v", shapedRes)
	}
	// Uncompressed, the log alone takes 4 MiB; compressed, next to
	// nothing, while the .gz file's 1 MiB stays as it is.
	if plain < 5<<20 || shaped > plain-(3<<20) || shaped < 1<<20 {
		t.Fatalf("repository bytes: %d without compression, %d with zstd and *.gz never compressed; want the log compressed and the .gz not", plain, shaped)
	}
	if _, err := os.Stat(filepath.Join(plainDir, "thumbnails", "thumb.bin")); err != nil {
		t.Fatalf("with ignoreCacheDirs: false the tagged directory is backed up: %v", err)
	}
	// kopia keeps the tagged directory and its tag, not what it caches.
	if _, err := os.Stat(filepath.Join(shapedDir, "thumbnails", "thumb.bin")); !os.IsNotExist(err) {
		t.Fatalf("with ignoreCacheDirs the tagged directory's contents are left out, got %v", err)
	}
	if got, err := os.ReadFile(filepath.Join(shapedDir, "app.log")); err != nil || !bytes.Equal(got, text) {
		t.Fatalf("the compressed log does not restore as it was (%v)", err)
	}

	// A named pipe is an unknown type to kopia: ignored when asked, else
	// an error the snapshot records.
	_, _, res, err := backup(snapv1.SnapshotPolicySpec{ErrorHandling: &snapv1.ErrorHandling{IgnoreUnknownTypes: &no}})
	if err == nil && res.Incomplete == "" && res.Stats.FilesFailed == 0 && res.IgnoredErrors == 0 {
		t.Fatalf("ignoreUnknownTypes: false backed up a named pipe without a word: %+v", res)
	}
}

func treeBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() {
			n += info.Size()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
