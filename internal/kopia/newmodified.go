package kopia

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/kopia/kopia/repo"
	"github.com/kopia/kopia/repo/object"
	"github.com/kopia/kopia/snapshot"
)

// newModified tells apart, among the files the upload has to read, those the
// previous snapshot did not have (new) from those it had (modified). It
// looks each one up while the upload runs, on its own goroutine, so the
// count costs a small incremental run no wall time: the upload leaves a
// core idle while it waits on the disk.
type newModified struct {
	ctx  context.Context
	rep  repo.Repository
	root object.ID
	// hasRoot is false when the previous snapshot's root is not a directory.
	hasRoot bool
	paths   chan string
	done    chan struct{}

	created, modified int64
	// listings caches directories of the previous snapshot by path; the
	// uploader reads directories a few at a time, so a small cache reads
	// each one about once, and memory stays bounded by the cap, not the tree.
	listings map[string]*dirListing
}

// listingCap bounds the directories newModified keeps decoded.
const listingCap = 256

func startNewModified(ctx context.Context, rep repo.Repository, prev *snapshot.Manifest) *newModified {
	n := &newModified{ctx: ctx, rep: rep, paths: make(chan string, 1024), done: make(chan struct{}), listings: map[string]*dirListing{}}
	if prev.RootEntry != nil && prev.RootEntry.Type == snapshot.EntryTypeDirectory {
		n.root, n.hasRoot = prev.RootObjectID(), true
	}
	go n.run()
	return n
}

// add counts one file the upload read; kopia calls it from many goroutines.
func (n *newModified) add(path string) { n.paths <- path }

// finish waits for the lookups of every added path and returns the counts.
// No add may follow.
func (n *newModified) finish() (created, modified int64) {
	close(n.paths)
	<-n.done
	return n.created, n.modified
}

func (n *newModified) run() {
	defer close(n.done)
	for p := range n.paths {
		dir, name := "", p
		if i := strings.LastIndexByte(p, '/'); i >= 0 {
			dir, name = p[:i], p[i+1:]
		}
		if l := n.listing(dir); l != nil && l.names[name] {
			n.modified++
		} else {
			n.created++
		}
	}
}

// listing returns the previous snapshot's directory at path dir, or nil when
// it had none (or it cannot be read: its files then count as new).
func (n *newModified) listing(dir string) *dirListing {
	if l, ok := n.listings[dir]; ok {
		return l
	}
	if !n.hasRoot {
		return nil
	}
	oid := n.root
	if dir != "" {
		parent, base := "", dir
		if i := strings.LastIndexByte(dir, '/'); i >= 0 {
			parent, base = dir[:i], dir[i+1:]
		}
		pl := n.listing(parent)
		if pl == nil {
			return n.keep(dir, nil)
		}
		id, ok := pl.dirs[base]
		if !ok {
			return n.keep(dir, nil)
		}
		oid = id
	}
	l, err := readListing(n.ctx, n.rep, oid)
	if err != nil {
		l = nil
	}
	return n.keep(dir, l)
}

func (n *newModified) keep(dir string, l *dirListing) *dirListing {
	if len(n.listings) >= listingCap {
		clear(n.listings)
	}
	n.listings[dir] = l
	return l
}

// dirListing is what newModified needs of a directory object: its
// entries' names and its subdirectories' object IDs.
type dirListing struct {
	names map[string]bool
	dirs  map[string]object.ID
}

// namesOnly decodes a kopia directory object's entries down to name, type
// and object ID. The full snapshot.DirManifest decode parses every entry's
// times, ownership and summaries, which made this count cost as much as a
// third of a small incremental run.
type namesOnly struct {
	StreamType string `json:"stream"`
	Entries    []struct {
		Name     string `json:"name"`
		Type     string `json:"type"`
		ObjectID string `json:"obj"`
	} `json:"entries"`
}

// directoryStream is the stream type kopia writes into directory objects.
const directoryStream = "kopia:directory"

func readListing(ctx context.Context, rep repo.Repository, oid object.ID) (*dirListing, error) {
	r, err := rep.OpenObject(ctx, oid)
	if err != nil {
		return nil, fmt.Errorf("open directory object %v: %w", oid, err)
	}
	defer r.Close() //nolint:errcheck
	var m namesOnly
	if err := json.NewDecoder(r).Decode(&m); err != nil {
		return nil, fmt.Errorf("decode directory object %v: %w", oid, err)
	}
	if m.StreamType != directoryStream {
		return nil, fmt.Errorf("object %v is not a directory (stream %q)", oid, m.StreamType)
	}
	l := &dirListing{names: make(map[string]bool, len(m.Entries)), dirs: map[string]object.ID{}}
	for _, e := range m.Entries {
		l.names[e.Name] = true
		if e.Type != string(snapshot.EntryTypeDirectory) {
			continue
		}
		if id, err := object.ParseID(e.ObjectID); err == nil {
			l.dirs[e.Name] = id
		}
	}
	return l, nil
}
