package kopia

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// A snapshot from a prefetched listing must equal one read live: with
// ignoreIdenticalSnapshots the second run of the same tree is Unchanged only
// when kopia built the same root.
func TestPrefetchedSnapshotEqualsLiveRead(t *testing.T) {
	cases := []struct {
		name  string
		limit int
		// stale makes every listed entry older than the max age when the
		// upload reaches it; change runs after the walk and before the upload.
		stale  bool
		change func(t *testing.T, data string)
		// wantServed is the number of listings the upload takes.
		wantServed int
	}{
		{name: "whole tree listed ahead", limit: prefetchCap, wantServed: 5},
		// The root's five entries fit, then the cap is reached.
		{name: "cap reached: the rest is read live", limit: 5, wantServed: 1},
		{name: "stale entries are stated again", limit: prefetchCap, stale: true, wantServed: 5,
			change: func(t *testing.T, data string) {
				must(t, os.Remove(filepath.Join(data, "a", "one")))
				must(t, os.WriteFile(filepath.Join(data, "c", "two"), []byte("longer than before"), 0o644))
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			r, err := Open(ctx, OpenOptions{Backend: Backend{Filesystem: &FilesystemBackend{Path: filepath.Join(t.TempDir(), "repo")}},
				Password: "pw", Create: &CreateOptions{}, WorkDir: t.TempDir()})
			must(t, err)
			defer r.Close(ctx)
			data := prefetchTree(t)
			src := Source{Username: "u", Hostname: "h", Path: "/data"}

			clock := &stepClock{t: time.Unix(1_700_000_000, 0)}
			p := startPrefetch(data, tc.limit, time.Minute, clock.now)
			<-p.done // the whole walk, as when the repository takes long to open
			if tc.stale {
				clock.step(2 * time.Minute)
			}
			if tc.change != nil {
				tc.change(t, data)
			}
			first, err := r.Snapshot(ctx, SnapshotRequest{Dir: data, Source: src, Prefetch: p})
			must(t, err)
			if first.Stats.FilesFailed != 0 {
				t.Fatalf("prefetched run failed files: %+v", first.Stats)
			}
			if served := int(p.served.Load()); served != tc.wantServed {
				t.Fatalf("upload took %d prefetched listings, want %d", served, tc.wantServed)
			}
			if len(p.dirs) != 0 {
				t.Fatalf("%d listings left unused", len(p.dirs))
			}

			live, err := r.Snapshot(ctx, SnapshotRequest{Dir: data, Source: src, Policy: Policy{IgnoreIdenticalSnapshots: true}})
			must(t, err)
			if !live.Unchanged {
				t.Fatalf("a live read of the same tree differs from the prefetched snapshot (stats %+v)", live.Stats)
			}
		})
	}
}

// A prefetch nobody uses stops cleanly, and one of another directory is
// ignored by the snapshot.
func TestPrefetchOfAnotherDirectoryIsIgnored(t *testing.T) {
	ctx := context.Background()
	r, err := Open(ctx, OpenOptions{Backend: Backend{Filesystem: &FilesystemBackend{Path: filepath.Join(t.TempDir(), "repo")}},
		Password: "pw", Create: &CreateOptions{}, WorkDir: t.TempDir()})
	must(t, err)
	defer r.Close(ctx)
	StartPrefetch(prefetchTree(t)).Stop()
	var nilPrefetch *Prefetch
	nilPrefetch.Stop()

	other := StartPrefetch(prefetchTree(t))
	data := prefetchTree(t)
	res, err := r.Snapshot(ctx, SnapshotRequest{Dir: data, Source: Source{Username: "u", Hostname: "h", Path: "/data"}, Prefetch: other})
	must(t, err)
	if other.served.Load() != 0 || res.Stats.Files != 6 {
		t.Fatalf("served %d listings of another directory; stats %+v", other.served.Load(), res.Stats)
	}
}

// prefetchTree is five directories (the root, a, a/b, c, empty), six files
// and a symlink.
func prefetchTree(t *testing.T) string {
	t.Helper()
	data := t.TempDir()
	for rel, content := range map[string]string{
		"top": "t", "a/one": "1", "a/b/deep": "d", "a/b/deeper": "dd", "c/two": "2", "c/three": "3",
	} {
		p := filepath.Join(data, rel)
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, []byte(content), 0o644))
	}
	must(t, os.Mkdir(filepath.Join(data, "empty"), 0o755))
	must(t, os.Symlink("a/one", filepath.Join(data, "link")))
	return data
}

type stepClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *stepClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *stepClock) step(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
