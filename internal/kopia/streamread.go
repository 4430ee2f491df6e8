package kopia

import (
	"context"
	"fmt"
	"io"

	"github.com/kopia/kopia/fs"
	"github.com/kopia/kopia/snapshot/snapshotfs"
)

// StreamFile is the one file of a stream source's snapshot, open for
// reading.
type StreamFile struct {
	Name string
	Size int64
	io.ReadCloser
}

// OpenStream opens the file of snapshot id, which must hold exactly one
// regular file at its root, as a stream source's snapshots do: a
// directory's snapshot is restored into a PVC, never piped.
func (r *Repo) OpenStream(ctx context.Context, id string) (*StreamFile, error) {
	m, err := r.load(ctx, id)
	if err != nil {
		return nil, err
	}
	root, err := snapshotfs.SnapshotRoot(r.rep, m)
	if err != nil {
		return nil, classify(err)
	}
	dir, ok := root.(fs.Directory)
	if !ok {
		return nil, &Error{Class: ClassInvalidConfig, Err: fmt.Errorf("kopia snapshot %s is not a directory snapshot; a streamExec restore pipes the one file of a stream source's snapshot", id)}
	}
	entries, err := fs.GetAllEntries(ctx, dir)
	if err != nil {
		return nil, classify(fmt.Errorf("list kopia snapshot %s: %w", id, err))
	}
	if len(entries) != 1 || entries[0].IsDir() || !entries[0].Mode().IsRegular() {
		return nil, &Error{Class: ClassInvalidConfig, Err: fmt.Errorf("kopia snapshot %s holds %d entries, not the one file of a stream source's snapshot; restore it into a PVC (spec.target.pvc) instead of spec.target.streamExec", id, len(entries))}
	}
	f, ok := entries[0].(fs.File)
	if !ok {
		return nil, &Error{Class: ClassInvalidConfig, Err: fmt.Errorf("kopia snapshot %s: %s is not a file", id, entries[0].Name())}
	}
	rd, err := f.Open(ctx)
	if err != nil {
		return nil, classify(fmt.Errorf("open %s in kopia snapshot %s: %w", f.Name(), id, err))
	}
	return &StreamFile{Name: f.Name(), Size: f.Size(), ReadCloser: rd}, nil
}
