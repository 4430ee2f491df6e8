package kopia

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/kopia/kopia/fs/localfs"
	"github.com/kopia/kopia/repo/object"
	"github.com/kopia/kopia/snapshot"
)

// A snapshot from a prefetched listing must equal one read live: with
// ignoreIdenticalSnapshots the second run of the same tree is Unchanged only
// when kopia built the same root.
func TestPrefetchedSnapshotEqualsLiveRead(t *testing.T) {
	cases := []struct {
		name  string
		limit int
		// tick, when set, advances the clock by that much on every reading
		// after the walk: listings and entries age as the upload goes.
		tick time.Duration
		// change runs after the walk and before the upload.
		change func(t *testing.T, data string)
		// wantServed is the number of listings the upload takes (-1: at
		// least the root's).
		wantServed int
	}{
		{name: "whole tree listed ahead", limit: prefetchCap, wantServed: 5},
		// The root's five entries fit, then the cap is reached.
		{name: "cap reached: the rest is read live", limit: 5, wantServed: 1},
		{name: "stale listings are read live", limit: prefetchCap, tick: time.Hour, wantServed: 0,
			change: func(t *testing.T, data string) {
				must(t, os.WriteFile(filepath.Join(data, "a", "created-since"), []byte("new"), 0o644))
				must(t, os.Rename(filepath.Join(data, "c", "two"), filepath.Join(data, "c", "two.1")))
			}},
		// The root's listing is young when taken, its entries old when
		// handed out: each is stated again.
		{name: "entries gone stale are stated again", limit: prefetchCap, tick: 1500 * time.Millisecond, wantServed: -1,
			change: func(t *testing.T, data string) {
				must(t, os.Remove(filepath.Join(data, "top")))
				must(t, os.WriteFile(filepath.Join(data, "a", "one"), []byte("longer than before"), 0o644))
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
			p := startPrefetch(data, tc.limit, 2*time.Second, clock.now)
			<-p.done // the whole walk, as when the repository takes long to open
			clock.arm(tc.tick)
			if tc.change != nil {
				tc.change(t, data)
			}
			first, err := r.Snapshot(ctx, SnapshotRequest{Dir: data, Source: src, Prefetch: p})
			must(t, err)
			if first.Stats.FilesFailed != 0 {
				t.Fatalf("prefetched run failed files: %+v", first.Stats)
			}
			if served := int(p.served.Load()); served != tc.wantServed && (tc.wantServed >= 0 || served < 1) {
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

// stepClock stands still until armed, then advances by tick on every reading.
type stepClock struct {
	mu   sync.Mutex
	t    time.Time
	tick time.Duration
}

func (c *stepClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(c.tick)
	return c.t
}

func (c *stepClock) arm(tick time.Duration) {
	c.mu.Lock()
	c.tick = tick
	c.mu.Unlock()
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// A walk that never ends (a hung mount) does not hold up the upload: it
// reads the source live.
func TestPrefetchStuckWalkIsAbandoned(t *testing.T) {
	p := &Prefetch{done: make(chan struct{}), dirs: map[string]listing{}, now: time.Now, maxAge: time.Minute, limit: prefetchCap}
	d, err := localfs.Directory(t.TempDir())
	must(t, err)
	start := time.Now()
	if got := p.source(d); got != d {
		t.Fatalf("source = %T, want the live directory", got)
	}
	if waited := time.Since(start); waited > 10*prefetchStopWait {
		t.Fatalf("waited %v for a stuck walk", waited)
	}
	start = time.Now()
	p.Stop() // the deferred Stops do not wait for it again
	if waited := time.Since(start); waited >= prefetchStopWait {
		t.Fatalf("a second stop waited %v for an abandoned walk", waited)
	}
}

// kopia recognises shallow placeholders by their type; the prefetch must
// hand them out unwrapped.
func TestPrefetchKeepsShallowPlaceholders(t *testing.T) {
	dir := t.TempDir()
	ph, err := localfs.WriteShallowPlaceholder(filepath.Join(dir, "sub"), &snapshot.DirEntry{Name: "sub", Type: snapshot.EntryTypeDirectory, ObjectID: mustOID(t, "k0123456789abcdef0123456789abcdef")})
	must(t, err)
	e, err := localfs.NewEntry(ph)
	must(t, err)
	if _, ok := e.(snapshot.HasDirEntryOrNil); !ok {
		t.Fatalf("kopia no longer reads %s as a placeholder (%T)", ph, e)
	}
	p := &Prefetch{}
	if got := p.wrapEntry(e); got != e {
		t.Fatalf("placeholder wrapped as %T", got)
	}
	plain, err := localfs.Directory(dir)
	must(t, err)
	if _, ok := p.wrapEntry(plain).(*prefetchedDir); !ok {
		t.Fatal("a plain directory must be wrapped")
	}
}

func mustOID(t *testing.T, s string) object.ID {
	t.Helper()
	id, err := object.ParseID(s)
	must(t, err)
	return id
}
