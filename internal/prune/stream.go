package prune

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// Scan is NewPlan for an adapter that lists the bucket root by root. It
// holds the candidates and a summary per directory of the root being
// listed, never a listing, so its memory grows with candidates rather than
// objects. It serves volume mode only (VolumeDiscovery).
//
// Every listing must be a version listing exactly when opts.PurgeVersions
// is set, and a root's objects should arrive in key order, as S3
// returns them: the scanned counters count an identity once only where it
// repeats next to itself.
//
// Its candidates carry no object snapshots, except the planned keys of
// strays, and a cluster stray's FullScope is empty but not nil: execution
// replaces every orphan's snapshot from a fresh listing before it
// compares or deletes anything.
type Scan struct {
	p       *planner
	actions map[string]rootAction
	// found: some root was discovered.
	found bool
}

// RootDepth says how far an adapter lists a canonical root for a Scan.
type RootDepth uint8

// Root depths.
const (
	// DepthNone: the root is classified without a listing.
	DepthNone RootDepth = iota
	// DepthShallow: list the two delimiter levels below the root (namespaces
	// and their cluster directories) for Scan.Shallow.
	DepthShallow
	// DepthFull: list every object below the root into Scan.Root.
	DepthFull
)

// RootListing is a canonical root of the bucket top level and how far to
// list it.
type RootListing struct {
	Root  string
	Depth RootDepth
}

// NewScan validates the options like NewPlan.
func NewScan(inv Inventory, opts Options, now time.Time) (*Scan, error) {
	p, err := newPlanner(&inv, opts, now)
	if err != nil {
		return nil, err
	}
	if !p.volumeMode() {
		return nil, errors.New("no canonical repository root: manifest-driven mode plans from a whole listing (NewPlan)")
	}
	p.versioned = opts.PurgeVersions
	p.plan.VolumeDiscovery = true
	return &Scan{p: p, actions: map[string]rootAction{}}, nil
}

// Roots takes the subdirectory names of the bucket top level and
// returns the canonical roots in order with how far to list each. Roots of
// DepthNone are classified already.
func (s *Scan) Roots(topDirs []string) []RootListing {
	p := s.p
	p.plan.Listed = append(p.plan.Listed, ListCall{})
	dirs := slices.Compact(slices.Sorted(slices.Values(topDirs)))
	var out []RootListing
	for _, root := range dirs {
		if !IsCanonicalRoot(root) || !Overlaps(p.prefix, root) {
			continue
		}
		a, o := p.rootAction(root)
		depth := DepthFull
		switch {
		case p.unlisted(root, a, o):
			s.found = true
			p.countRoot(a)
			depth = DepthNone
		case a == actHistorical:
			depth = DepthShallow
		}
		s.actions[root] = a
		out = append(out, RootListing{Root: root, Depth: depth})
	}
	return out
}

// Shallow audits a historical root from the objects of its two delimiter
// levels, with a directory marker "<dir>/" standing in for every
// subdirectory of either level. It returns true when the root must be
// listed in full: it is referenced, or the levels did not show it.
func (s *Scan) Shallow(root string, objs []Object) bool {
	if a, ok := s.actions[root]; !ok || a != actHistorical {
		panic("prune: Scan.Shallow of a root that Roots did not give DepthShallow: " + root)
	}
	rs := s.p.newRootScan(root, scanShallow, s.p.versioned, false)
	for _, o := range objs {
		rs.add(o)
	}
	if !rs.discovered {
		return true
	}
	referenced, calls := rs.auditReferenced()
	if referenced {
		return true
	}
	// Only the listings and counts of the audit get into the plan.
	s.found = true
	s.p.countRoot(actHistorical)
	s.p.plan.Listed = append(s.p.plan.Listed, calls...)
	s.p.scanned(rs.counts.auditN, rs.counts.auditB)
	s.p.historical(root)
	return false
}

// RootFeed takes the full listing of one root.
type RootFeed struct {
	s  *Scan
	rs *rootScan
	a  rootAction
}

// Root starts the full listing of a root that Roots gave DepthFull, or that
// Shallow sent to be listed in full.
func (s *Scan) Root(root string) *RootFeed {
	a, ok := s.actions[root]
	if !ok || a != actVolume && a != actCurrent && a != actHistorical {
		// A wrong root would be scanned as if it were the repository's.
		panic("prune: Scan.Root of a root that Roots did not give a listing: " + root)
	}
	return &RootFeed{s: s, rs: s.p.newRootScan(root, scanKindOf(a), s.p.versioned, false), a: a}
}

// Add takes the next objects of the listing. It returns the manifests whose
// bodies Close needs, so that the adapter can read them while it lists.
func (f *RootFeed) Add(objs []Object) []ManifestRead {
	for _, o := range objs {
		f.rs.add(o)
	}
	reads := f.rs.reads
	f.rs.reads = nil
	return reads
}

// Close classifies the root. bodies holds the manifests Add asked for; a
// missing one counts as unreadable.
func (f *RootFeed) Close(bodies map[string]ManifestBody) {
	if !f.rs.discovered {
		return // as absent from the top level as an empty root
	}
	p := f.s.p
	f.s.found = true
	p.countRoot(f.a)
	p.manifests = bodies
	f.rs.finish()
	p.manifests = nil
}

// Plan runs the dependency fixed point and returns the plan. It ends the
// scan.
func (s *Scan) Plan() (Plan, error) {
	p := s.p
	if p.prefix != "" && !s.found {
		return Plan{}, fmt.Errorf("--prefix %q does not overlap any discovered pvc root", p.prefix)
	}
	p.finish()
	return *p.plan, nil
}
