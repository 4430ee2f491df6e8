package prune

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	engine "github.com/snapflow/snapflow/internal/prune"
	"github.com/snapflow/snapflow/internal/prune/execute"
	"github.com/snapflow/snapflow/internal/prune/kubeinv"
	"github.com/snapflow/snapflow/internal/prune/s3store"
)

// outcome is what one run produced. ex is nil for plan-only runs; runErr
// is why a dry run or prune did not complete (blockers, a stale plan,
// failed candidates).
type outcome struct {
	plan   engine.Plan
	final  engine.Plan
	ex     *execute.Execution
	runErr error
	// skipped says why an S3-triggered run planned nothing (the root is
	// gone, or lies outside what this deployment scans).
	skipped string
}

// errPrefixAbsent marks a run whose prefix names a pvc root that is not in
// the bucket (any more): for a request the sender's mistake, for an S3
// notification the echo of a deletion.
var errPrefixAbsent = errors.New("prefix names no pvc root in the bucket")

// run is `snapflow prune` for one set of parameters: the same pipeline
// as the CLI's, narrowed to a notified root when there is one.
func (f *Function) run(ctx context.Context, src *kubeinv.Source, repo *kubeinv.Repo, p params) (outcome, error) {
	var out outcome
	pm := execute.ModePlan
	switch p.mode {
	case modeDryRun:
		pm = execute.ModeDryRun
	case modeDelete:
		pm = execute.ModeDelete
	}
	var top *topWatch
	res, err := execute.Pipeline{
		Source: src, Repo: repo, Settings: p.run,
		Mode: pm, Now: f.now,
		Inventory: func(inv engine.Inventory) string {
			if p.root == "" {
				return ""
			}
			return outsideScan(inv, p)
		},
		Store: func(st *s3store.Store) execute.Store {
			top = &topWatch{Store: st}
			return top
		},
	}.Run(ctx)
	if err != nil {
		if seg := firstSegment(p.run.Prefix); seg != "" && top != nil && top.absent(seg) {
			return out, fmt.Errorf("%w: %s", errPrefixAbsent, seg)
		}
		return out, err
	}
	out.plan, out.final, out.ex, out.runErr, out.skipped = res.Plan, res.Final, res.Execution, res.RunErr, res.Skipped
	return out, nil
}

// outsideScan says why an S3-triggered re-plan of p.root would plan
// nothing this deployment looks at, or "".
func outsideScan(inv engine.Inventory, p params) string {
	volume := false
	for root, o := range inv.Owners {
		if o.Kind == engine.OwnerRepository && engine.IsCanonicalRoot(root) {
			volume = true
		}
	}
	if volume {
		return ""
	}
	// Manifest-driven mode scans only the mapped object roots.
	for _, r := range inv.Mapping {
		if engine.Overlaps(r, p.root) {
			return ""
		}
	}
	return "no canonical repository root and " + p.root + " is not a mapped object root"
}

// scopeOf narrows the configured prefix to a notification's root: the root
// itself, or the configured prefix when it lies inside the root. ok is
// false when the configured prefix excludes the root.
func scopeOf(configured, root string) (string, bool) {
	prefix := engine.CleanKey(configured)
	switch {
	case prefix == "":
		return root, true
	case engine.Contains(root, prefix):
		return prefix, true
	case engine.Contains(prefix, root):
		return root, true
	}
	return "", false
}

// rootOf is the canonical pvc root a key lies in ("" for any other key:
// the planner never scans non-canonical top-level prefixes).
func rootOf(key string) string {
	if seg := firstSegment(key); engine.IsCanonicalRoot(seg) {
		return seg
	}
	return ""
}

func firstSegment(key string) string {
	seg, _, _ := strings.Cut(engine.CleanKey(key), "/")
	return seg
}

// topWatch remembers the top-level directories the discovery scan listed,
// so a plan that failed because its prefix's root does not exist is told
// apart from other failures without a second listing.
type topWatch struct {
	execute.Store
	mu     sync.Mutex
	listed bool
	dirs   map[string]bool
}

func (t *topWatch) ListLevel(ctx context.Context, p string, versions bool) ([]engine.Object, []string, error) {
	objs, dirs, err := t.Store.ListLevel(ctx, p, versions)
	if err == nil && p == "" {
		t.mu.Lock()
		t.listed, t.dirs = true, map[string]bool{}
		for _, d := range dirs {
			t.dirs[d] = true
		}
		t.mu.Unlock()
	}
	return objs, dirs, err
}

// absent says whether the top level was listed and seg was not in it.
func (t *topWatch) absent(seg string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.listed && !t.dirs[seg]
}
