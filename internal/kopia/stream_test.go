package kopia_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/snapflow/snapflow/internal/kopia"
)

// A stream is uploaded as one file under the source's path, and restores
// byte for byte; a stream whose command failed saves nothing, even with
// file errors ignored, as its output may be cut anywhere.
func TestStreamSnapshot(t *testing.T) {
	ctx := context.Background()
	r := newFilesystemRepo(t)
	streamSrc := kopia.Source{Username: "u", Hostname: "h", Path: "/stream/db.sql"}
	body := make([]byte, 2<<20)
	if _, err := rand.Read(body); err != nil {
		t.Fatal(err)
	}
	ok := func() error { return nil }
	res, err := r.Snapshot(ctx, kopia.SnapshotRequest{Source: streamSrc,
		Stream: &kopia.Stream{Name: "db.sql", Reader: io.NopCloser(bytes.NewReader(body)), Result: ok}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stats.SizeBytes != int64(len(body)) || res.Stats.Files != 1 {
		t.Fatalf("stats %+v, want one file of %d bytes", res.Stats, len(body))
	}
	dir := t.TempDir()
	if _, err := r.Restore(ctx, res.ID, dir, kopia.RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "db.sql"))
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("restored %d bytes (%v), want the %d streamed", len(got), err, len(body))
	}

	failed := errors.New(`"pg_dump" exited with code 1; stderr: connection refused`)
	_, err = r.Snapshot(ctx, kopia.SnapshotRequest{Source: streamSrc, Policy: kopia.Policy{IgnoreFileErrors: ptr(true)},
		Stream: &kopia.Stream{Name: "db.sql", Reader: io.NopCloser(bytes.NewReader(body[:1000])), Result: func() error { return failed }}})
	if kopia.ClassOf(err) != kopia.ClassCommandFailed || !errors.Is(err, failed) {
		t.Fatalf("failed command: class %s (%v)", kopia.ClassOf(err), err)
	}
	if list, err := r.List(ctx, &streamSrc); err != nil || len(list) != 1 {
		t.Fatalf("%d snapshots after one good and one failed stream (%v), want 1", len(list), err)
	}
}
