package kopia

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
	"time"

	kfs "github.com/kopia/kopia/fs"
	"github.com/kopia/kopia/fs/localfs"
	"github.com/kopia/kopia/snapshot"
)

// Prefetch lists a source tree while the repository opens. Opening derives
// the repository key from the password (scrypt), which keeps one core busy
// for about 0.2 s and leaves the other idle; stating every file is most of
// the CPU a small incremental upload spends. The listed entries are kopia's
// own local-filesystem entries, made by the same Lstat its directory
// iterator would do, so the upload sees what it would have read itself,
// only earlier.
//
// The walk stops when the upload starts (Snapshot stops it) or when it
// holds prefetchCap entries; whatever it has not listed completely is read
// live, as without a prefetch.
//
// A listing read ahead is older than kopia's own. The upload reads a
// directory live when its listing is more than prefetchMaxAge old, so no
// file created or renamed since is left out for long; and an entry it
// reaches more than prefetchMaxAge after the listing is stated again, so a
// file deleted since is skipped as kopia's iterator skips it. Within that
// age the upload sees the tree as it was when listed.
//
// The walk knows nothing of ignore rules: it may list directories the
// upload never enters, which only costs part of the cap. A walk stuck in a
// hung mount is abandoned after prefetchStopWait and the upload reads live.
type Prefetch struct {
	limit  int
	maxAge time.Duration
	now    func() time.Time

	// root is the source's path as kopia names it; set by the walk, read
	// after done is closed.
	root    string
	stopped atomic.Bool
	done    chan struct{}
	// abandoned is set once a stop timed out, so later stops do not wait again.
	abandoned atomic.Bool

	mu sync.Mutex
	// dirs are complete listings by directory path. Each is handed out
	// once: kopia recycles an entry when the upload closes it.
	dirs map[string]listing
	held int
	// served counts listings the upload took from the prefetch.
	served atomic.Int64
}

type listing struct {
	entries []kfs.Entry
	at      time.Time
}

const (
	// prefetchCap bounds the entries a prefetch holds (a few hundred bytes
	// each with its path: about 25 MiB at the cap).
	prefetchCap = 100_000
	// prefetchMaxAge is how old a listing, or an entry, may be when the
	// upload reaches it.
	prefetchMaxAge = 2 * time.Second
	// prefetchStopWait bounds how long the upload waits for the walk to end.
	prefetchStopWait = time.Second
)

// readDirBatch is how many names one ReadDir call returns, as kopia's iterator.
const readDirBatch = 256

// StartPrefetch begins listing dir in the background. The caller passes the
// result to SnapshotRequest.Prefetch, or calls Stop when no snapshot follows.
func StartPrefetch(dir string) *Prefetch {
	return startPrefetch(dir, prefetchCap, prefetchMaxAge, time.Now)
}

func startPrefetch(dir string, limit int, maxAge time.Duration, now func() time.Time) *Prefetch {
	p := &Prefetch{limit: limit, maxAge: maxAge, now: now, done: make(chan struct{}), dirs: map[string]listing{}}
	go func() {
		defer close(p.done)
		root, err := localfs.Directory(dir)
		if err != nil {
			return // the snapshot reports it
		}
		defer root.Close()
		p.root = root.LocalFilesystemPath()
		p.walk(p.root)
	}()
	return p
}

// Stop ends the walk and waits for it, at most prefetchStopWait. It is safe
// to call more than once and on nil.
func (p *Prefetch) Stop() {
	if p != nil {
		p.stop()
	}
}

// stop reports whether the walk ended; a walk blocked in a system call (a
// hung mount) is left behind and its listings are never used.
func (p *Prefetch) stop() bool {
	p.stopped.Store(true)
	if p.abandoned.Load() {
		return false
	}
	select {
	case <-p.done:
		return true
	case <-time.After(prefetchStopWait):
		p.abandoned.Store(true)
		return false
	}
}

// walk lists dir and then its subdirectories, depth first in directory
// order (the order the upload visits them). It returns false once stopped.
func (p *Prefetch) walk(dir string) bool {
	entries, ok := p.list(dir)
	if !ok {
		return !p.stopped.Load()
	}
	for _, e := range entries {
		if _, isDir := e.(kfs.Directory); !isDir {
			continue
		}
		if !p.walk(e.LocalFilesystemPath()) {
			return false
		}
	}
	return true
}

