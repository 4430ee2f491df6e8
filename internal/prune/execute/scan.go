// Package execute runs the plan → prune pipeline of spec §5 around the pure
// planner in internal/prune: it lists the bucket through a Store port,
// reads the inventory through an InventorySource port, and carries out the
// planner's decisions. It decides nothing itself.
package execute

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/snapflow/snapflow/internal/prune"
)

// Store is the object-store port (spec 12.1). Every listing is already
// filtered through the planner's whole-segment Contains.
type Store interface {
	// ListLevel is a delimiter listing of "p/": the objects at that level
	// and the names of its subdirectories.
	ListLevel(ctx context.Context, p string, versions bool) ([]prune.Object, []string, error)
	// ListAll lists every object below "p/".
	ListAll(ctx context.Context, p string, versions bool) ([]prune.Object, error)
	// ReadManifest reads one manifest, bounded to prune.MaxManifestSize.
	ReadManifest(ctx context.Context, key, versionID string) ([]byte, error)
	// BucketVersioning returns the raw GetBucketVersioning status.
	BucketVersioning(ctx context.Context) (string, error)
	// DeleteObjects sends one Multi-Object Delete of at most
	// prune.MaxDeleteBatch targets.
	DeleteObjects(ctx context.Context, batch []prune.DeleteTarget) ([]prune.DeleteTarget, []prune.DeleteFailure, error)
	// GCS reports whether generations identify objects (7.5).
	GCS() bool
}

// InventorySource refreshes the Kubernetes inventory during execution. It
// never reads the credential Secret (5.9).
type InventorySource interface {
	Inventory(ctx context.Context) (prune.Inventory, error)
}

// InventoryFunc adapts a function to InventorySource.
type InventoryFunc func(ctx context.Context) (prune.Inventory, error)

// Inventory implements InventorySource.
func (f InventoryFunc) Inventory(ctx context.Context) (prune.Inventory, error) { return f(ctx) }

// manifestWorkers bounds concurrent manifest GETs.
const manifestWorkers = 8

// PlanInput is what the discovery scan needs.
type PlanInput struct {
	Inventory prune.Inventory
	Options   prune.Options
	Now       time.Time
}

// BuildPlan runs the discovery scan (5.2) and the classification (5.3).
//
// The planner works from a Listing, so the scan lists what it may need and
// no more: the bucket top level with a delimiter; nothing below roots the
// planner never lists (user and unknown owners, another namespace's roots,
// unowned roots under --namespace or a narrower --prefix); only the two
// shallow levels of historical repository roots (3.5.1); and everything
// below the other roots. Unlisted roots and directories are represented by
// synthetic directory markers, which the planner treats as structure only
// (2.8) and which never reach a deletable snapshot: a historical root that
// turns out to be referenced is listed in full and planned again.
func BuildPlan(ctx context.Context, st Store, in PlanInput) (prune.Plan, prune.Listing, error) {
	s := &scanner{st: st, inv: in.Inventory, opts: in.Options, versions: in.Options.PurgeVersions}
	if err := s.top(ctx); err != nil {
		return prune.Plan{}, prune.Listing{}, err
	}
	for {
		l, err := s.listing(ctx)
		if err != nil {
			return prune.Plan{}, prune.Listing{}, err
		}
		pl, err := prune.NewPlan(in.Inventory, l, in.Options, in.Now)
		if err != nil {
			return prune.Plan{}, prune.Listing{}, err
		}
		deeper := false
		for _, root := range s.shallowRoots() {
			if find(pl, prune.TypeOrphanRepositoryRoot, root) < 0 {
				// 3.5.5: referenced, so it gets the granular scan.
				s.mode[root] = modeFull
				deeper = true
			}
		}
		if !deeper {
			return pl, l, nil
		}
	}
}

type rootMode int

const (
	modeSkip rootMode = iota
	modeShallow
	modeFull
)

type scanner struct {
	st       Store
	inv      prune.Inventory
	opts     prune.Options
	versions bool
	roots    []string
	mode     map[string]rootMode
	cache    map[string][]prune.Object
	// read keeps manifest bodies across planning rounds, keyed by the
	// object's identity, so a re-plan reads only what changed.
	read map[string]prune.ManifestBody
}

// top lists the bucket top level and decides how far to list each root.
func (s *scanner) top(ctx context.Context) error {
	_, dirs, err := s.st.ListLevel(ctx, "", s.versions)
	if err != nil {
		return err
	}
	prefix := prune.CleanKey(s.opts.Prefix)
	s.mode, s.cache = map[string]rootMode{}, map[string][]prune.Object{}
	for _, d := range dirs {
		if !prune.IsCanonicalRoot(d) || !prune.Overlaps(prefix, d) {
			continue
		}
		s.roots = append(s.roots, d)
		s.mode[d] = s.rootMode(d, prefix)
	}
	return nil
}

// rootMode mirrors the planner's choice of 3.3.4 and 3.9 so that a root is
// listed only as deep as the planner will look. A wrong guess fails
// closed: a root that was not listed shows only a marker.
func (s *scanner) rootMode(root, prefix string) rootMode {
	o, owned := s.inv.Owners[root]
	switch {
	case !owned && s.inv.OwnershipIncomplete:
		return modeSkip
	case !owned:
		if s.opts.Namespace != "" || prune.StrictlyInside(root, prefix) {
			return modeSkip
		}
		return modeFull
	case o.Kind != prune.OwnerRepository:
		return modeSkip
	case s.opts.Namespace != "" && o.Namespace != "" && o.Namespace != s.opts.Namespace:
		return modeSkip
	case o.Current || mapped(s.inv, root):
		return modeFull
	}
	return modeShallow
}

