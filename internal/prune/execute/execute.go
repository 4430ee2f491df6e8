package execute

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/snapflow/snapflow/internal/prune"
)

// Result is the outcome of one candidate in the prune report.
type Result struct {
	Prefix         string              `json:"prefix"`
	Type           prune.CandidateType `json:"type"`
	Backup         string              `json:"backup,omitempty"`
	ObjectsDeleted int                 `json:"objectsDeleted"`
	BytesDeleted   int64               `json:"bytesDeleted"`
	// Deferred marks a dry-run root whose objects only a real prune
	// enumerates; it counts neither objects nor bytes.
	Deferred bool   `json:"deferred,omitempty"`
	Error    string `json:"error,omitempty"`
}

// Execution is the prune report.
type Execution struct {
	DryRun  bool     `json:"dryRun"`
	Results []Result `json:"results"`
}

// Totals sums the results: objects, bytes, candidates and failures.
func (e Execution) Totals() (objects int, bytes int64, candidates, failures int) {
	for _, r := range e.Results {
		objects += r.ObjectsDeleted
		bytes += r.BytesDeleted
		if r.Error != "" {
			failures++
		} else {
			candidates++
		}
	}
	return objects, bytes, candidates, failures
}

// ErrCandidatesFailed is wrapped when some candidates could not be deleted.
var ErrCandidatesFailed = errors.New("cleanup candidates failed deletion")

// Config carries the ports and knobs of one execution.
type Config struct {
	Store     Store
	Inventory InventorySource
	// Concurrency is --concurrency (≥ 1).
	Concurrency int
	// Now is the clock of the final snapshot's age check.
	Now func() time.Time
	// Progress, when set, is told about every finished candidate.
	Progress func(done, total int)
}

// DryRun reports what a real prune would delete, without any request:
// orphan candidates with their planned counts, and deferred roots
// as deferred, outside the totals.
func DryRun(pl prune.Plan) Execution {
	ex := Execution{DryRun: true, Results: []Result{}}
	for _, c := range pl.Candidates {
		if c.State != prune.StateOrphan {
			continue
		}
		r := result(c)
		if c.DeferredScan {
			r.Deferred = true
		} else {
			r.ObjectsDeleted, r.BytesDeleted = c.ObjectCount, c.Bytes
		}
		ex.Results = append(ex.Results, r)
	}
	return ex
}

func result(c prune.Candidate) Result {
	r := Result{Prefix: c.Prefix, Type: c.Type}
	if !c.Backup.IsZero() {
		r.Backup = c.Backup.String()
	}
	return r
}

