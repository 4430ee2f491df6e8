package prune

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// planner carries one planning run.
type planner struct {
	inv       *Inventory
	refs      *refs
	ix        *index // NewPlan's whole listing; nil for a Scan
	manifests map[string]ManifestBody
	versioned bool // the listing is a version listing
	disc      view // top-level and shallow listings
	scope     view // candidate scopes (versioned with --purge-versions)
	opts      Options
	prefix    string
	cutoff    time.Time
	plan      *Plan
	// counted de-duplicates the scanned counters across the overlapping
	// listings of manifest-driven mode; a rootScan counts its own root.
	counted map[string]bool
	mapped  map[string]bool // roots of the namespace mapping
}

// NewPlan classifies the listing against the inventory and returns the
// plan with its summaries and execution blockers. An error is a fatal
// condition that yields no plan.
func NewPlan(inv Inventory, l Listing, opts Options, now time.Time) (Plan, error) {
	p, err := newPlanner(&inv, opts, now)
	if err != nil {
		return Plan{}, err
	}
	if opts.PurgeVersions && !l.Versioned {
		return Plan{}, errors.New("--purge-versions needs a version listing")
	}
	p.ix, p.manifests, p.versioned = newIndex(l), l.Manifests, l.Versioned
	p.disc.ix, p.scope.ix = p.ix, p.ix
	if p.volumeMode() {
		err = p.discover()
	} else {
		err = p.fallback()
	}
	if err != nil {
		return Plan{}, err
	}
	p.finish()
	return *p.plan, nil
}

func newPlanner(inv *Inventory, opts Options, now time.Time) (*planner, error) {
	if opts.Namespace != "" && !IsDNSLabel(opts.Namespace) {
		return nil, fmt.Errorf("invalid --namespace %q: must be a DNS-1123 label", opts.Namespace)
	}
	if strings.Contains(opts.ManifestName, "/") {
		return nil, fmt.Errorf("invalid --manifest-name %q: must be a bare file name", opts.ManifestName)
	}
	if opts.MinAge < 0 {
		return nil, errors.New("invalid --min-age: must be >= 0")
	}
	prefix, ok := NormalizeKey(opts.Prefix)
	if !ok {
		return nil, fmt.Errorf("invalid --prefix %q", opts.Prefix)
	}
	if opts.Versioning == "" {
		opts.Versioning = VersioningDisabled
	}
	p := &planner{
		inv: inv, refs: newRefs(inv), opts: opts, prefix: prefix,
		cutoff:  opts.cutoff(now),
		disc:    view{all: opts.PurgeVersions},
		scope:   view{all: opts.versionedScopes(), plainID: !opts.versionedScopes()},
		counted: map[string]bool{}, mapped: map[string]bool{},
	}
	for _, r := range inv.Mapping {
		p.mapped[r] = true
	}
	minAge := opts.MinAge
	if minAge == 0 && !opts.DisableMinAge {
		minAge = DefaultMinAge
	}
	p.plan = &Plan{
		GeneratedAt: now, Repository: inv.Repo.Name, RepositoryUID: inv.Repo.UID,
		RepositoryGeneration: inv.Repo.Generation, Bucket: inv.Repo.Bucket,
		Namespace: opts.Namespace, Prefix: prefix, ObjectPrefixes: copyMap(inv.Mapping),
		Versioning: opts.Versioning, VersioningSource: opts.VersioningSource,
		PurgeVersions: opts.PurgeVersions, IncludeRetained: opts.IncludeRetained,
		MinAge: minAge, ManifestName: opts.manifestName(),
		DeleteRepositoryStray: opts.DeleteRepositoryStray,
		BlockingReasons:       append([]string(nil), inv.Blockers...),
		opts:                  opts,
	}
	// Blockers the planner raises itself: layouts it cannot verify.
	for root, o := range inv.Owners {
		if o.Kind == OwnerRepository && !IsCanonicalRoot(root) {
			p.block("repository root %q is not a canonical pvc root", root)
		}
	}
	for ns, root := range inv.Mapping {
		if !IsCanonicalRoot(root) {
			p.block("repository root %q of namespace %s is not a canonical pvc root", root, ns)
		}
	}
	// Ambiguity: KubeBlocks puts spec.pathPrefix between the root and
	// the namespace, a segment the Mount layout this planner knows does not
	// have. Block until the segment is supported explicitly.
	if inv.Repo.Mount && CleanKey(inv.Repo.PathPrefix) != "" {
		p.block("backup repo spec.pathPrefix %q is not supported in Mount mode", inv.Repo.PathPrefix)
	}
	return p, nil
}

func copyMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func (p *planner) block(format string, args ...any) {
	p.plan.BlockingReasons = append(p.plan.BlockingReasons, fmt.Sprintf(format, args...))
}

// young reports whether t is after the cutoff; a zero time is young.
func (p *planner) young(t time.Time) bool { return isYoung(t, p.cutoff) }

func isYoung(t, cutoff time.Time) bool { return t.IsZero() || t.After(cutoff) }

// youngObject returns the first object that is young, if any.
func youngObject(os []Object, cutoff time.Time) (Object, bool) {
	for _, o := range os {
		if isYoung(o.LastModified, cutoff) {
			return o, true
		}
	}
	return Object{}, false
}

func youngReason(o Object) string {
	if o.LastModified.IsZero() {
		return fmt.Sprintf("object %s has no timestamp", o.Key)
	}
	return fmt.Sprintf("object %s is younger than min-age", o.Key)
}

// list records a logical listing and counts what it returned, once per
// identity (manifest-driven mode).
func (p *planner) list(prefix string, recursive bool, es []entry) {
	p.listed(prefix, recursive)
	for _, e := range es {
		id := e.obj.Key + "\x00" + e.obj.VersionID
		if p.counted[id] {
			continue
		}
		p.counted[id] = true
		size := e.obj.Size
		if e.obj.DeleteMarker {
			size = 0
		}
		p.scanned(1, size)
	}
}

// listed records a logical listing the plan relied on.
func (p *planner) listed(prefix string, recursive bool) {
	p.plan.Listed = append(p.plan.Listed, ListCall{Prefix: prefix, Recursive: recursive})
}

// scanned adds to the scanned counters of the plan.
func (p *planner) scanned(objects, bytes int64) {
	p.plan.ScannedObjects += objects
	p.plan.ScannedBytes += bytes
}

// add appends a candidate; whoever built it has set its counts.
func (p *planner) add(c Candidate) {
	if c.ScopePrefix == "" {
		c.ScopePrefix = c.Prefix
	}
	p.plan.Candidates = append(p.plan.Candidates, c)
}

// finish runs the dependency fixed point and computes the summaries.
func (p *planner) finish() {
	applyDependencies(p.plan.Candidates, p.refs.liveDeps, p.plan.outsideDeps)
	sort.SliceStable(p.plan.Candidates, func(i, j int) bool {
		a, b := p.plan.Candidates[i], p.plan.Candidates[j]
		return a.Prefix < b.Prefix || a.Prefix == b.Prefix && a.Type < b.Type
	})
	sort.Strings(p.plan.BlockingReasons)
	p.plan.BlockingReasons = dedupe(p.plan.BlockingReasons)
	summarize(p.plan)
}

// summarize recomputes state counts, eligible totals and orphan roots.
func summarize(pl *Plan) {
	pl.StateCounts = map[State]int{}
	pl.DeleteObjects, pl.DeleteBytes, pl.OrphanVolumeRoots = 0, 0, nil
	for _, c := range pl.Candidates {
		pl.StateCounts[c.State]++
		if c.State != StateOrphan {
			continue
		}
		pl.DeleteObjects += int64(c.ObjectCount)
		pl.DeleteBytes += c.Bytes
		if c.Type == TypeOrphanVolumeRoot {
			pl.OrphanVolumeRoots = append(pl.OrphanVolumeRoots, c.Prefix)
		}
	}
}

// applyDependencies runs the dependency fixed point: every key named as
// parent or base by a live Backup or by a candidate that is not orphan is
// kept, and any orphan holding such a key becomes dependency, until nothing
// changes. A backup whose manifest cannot be read names nothing: it is
// kept (invalid-manifest), and its siblings are judged on their own, as
// the spec says, so one truncated file never freezes a whole cluster.
func applyDependencies(cs []Candidate, liveDeps map[BackupKey]bool, outside []BackupKey) {
	keep := map[BackupKey]bool{}
	for k := range liveDeps {
		keep[k] = true
	}
	for _, k := range outside {
		keep[k] = true
	}
	for {
		for _, c := range cs {
			if c.State != StateOrphan {
				for _, d := range c.Dependencies {
					keep[d] = true
				}
			}
		}
		changed := false
		for i := range cs {
			if cs[i].State != StateOrphan {
				continue
			}
			for _, k := range cs[i].ContainedBackups {
				if keep[k] {
					cs[i].State, cs[i].Reason = StateDependency, fmt.Sprintf("%s is the parent or base of a backup that remains", k)
					changed = true
					break
				}
			}
		}
		if !changed {
			return
		}
	}
}
