package execute

import (
	"context"
	"sync"

	"github.com/snapflow/snapflow/internal/prune"
)

// manifestReader reads manifests on manifestWorkers goroutines while the
// listing that names them goes on, so that their GETs overlap the list
// pages instead of following them.
type manifestReader struct {
	ctx  context.Context
	st   Store
	jobs chan manifestJob
	wg   sync.WaitGroup
}

type manifestJob struct {
	m prune.ManifestRead
	b *readBatch
}

// readBatch collects the reads of one root.
type readBatch struct {
	r   *manifestReader
	wg  sync.WaitGroup
	mu  sync.Mutex
	out map[string]prune.ManifestBody
}

func newManifestReader(ctx context.Context, st Store) *manifestReader {
	// The queue holds what the workers have not reached; it only fills when
	// manifests are listed faster than they are read.
	r := &manifestReader{ctx: ctx, st: st, jobs: make(chan manifestJob, 4096)}
	for range manifestWorkers {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			for j := range r.jobs {
				data, err := r.st.ReadManifest(r.ctx, j.m.Key, j.m.VersionID)
				j.b.mu.Lock()
				j.b.out[j.m.Key] = prune.ManifestBody{Data: data, Err: err}
				j.b.mu.Unlock()
				j.b.wg.Done()
			}
		}()
	}
	return r
}

func (r *manifestReader) close() {
	close(r.jobs)
	r.wg.Wait()
}

func (r *manifestReader) batch() *readBatch {
	return &readBatch{r: r, out: map[string]prune.ManifestBody{}}
}

// read queues one manifest. A failed read is recorded, not fatal: the
// candidate becomes invalid-manifest.
func (b *readBatch) read(m prune.ManifestRead) {
	b.wg.Add(1)
	b.r.jobs <- manifestJob{m: m, b: b}
}

// wait returns the batch's bodies once every read is done; the error is the
// context's, which makes the whole plan fail.
func (b *readBatch) wait() (map[string]prune.ManifestBody, error) {
	b.wg.Wait()
	return b.out, b.r.ctx.Err()
}

// readManifests reads the current manifests of l, restricted to keys inside
// one of within when it is non-nil. A failed read is recorded, not fatal:
// the candidate becomes invalid-manifest.
func readManifests(ctx context.Context, st Store, l prune.Listing, name string, within []string) (map[string]prune.ManifestBody, error) {
	keys := prune.ManifestKeys(l, name)
	if within != nil {
		var kept []string
		for _, k := range keys {
			for _, w := range within {
				if prune.Contains(w, prune.CleanKey(k)) {
					kept = append(kept, k)
					break
				}
			}
		}
		keys = kept
	}
	version := map[string]string{}
	if l.Versioned {
		for _, o := range l.Objects {
			if o.IsLatest && !o.DeleteMarker {
				version[o.Key] = o.VersionID
			}
		}
	}
	out := make(map[string]prune.ManifestBody, len(keys))
	var mu sync.Mutex
	sem := make(chan struct{}, manifestWorkers)
	var wg sync.WaitGroup
	for _, k := range keys {
		if err := ctx.Err(); err != nil {
			wg.Wait()
			return nil, err
		}
		wg.Add(1)
		sem <- struct{}{}
		go func(k string) {
			defer wg.Done()
			defer func() { <-sem }()
			data, err := st.ReadManifest(ctx, k, version[k])
			mu.Lock()
			out[k] = prune.ManifestBody{Data: data, Err: err}
			mu.Unlock()
		}(k)
	}
	wg.Wait()
	return out, ctx.Err()
}