// Run is the real prune: final snapshot, global guards, inventory refresh and
// re-check, versioning re-check, then each candidate. inv is the inventory
// the plan was made from. It returns the final plan (the second traversal's
// view) and the per-candidate results; the error is non-nil when the run
// aborted before any delete, when candidates failed, or when the context
// ended.
func Run(ctx context.Context, pl prune.Plan, inv prune.Inventory, cfg Config) (prune.Plan, Execution, error) {
	ex := Execution{Results: []Result{}}
	if cfg.Concurrency < 1 {
		return pl, ex, errors.New("concurrency must be at least 1")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if pl.Blocked() {
		return pl, ex, fmt.Errorf("%w: %v", prune.ErrExecutionBlocked, pl.BlockingReasons)
	}
	versioned := prune.VersionedListing(pl.PurgeVersions, pl.Versioning)

	// Final snapshot: a second traversal of every orphan's scope.
	var scopes []prune.Object
	var roots []string
	for _, c := range pl.Candidates {
		if c.State != prune.StateOrphan {
			continue
		}
		objs, err := listScope(ctx, cfg.Store, c, versioned)
		if err != nil {
			return pl, ex, fmt.Errorf("final snapshot of %s: %w", c.Prefix, err)
		}
		scopes = append(scopes, objs...)
		if c.Type == prune.TypeOrphanRepositoryRoot {
			roots = append(roots, c.Prefix)
		}
	}
	final := prune.Listing{Objects: dedupe(scopes), Versioned: versioned}
	// Only historical roots are classified from their manifests now;
	// other candidates compare manifest identity, not bodies.
	if len(roots) > 0 {
		manifests, err := readManifests(ctx, cfg.Store, final, pl.ManifestName, roots)
		if err != nil {
			return pl, ex, err
		}
		final.Manifests = manifests
	}
	fin, err := prune.FinalSnapshot(pl, inv, final, cfg.Now())
	if err != nil {
		return pl, ex, fmt.Errorf("final snapshot: %w", err)
	}

	// Global guards, before any write.
	if err := prune.GlobalGuards(fin); err != nil {
		return fin, ex, err
	}

	// A fresh inventory at the start of execution; any failure aborts all.
	inv2, err := cfg.Inventory.Inventory(ctx)
	if err != nil {
		return fin, ex, fmt.Errorf("%w: refresh the inventory: %w", prune.ErrStalePlan, err)
	}
	invalid, err := prune.Recheck(fin, inv2, final)
	if err != nil {
		return fin, ex, err
	}
	if len(invalid) > 0 {
		return fin, ex, fmt.Errorf("%w: %s: %s", prune.ErrStalePlan, invalid[0].Prefix, invalid[0].Reason)
	}

	// Versioning re-check (auto mode only).
	if fin.VersioningSource == prune.SourceDetected {
		st, err := cfg.Store.BucketVersioning(ctx)
		if err != nil {
			return fin, ex, err
		}
		if err := prune.CheckVersioningUnchanged(fin, st); err != nil {
			return fin, ex, err
		}
	}

	// Per-candidate execution: strays first, then everything else.
	e := &executor{cfg: cfg, plan: fin, versioned: versioned, shared: &sharedInventory{src: cfg.Inventory}}
	groups := prune.ExecutionGroups(fin)
	total := len(groups[0]) + len(groups[1])
	for _, g := range groups {
		ex.Results = append(ex.Results, e.group(ctx, g, total)...)
		if ctx.Err() != nil {
			break
		}
	}
	if err := ctx.Err(); err != nil {
		return fin, ex, err
	}
	if _, _, _, failed := ex.Totals(); failed > 0 {
		return fin, ex, fmt.Errorf("%d %w", failed, ErrCandidatesFailed)
	}
	return fin, ex, nil
}

// listScope re-lists a candidate's scope the way the planner reads it: a
// level stray's one level, a cluster stray's whole directory, a narrowed
// stray's scope, and the prefix of everything else.
func listScope(ctx context.Context, st Store, c prune.Candidate, versioned bool) ([]prune.Object, error) {
	switch {
	case c.Type == prune.TypeRepositoryStray && c.Level && c.FullScope == nil:
		objs, _, err := st.ListLevel(ctx, c.Prefix, versioned)
		return objs, err
	case c.Type == prune.TypeRepositoryStray && c.FullScope == nil:
		return st.ListAll(ctx, c.ScopePrefix, versioned)
	}
	return st.ListAll(ctx, c.Prefix, versioned)
}

// sharedInventory is the inventory refresh the candidates re-check against:
// fetched by the first candidate that needs it and reused by every later one;
// a failed fetch fails only that candidate, and the next one tries again.
type sharedInventory struct {
	src InventorySource
	mu  sync.Mutex
	inv *prune.Inventory
}

func (s *sharedInventory) get(ctx context.Context) (prune.Inventory, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inv != nil {
		return *s.inv, nil
	}
	inv, err := s.src.Inventory(ctx)
	if err != nil {
		return prune.Inventory{}, fmt.Errorf("refresh the inventory: %w", err)
	}
	s.inv = &inv
	return inv, nil
}

type executor struct {
	cfg       Config
	plan      prune.Plan
	versioned bool
	shared    *sharedInventory
	mu        sync.Mutex
	done      int
}

// group runs one execution group on a pool of Concurrency workers.
// Cancellation stops new candidates from being scheduled.
func (e *executor) group(ctx context.Context, idx []int, total int) []Result {
	results := make([]Result, len(idx))
	started := make([]bool, len(idx))
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(e.cfg.Concurrency, max(len(idx), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if ctx.Err() != nil {
					continue // cancelled while queued: never started
				}
				started[i] = true
				results[i] = e.one(ctx, e.plan.Candidates[idx[i]])
				e.mu.Lock()
				e.done++
				if e.cfg.Progress != nil {
					e.cfg.Progress(e.done, total)
				}
				e.mu.Unlock()
			}
		}()
	}
feed:
	for i := range idx {
		select {
		case <-ctx.Done():
			break feed
		case work <- i:
		}
	}
	close(work)
	wg.Wait()
	var out []Result
	for i, r := range results {
		if started[i] {
			out = append(out, r)
		}
	}
	return out
}

