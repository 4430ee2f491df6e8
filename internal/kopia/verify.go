package kopia

import (
	"context"
	"fmt"
	"runtime"

	"github.com/kopia/kopia/repo"
	"github.com/kopia/kopia/repo/blob"
	"github.com/kopia/kopia/snapshot"
	"github.com/kopia/kopia/snapshot/snapshotfs"
)

// VerifyOptions are kopia snapshot verify's knobs.
type VerifyOptions struct {
	// Parallelism walks directories and checks files this wide (NumCPU when 0).
	Parallelism int `json:"parallelism,omitempty"`
	// FileQueueLength bounds files waiting to be checked (kopia's 20000 when 0).
	FileQueueLength int `json:"fileQueueLength,omitempty"`
	// MaxErrors stops after this many errors; 0 checks everything.
	MaxErrors int `json:"maxErrors,omitempty"`
	// FilesPercent reads this share of files in full, checking every byte.
	FilesPercent float64 `json:"filesPercent,omitempty"`
}

// VerifyResult is what a verification found.
type VerifyResult struct {
	Objects   int64    `json:"objects"`
	Bytes     int64    `json:"bytes"`
	FilesRead int64    `json:"filesRead"`
	BytesRead int64    `json:"bytesRead"`
	Errors    int      `json:"errors"`
	Messages  []string `json:"messages,omitempty"`
}

// Verify checks that every object of the snapshots ids is indexed and
// backed by a blob that exists, and reads o.FilesPercent of the files in
// full (decrypting and hash-checking their content). Problems found are
// counted in the result, not returned as an error; the error is for a
// verification that could not run.
func (r *Repo) Verify(ctx context.Context, ids []string, o VerifyOptions) (VerifyResult, error) {
	if o.Parallelism <= 0 {
		o.Parallelism = runtime.NumCPU()
	}
	opts := snapshotfs.VerifierOptions{VerifyFilesPercent: o.FilesPercent, FileQueueLength: o.FileQueueLength, Parallelism: o.Parallelism, MaxErrors: o.MaxErrors}
	if dr, ok := r.rep.(repo.DirectRepository); ok {
		bm, err := blob.ReadBlobMap(ctx, dr.BlobReader())
		if err != nil {
			return VerifyResult{}, classify(fmt.Errorf("list the repository's blobs: %w", err))
		}
		opts.BlobMap = bm
	}
	var mans []*snapshot.Manifest
	for _, id := range ids {
		m, err := r.load(ctx, id)
		if err != nil {
			return VerifyResult{}, err
		}
		mans = append(mans, m)
	}
	v := snapshotfs.NewVerifier(ctx, r.rep, opts)
	res, err := v.InParallel(ctx, func(tw *snapshotfs.TreeWalker) error {
		for _, m := range mans {
			entry, err := snapshotfs.SnapshotRoot(r.rep, m)
			if err != nil {
				return fmt.Errorf("open snapshot %s: %w", m.ID, err)
			}
			_ = tw.Process(ctx, entry, m.Source.String()) // the walker collects errors
		}
		return nil
	})
	out := VerifyResult{
		Objects: res.Stats.ProcessedObjectCount, Bytes: res.Stats.ProcessedBytes,
		FilesRead: res.Stats.ReadFileCount, BytesRead: res.Stats.ReadBytes,
		Errors: res.ErrorCount, Messages: res.ErrorStrings,
	}
	if len(out.Messages) > 20 {
		out.Messages = append(out.Messages[:20], fmt.Sprintf("... and %d more", len(out.Messages)-20))
	}
	if err != nil && out.Errors == 0 {
		return out, classify(fmt.Errorf("verify: %w", err))
	}
	return out, nil
}
