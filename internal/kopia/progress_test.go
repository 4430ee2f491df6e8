package kopia_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/snapflow/snapflow/internal/kopia"
)

// Backups and restores report running totals with what they expect to
// move: a backup the previous snapshot's size, a restore the snapshot's.
func TestProgressCarriesTheEstimate(t *testing.T) {
	ctx := context.Background()
	r, err := kopia.Open(ctx, kopia.OpenOptions{Backend: kopia.Backend{Filesystem: &kopia.FilesystemBackend{Path: filepath.Join(t.TempDir(), "repo")}},
		Password: "pw", Create: &kopia.CreateOptions{}, WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	data := t.TempDir()
	write := func() {
		buf := make([]byte, 256<<10)
		for i := range 6 {
			_, _ = rand.Read(buf)
			if err := os.WriteFile(filepath.Join(data, fmt.Sprintf("f%d", i)), buf, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	var mu sync.Mutex
	var backups []kopia.Progress
	backup := func() kopia.SnapshotResult {
		backups = nil
		res, err := r.Snapshot(ctx, kopia.SnapshotRequest{Dir: data, Source: src, ProgressInterval: time.Nanosecond,
			Progress: func(p kopia.Progress) { mu.Lock(); backups = append(backups, p); mu.Unlock() }})
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(backups) == 0 || backups[len(backups)-1].BytesHashed == 0 {
			t.Fatalf("no progress with bytes read: %+v", backups)
		}
		return res
	}
	write()
	first := backup()
	if e := backups[len(backups)-1].EstimatedBytes; e != 0 {
		t.Fatalf("a first backup has no previous snapshot to estimate from, got %d", e)
	}
	write()
	backup()
	if e := backups[len(backups)-1].EstimatedBytes; e != first.Stats.SizeBytes || e != 6*256<<10 {
		t.Fatalf("estimate %d, want the previous snapshot's size %d", e, first.Stats.SizeBytes)
	}

	var restores []kopia.RestoreStats
	st, err := r.Restore(ctx, first.ID, t.TempDir(), kopia.RestoreOptions{Parallel: 1, ProgressInterval: time.Nanosecond,
		Progress: func(s kopia.RestoreStats) { restores = append(restores, s) }})
	if err != nil {
		t.Fatal(err)
	}
	if st.TotalBytes != first.Stats.SizeBytes || st.Bytes != st.TotalBytes {
		t.Fatalf("restore stats %+v, want all of %d bytes", st, first.Stats.SizeBytes)
	}
	var grew bool
	for i, s := range restores {
		if s.TotalBytes != first.Stats.SizeBytes {
			t.Fatalf("restore progress %d has total %d, want %d", i, s.TotalBytes, first.Stats.SizeBytes)
		}
		if i > 0 && s.Bytes < restores[i-1].Bytes {
			t.Fatalf("restore progress went back: %+v", restores)
		}
		grew = grew || s.Bytes > 0 && s.Bytes < st.TotalBytes
	}
	if !grew {
		t.Fatalf("no progress between start and end: %+v", restores)
	}
}
