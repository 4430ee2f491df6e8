// Package execute runs the plan → prune pipeline around the pure planner in
// internal/prune: it lists the bucket through a Store port, reads the
// inventory through an InventorySource port, and carries out the planner's
// decisions. It decides nothing itself.
package execute

import (
	"context"
	"sort"
	"time"

	"github.com/snapflow/snapflow/internal/prune"
)

// Store is the object-store port. Every listing is already filtered through
// the planner's whole-segment Contains.
type Store interface {
	// ListLevel is a delimiter listing of "p/": the objects at that level
	// and the names of its subdirectories.
	ListLevel(ctx context.Context, p string, versions bool) ([]prune.Object, []string, error)
	// ListAll lists every object below "p/".
	ListAll(ctx context.Context, p string, versions bool) ([]prune.Object, error)
	// WalkAll is ListAll a page at a time, in key order; an error from fn
	// ends it and is returned.
	WalkAll(ctx context.Context, p string, versions bool, fn func([]prune.Object) error) error
	// ReadManifest reads one manifest, bounded to prune.MaxManifestSize.
	ReadManifest(ctx context.Context, key, versionID string) ([]byte, error)
	// HeadManifest HEADs the current version of a manifest.
	HeadManifest(ctx context.Context, key string) (prune.Object, error)
	// BucketVersioning returns the raw GetBucketVersioning status.
	BucketVersioning(ctx context.Context) (string, error)
	// DeleteObjects sends one Multi-Object Delete of at most
	// prune.MaxDeleteBatch targets.
	DeleteObjects(ctx context.Context, batch []prune.DeleteTarget) ([]prune.DeleteTarget, []prune.DeleteFailure, error)
	// GCS reports whether generations identify objects in delete requests.
	GCS() bool
}

// InventorySource refreshes the Kubernetes inventory during execution. It
// never reads the credential Secret.
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

// BuildPlan runs the discovery scan and the classification.
//
// It lists what the planner may need and no more: the bucket top level
// with a delimiter; nothing below roots the planner never lists; the two
// shallow levels of a historical repository root, and everything below it
// only once the planner finds it referenced; everything below the other
// roots. Each root is listed page by page into a prune.Scan, which keeps
// candidates, not objects, and names the manifests to read while the
// listing goes on; each is read once.
func BuildPlan(ctx context.Context, st Store, in PlanInput) (prune.Plan, error) {
	versions := prune.DiscoveryVersioned(in.Options.PurgeVersions)
	_, dirs, err := st.ListLevel(ctx, "", versions)
	if err != nil {
		return prune.Plan{}, err
	}
	if !prune.VolumeDiscovery(in.Inventory) {
		return manifestDriven(ctx, st, in, dirs)
	}
	scan, err := prune.NewScan(in.Inventory, in.Options, in.Now)
	if err != nil {
		return prune.Plan{}, err
	}
	rd := newManifestReader(ctx, st)
	defer rd.close()
	for _, r := range scan.Roots(dirs) {
		switch r.Depth {
		case prune.DepthNone:
			continue
		case prune.DepthShallow:
			objs, err := shallow(ctx, st, r.Root, versions)
			if err != nil {
				return prune.Plan{}, err
			}
			if !scan.Shallow(r.Root, objs) {
				continue
			}
		}
		if err := scanRoot(ctx, st, scan.Root(r.Root), r.Root, versions, rd); err != nil {
			return prune.Plan{}, err
		}
	}
	return scan.Plan()
}

// scanRoot lists a root in full into the scan, reading its manifests as
// the listing names them.
func scanRoot(ctx context.Context, st Store, feed *prune.RootFeed, root string, versions bool, rd *manifestReader) error {
	b := rd.batch()
	err := st.WalkAll(ctx, root, versions, func(objs []prune.Object) error {
		for _, m := range feed.Add(objs) {
			b.read(m)
		}
		return nil
	})
	bodies, rerr := b.wait()
	if err != nil {
		return err
	}
	if rerr != nil {
		return rerr
	}
	feed.Close(bodies)
	return nil
}

// manifestDriven plans in manifest-driven mode, which never deletes
// anything (it always blocks execution): unowned roots are listed in full,
// the others stand as markers, and the planner works from the whole
// listing.
func manifestDriven(ctx context.Context, st Store, in PlanInput, dirs []string) (prune.Plan, error) {
	versions := prune.DiscoveryVersioned(in.Options.PurgeVersions)
	prefix := prune.CleanKey(in.Options.Prefix)
	l := prune.Listing{Versioned: versions}
	for _, d := range dirs {
		if !prune.IsCanonicalRoot(d) || !prune.Overlaps(prefix, d) {
			continue
		}
		_, owned := in.Inventory.Owners[d]
		if owned || in.Inventory.OwnershipIncomplete || in.Options.Namespace != "" || prune.StrictlyInside(d, prefix) {
			l.Objects = append(l.Objects, marker(d))
			continue
		}
		objs, err := st.ListAll(ctx, d, versions)
		if err != nil {
			return prune.Plan{}, err
		}
		l.Objects = append(l.Objects, objs...)
	}
	var err error
	if l.Manifests, err = readManifests(ctx, st, l, in.Options.ManifestName, nil); err != nil {
		return prune.Plan{}, err
	}
	return prune.NewPlan(in.Inventory, l, in.Options, in.Now)
}

// shallow lists the two levels below a historical root (namespaces and their
// cluster directories). Subdirectories that are not listed become markers two
// segments deep ("root/ns/dir/"), so the planner sees the topology without
// counting them as objects of either level.
func shallow(ctx context.Context, st Store, root string, versions bool) ([]prune.Object, error) {
	objs, nsDirs, err := st.ListLevel(ctx, root, versions)
	if err != nil {
		return nil, err
	}
	for _, ns := range nsDirs {
		nsp := prune.JoinKey(root, ns)
		if !prune.IsDNSLabel(ns) {
			objs = append(objs, marker(nsp))
			continue
		}
		o2, dirs, err := st.ListLevel(ctx, nsp, versions)
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

// dedupe merges listings of overlapping scopes: an identity listed twice
// would make every snapshot comparison fail.
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