// list reads one directory completely and publishes it. Any error other
// than an entry vanishing leaves the directory unlisted, so the upload reads
// it live and reports the error exactly as kopia would.
func (p *Prefetch) list(dir string) ([]kfs.Entry, bool) {
	if p.held >= p.limit {
		p.stopped.Store(true)
		return nil, false
	}
	f, err := os.Open(dir) //nolint:gosec // the source volume is what we back up
	if err != nil {
		return nil, false
	}
	defer f.Close() //nolint:errcheck
	var entries []kfs.Entry
	abandon := func() ([]kfs.Entry, bool) {
		closeAll(entries)
		return nil, false
	}
	prefix := dir + string(os.PathSeparator)
	for {
		batch, err := f.ReadDir(readDirBatch)
		for _, de := range batch {
			if p.stopped.Load() || p.held+len(entries) >= p.limit {
				p.stopped.Store(true)
				return abandon()
			}
			e, err := localfs.NewEntry(prefix + de.Name())
			if errors.Is(err, fs.ErrNotExist) {
				continue // removed since ReadDir, as kopia's iterator skips it
			}
			if err != nil {
				return abandon()
			}
			entries = append(entries, e)
		}
		if errors.Is(err, io.EOF) || (err == nil && len(batch) == 0) {
			break
		}
		if err != nil {
			return abandon()
		}
	}
	p.mu.Lock()
	p.dirs[dir] = listing{entries: entries, at: p.now()}
	p.held += len(entries)
	p.mu.Unlock()
	return entries, true
}

// take hands out dir's listing once.
func (p *Prefetch) take(dir string) (listing, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	l, ok := p.dirs[dir]
	delete(p.dirs, dir)
	return l, ok
}

// source stops the walk and returns the upload's source directory d,
// reading prefetched listings where there are any. A prefetch of another
// directory (or none) leaves d as it is.
func (p *Prefetch) source(d kfs.Directory) kfs.Directory {
	if p == nil {
		return d
	}
	if !p.stop() || p.root == "" || p.root != d.LocalFilesystemPath() {
		return d
	}
	return &prefetchedDir{Directory: d, p: p}
}

// prefetchedDir is a local directory whose listing may have been read ahead.
type prefetchedDir struct {
	kfs.Directory
	p *Prefetch
}

func (d *prefetchedDir) Iterate(ctx context.Context) (kfs.DirectoryIterator, error) {
	if l, ok := d.p.take(d.LocalFilesystemPath()); ok {
		if d.p.young(l) {
			d.p.served.Add(1)
			return &listIterator{listing: l, p: d.p}, nil
		}
		// Too old: names created or renamed since would be missing.
		closeAll(l.entries)
	}
	it, err := d.Directory.Iterate(ctx)
	if err != nil {
		return nil, err //nolint:wrapcheck // kopia's own error, unchanged
	}
	return &liveIterator{DirectoryIterator: it, p: d.p}, nil
}

// listIterator returns a prefetched listing.
type listIterator struct {
	listing
	p *Prefetch
}

func (it *listIterator) Next(context.Context) (kfs.Entry, error) {
	for len(it.entries) > 0 {
		e := it.entries[0]
		it.entries[0] = nil
		it.entries = it.entries[1:]
		if it.p.young(it.listing) {
			return it.p.wrapEntry(e), nil
		}
		// Too old: state it again, as kopia's iterator would now.
		path := e.LocalFilesystemPath()
		e.Close()
		fresh, err := localfs.NewEntry(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("error reading directory: %w", err)
		}
		return it.p.wrapEntry(fresh), nil
	}
	return nil, nil
}

// Close recycles entries the upload did not ask for.
func (it *listIterator) Close() {
	closeAll(it.entries)
	it.entries = nil
}

// young says whether l is recent enough to hand out as listed.
func (p *Prefetch) young(l listing) bool { return p.now().Sub(l.at) <= p.maxAge }

// closeAll recycles entries (kopia pools them).
func closeAll(entries []kfs.Entry) {
	for _, e := range entries {
		e.Close()
	}
}

// liveIterator reads a directory that was not prefetched; its
// subdirectories may still have been.
type liveIterator struct {
	kfs.DirectoryIterator
	p *Prefetch
}

func (it *liveIterator) Next(ctx context.Context) (kfs.Entry, error) {
	e, err := it.DirectoryIterator.Next(ctx)
	if e == nil || err != nil {
		return e, err //nolint:wrapcheck // kopia's own error, unchanged
	}
	return it.p.wrapEntry(e), nil
}

func (p *Prefetch) wrapEntry(e kfs.Entry) kfs.Entry {
	if _, shallow := e.(snapshot.HasDirEntryOrNil); shallow {
		return e // a shallow placeholder: kopia must see its own type
	}
	if d, ok := e.(kfs.Directory); ok {
		return &prefetchedDir{Directory: d, p: p}
	}
	return e
}