func mapped(inv prune.Inventory, root string) bool {
	for _, r := range inv.Mapping {
		if r == root {
			return true
		}
	}
	return false
}

func (s *scanner) shallowRoots() []string {
	var out []string
	for _, r := range s.roots {
		if s.mode[r] == modeShallow {
			out = append(out, r)
		}
	}
	return out
}

// listing assembles the planner's Listing from each root's objects and
// reads the current manifests in it.
func (s *scanner) listing(ctx context.Context) (prune.Listing, error) {
	l := prune.Listing{Versioned: s.versions}
	for _, root := range s.roots {
		objs, err := s.rootObjects(ctx, root)
		if err != nil {
			return l, err
		}
		l.Objects = append(l.Objects, objs...)
	}
	if s.read == nil {
		s.read = map[string]prune.ManifestBody{}
	}
	var err error
	l.Manifests, err = readManifestsCached(ctx, s.st, l, s.opts.ManifestName, s.read)
	return l, err
}

// readManifestsCached is readManifests for a scan that plans more than once:
// a manifest whose key, ETag and version are unchanged is not read again.
func readManifestsCached(ctx context.Context, st Store, l prune.Listing, name string, read map[string]prune.ManifestBody) (map[string]prune.ManifestBody, error) {
	keys := prune.ManifestKeys(l, name)
	want := make(map[string]bool, len(keys))
	for _, k := range keys {
		want[k] = true
	}
	ident := map[string]string{}
	byKey := map[string][]prune.Object{}
	for _, o := range l.Objects {
		if !want[o.Key] {
			continue
		}
		byKey[o.Key] = append(byKey[o.Key], o)
		if !l.Versioned || (o.IsLatest && !o.DeleteMarker) {
			ident[o.Key] = o.Key + "\x00" + o.ETag + "\x00" + o.VersionID
		}
	}
	out := map[string]prune.ManifestBody{}
	var missing []prune.Object
	for _, k := range keys {
		if b, ok := read[ident[k]]; ok && b.Err == nil {
			out[k] = b
			continue
		}
		missing = append(missing, byKey[k]...)
	}
	if len(missing) > 0 {
		fresh, err := readManifests(ctx, st, prune.Listing{Objects: missing, Versioned: l.Versioned}, name, nil)
		if err != nil {
			return nil, err
		}
		for k, b := range fresh {
			out[k] = b
			read[ident[k]] = b
		}
	}
	return out, nil
}

func (s *scanner) rootObjects(ctx context.Context, root string) ([]prune.Object, error) {
	key := fmt.Sprintf("%d/%s", s.mode[root], root)
	if objs, ok := s.cache[key]; ok {
		return objs, nil
	}
	var objs []prune.Object
	var err error
	switch s.mode[root] {
	case modeSkip:
		objs = []prune.Object{marker(root)}
	case modeShallow:
		objs, err = s.shallow(ctx, root)
	default:
		objs, err = s.st.ListAll(ctx, root, s.versions)
	}
	if err != nil {
		return nil, err
	}
	s.cache[key] = objs
	return objs, nil
}

// shallow lists the two levels of 3.5.1. Subdirectories that are not
// listed become markers two segments deep ("root/ns/dir/"), so the planner
// sees the topology without counting them as objects of either level.
func (s *scanner) shallow(ctx context.Context, root string) ([]prune.Object, error) {
	objs, nsDirs, err := s.st.ListLevel(ctx, root, s.versions)
	if err != nil {
		return nil, err
	}
	for _, ns := range nsDirs {
		nsp := prune.JoinKey(root, ns)
		if !prune.IsDNSLabel(ns) {
			objs = append(objs, marker(nsp))
			continue
		}
		o2, dirs, err := s.st.ListLevel(ctx, nsp, s.versions)
		if err != nil {
			return nil, err
		}
		objs = append(objs, o2...)
		for _, d := range dirs {
			objs = append(objs, marker(prune.JoinKey(nsp, d)))
		}
	}
	return objs, nil
}

// marker is a synthetic directory marker for a directory that exists but
// was not listed.
func marker(dir string) prune.Object {
	return prune.Object{Key: dir + "/", IsLatest: true}
}

// readManifests reads the current manifests of l, restricted to keys inside
// one of within when it is non-nil. A failed read is recorded, not fatal:
// the candidate becomes invalid-manifest (4.4).
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

func find(pl prune.Plan, typ prune.CandidateType, prefix string) int {
	for i, c := range pl.Candidates {
		if c.Type == typ && c.Prefix == prefix {
			return i
		}
	}
	return -1
}

// dedupe merges listings of overlapping scopes: an identity listed twice
// would make every snapshot comparison fail (6.4).
func dedupe(objs []prune.Object) []prune.Object {
	seen := map[[2]string]bool{}
	out := objs[:0:0]
	for _, o := range objs {
		id := [2]string{o.Key, o.VersionID}
		if !seen[id] {
			seen[id] = true
			out = append(out, o)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}