// one re-checks and deletes one candidate: re-list its scope, fetch the
// shared inventory, revalidate, then delete.
func (e *executor) one(ctx context.Context, c prune.Candidate) Result {
	r := result(c)
	fail := func(err error) Result {
		r.Error = err.Error()
		return r
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	// The manifest first (spec 5.11 step 1), then the scope's re-listing.
	if err := e.manifestUnchanged(ctx, c); err != nil {
		return fail(err)
	}
	objs, err := listScope(ctx, e.cfg.Store, c, e.versioned)
	if err != nil {
		return fail(err)
	}
	l := prune.Listing{Objects: dedupe(objs), Versioned: e.versioned}
	// The shared inventory, then revalidation against it.
	inv, err := e.shared.get(ctx)
	if err != nil {
		return fail(err)
	}
	one := e.plan
	one.Candidates = []prune.Candidate{c}
	invalid, err := prune.Recheck(one, inv, l)
	if err != nil {
		return fail(err)
	}
	if len(invalid) > 0 {
		return fail(errors.New(invalid[0].Reason))
	}
	// Delete, data first and the current manifest last.
	batches, err := prune.DeleteBatches(c, prune.DeleteIdentity{Versioned: e.versioned, GCS: e.cfg.Store.GCS()}, currentManifest(c, l))
	if err != nil {
		return fail(err)
	}
	for _, b := range batches {
		if err := ctx.Err(); err != nil {
			return fail(err)
		}
		// Again right before each delete: a manifest rewritten since the
		// re-listing stops the backup here, and its manifest stays to
		// identify what is left.
		if err := e.manifestUnchanged(ctx, c); err != nil {
			return fail(err)
		}
		deleted, failed, err := e.cfg.Store.DeleteObjects(ctx, b)
		if err != nil {
			return fail(err)
		}
		n, bytes, terr := prune.TallyBatch(b, deleted, failed)
		r.ObjectsDeleted += n
		r.BytesDeleted += bytes
		if terr != nil {
			return fail(terr)
		}
	}
	return r
}

// manifestUnchanged HEADs a backup's manifest and compares it with the
// plan (spec 6.5); candidates without a manifest pass.
func (e *executor) manifestUnchanged(ctx context.Context, c prune.Candidate) error {
	if c.Type != prune.TypeBackup || c.ManifestKey == "" {
		return nil
	}
	head, err := e.cfg.Store.HeadManifest(ctx, c.ManifestKey)
	if err != nil {
		return fmt.Errorf("manifest changed or unreadable, nothing more deleted: %w", err)
	}
	if err := prune.CheckManifestHead(c, head); err != nil {
		return fmt.Errorf("%w; nothing more deleted", err)
	}
	return nil
}

// currentManifest is the version identity of the manifest's current
// version in the re-listing ("" for plain buckets).
func currentManifest(c prune.Candidate, l prune.Listing) string {
	if c.ManifestKey == "" {
		return ""
	}
	for _, o := range l.Objects {
		if o.Key != c.ManifestKey || o.DeleteMarker || l.Versioned && !o.IsLatest {
			continue
		}
		if o.Generation != "" {
			return o.Generation
		}
		return o.VersionID
	}
	return ""
}
