package kopia_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/snapflow/snapflow/internal/kopia"
)

// Many changed directories two levels deep, read in parallel, and new files
// both in a known directory and in a directory the previous snapshot did not
// have: every read file lands on the right side.
func TestNewAndModifiedAcrossManyDirectories(t *testing.T) {
	ctx := context.Background()
	r, err := kopia.Open(ctx, kopia.OpenOptions{Backend: kopia.Backend{Filesystem: &kopia.FilesystemBackend{Path: filepath.Join(t.TempDir(), "repo")}},
		Password: "pw", Create: &kopia.CreateOptions{}, WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	data := t.TempDir()
	write := func(rel, content string) {
		t.Helper()
		p := filepath.Join(data, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const dirs, perDir = 300, 4
	for i := 0; i < dirs; i++ {
		for f := 0; f < perDir; f++ {
			write(fmt.Sprintf("g%d/d%03d/m%d.txt", i%3, i, f), "a")
		}
		write(fmt.Sprintf("g%d/d%03d/same.txt", i%3, i), "b")
	}
	if _, err := r.Snapshot(ctx, kopia.SnapshotRequest{Dir: data, Source: src}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	for i := 0; i < dirs; i++ {
		for f := 0; f < perDir; f++ {
			write(fmt.Sprintf("g%d/d%03d/m%d.txt", i%3, i, f), "changed")
		}
	}
	write("g0/d000/new.txt", "new")
	write("g9/fresh/new.txt", "new")
	res, err := r.Snapshot(ctx, kopia.SnapshotRequest{Dir: data, Source: src})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stats.FilesModified != dirs*perDir || res.Stats.FilesNew != 2 || res.Stats.FilesUnchanged != dirs {
		t.Fatalf("stats %+v: want %d modified, 2 new, %d unchanged", res.Stats, dirs*perDir, dirs)
	}
}
