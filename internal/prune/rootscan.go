package prune

import (
	"slices"
	"strings"
)

// scanKind is what a rootScan does with a canonical root.
type scanKind uint8

const (
	scanGranular   scanKind = iota // a current repository root
	scanVolume                     // an unowned root: one candidate
	scanHistorical                 // audit, then granular if referenced
	scanShallow                    // audit only, from the two delimiter levels
)

// rootScan classifies one canonical root from its listing, fed an object at
// a time in any order. Per directory it keeps what classification needs
// (objAgg), so a streamed plan never holds a listing; NewPlan feeds it from
// its index with keep set, and its candidates carry their snapshots.
//
// Views follow the index: the audit and discovery see every version when
// --purge-versions is set, candidate scopes only when versionedScopes holds.
type rootScan struct {
	p          *planner
	root       string
	kind       scanKind
	versioned  bool // the objects come from a version listing
	keep       bool // candidates keep their object snapshots
	allVersion bool // candidate scopes see every version
	stream     bool // collect the manifests to read (Scan)
	seq        int
	// discovered: an object makes the root a directory of the bucket top
	// level, which is what puts it in the plan.
	discovered bool
	counts     scanCounts
	vol        objAgg
	loose      []seqEntry // loose objects at the root level
	nss        map[string]*nsScan
	// audited holds the DNS-label namespace directories the audit of the
	// two shallow levels sees, with their cluster directory names.
	audited   map[string]map[string]bool
	reads     []ManifestRead
	requested map[string]bool
}

// nsScan is one namespace directory of a granular scan.
type nsScan struct {
	name, nsp string
	skip      bool       // outside --prefix or --namespace
	stray     *strayScan // a name that is not a DNS-1123 label
	loose     []seqEntry
	clusters  map[string]*clusterScan
}

// clusterScan is one cluster directory of a granular scan.
type clusterScan struct {
	d, uid string
	skip   bool                 // outside --prefix
	stray  *strayScan           // a malformed name
	hold   *Candidate           // an unreferenced placeholder, never listed
	groups map[string]*groupAgg // backup directories
	// loose are the objects in no backup directory, markers dropped; all is
	// the directory's whole listing, when snapshots are kept (FullScope).
	loose, all []seqEntry
}

// groupAgg is one backup directory; outside --prefix it only names
// dependencies.
type groupAgg struct {
	objAgg
	outside bool
}

// strayScan is an invalid namespace or cluster directory.
type strayScan struct {
	dir, scope string
	listed     bool // --delete-repository-stray: its scope is listed
	objs       []seqEntry
}

// ManifestRead is a manifest object whose body a Scan needs.
type ManifestRead struct {
	Key       string
	VersionID string
}

func (p *planner) newRootScan(root string, kind scanKind, versioned, keep bool) *rootScan {
	s := &rootScan{p: p, root: root, kind: kind, versioned: versioned, keep: keep, stream: !keep,
		allVersion: p.opts.versionedScopes(), nss: map[string]*nsScan{},
		audited: map[string]map[string]bool{}, requested: map[string]bool{}}
	s.counts.ids = newIDSet(!keep && kind != scanShallow)
	return s
}

// add feeds one listed object.
func (s *rootScan) add(o Object) {
	if e, ok := newEntry(o, s.versioned); ok {
		s.addEntry(e)
	}
}

func (s *rootScan) addEntry(e entry) {
	seq := s.seq
	s.seq++
	// Only what a listing of "root/" returns and places in the root.
	if !hasDirPrefix(e.obj.Key, s.root) || !Contains(s.root, e.key) || e.key == s.root && !e.slash {
		return
	}
	disc := s.p.opts.PurgeVersions || e.current
	s.discovered = s.discovered || disc
	at := locate(s.root, e)
	if disc && (s.kind == scanHistorical || s.kind == scanShallow) {
		s.audit(e, at)
	}
	if s.kind == scanShallow || !s.allVersion && !e.current {
		return
	}
	version := e.obj.VersionID
	if !s.allVersion {
		// Plain listing semantics: the identity is the key alone.
		e.obj.VersionID, e.obj.IsLatest = "", false
	}
	if s.kind == scanVolume {
		s.counts.add(e.obj, false)
		s.vol.add(e, seq, s.p.cutoff, s.p.opts.manifestName(), s.keep)
		return
	}
	s.granular(e, at, seq, version)
}

// place is where an entry lies on the first levels of a root. A delimiter
// listing files a key under its raw bytes while the layout reads its
// normalised form, so each level records both.
type place struct {
	rootLoose bool   // a loose object at the root level
	ns        string // otherwise, its namespace directory
	inNS      bool   // the raw key lies below "root/ns/"
	nsLoose   bool   // a loose object at the namespace level
	cd        string // otherwise, its cluster directory
	inCD      bool   // the raw key lies below "root/ns/cd/"
}

// locate places an entry of inside(root) the way view.level does for the
// root and for its namespace directory.
func locate(root string, e entry) place {
	k := e.key
	if k == root {
		return place{rootLoose: true}
	}
	rel := k[len(root)+1:]
	i := strings.IndexByte(rel, '/')
	if i < 0 && !e.slash {
		return place{rootLoose: true}
	}
	var at place
	at.ns = rel
	if i >= 0 {
		at.ns = rel[:i]
	}
	nsp := k[:len(root)+1+len(at.ns)]
	if at.inNS = hasDirPrefix(e.obj.Key, nsp); !at.inNS {
		return at
	}
	if k == nsp {
		at.nsLoose = true
		return at
	}
	rel = k[len(nsp)+1:]
	j := strings.IndexByte(rel, '/')
	if j < 0 && !e.slash {
		at.nsLoose = true
		return at
	}
	at.cd = rel
	if j >= 0 {
		at.cd = rel[:j]
	}
	at.inCD = hasDirPrefix(e.obj.Key, k[:len(nsp)+1+len(at.cd)])
	return at
}

// hasDirPrefix reports whether s starts with dir + "/".
func hasDirPrefix(s, dir string) bool {
	return len(s) > len(dir) && s[len(dir)] == '/' && s[:len(dir)] == dir
}

// audit records what the two delimiter levels below the root (namespaces
// and their cluster directories) show.
func (s *rootScan) audit(e entry, at place) {
	if at.rootLoose {
		s.counts.add(e.obj, true)
		return
	}
	cds, seen := s.audited[at.ns]
	if !seen {
		if IsDNSLabel(at.ns) {
			cds = map[string]bool{}
		}
		s.audited[at.ns] = cds
	}
	switch {
	case cds == nil || !at.inNS:
	case at.nsLoose:
		s.counts.add(e.obj, true)
	default:
		cds[at.cd] = true
	}
}

// granular files a candidate-scope entry under the granular scan.
func (s *rootScan) granular(e entry, at place, seq int, version string) {
	if at.rootLoose {
		s.counts.add(e.obj, false)
		s.loose = append(s.loose, seqEntry{e, seq})
		return
	}
	n := s.namespace(at.ns)
	switch {
	case n.skip:
		return
	case n.stray != nil:
		s.strayAdd(n.stray, e, at.inNS, seq)
		return
	case !at.inNS:
		return
	case at.nsLoose:
		s.counts.add(e.obj, false)
		n.loose = append(n.loose, seqEntry{e, seq})
		return
	}
	c := s.cluster(n, at.cd)
	switch {
	case c.skip || c.hold != nil:
		return
	case c.stray != nil:
		s.strayAdd(c.stray, e, at.inCD, seq)
		return
	case !at.inCD:
		return
	}
	s.counts.add(e.obj, false)
	if s.keep {
		c.all = append(c.all, seqEntry{e, seq})
	}
	g := s.group(c, e.key)
	if g == nil {
		if !e.marker {
			c.loose = append(c.loose, seqEntry{e, seq})
		}
		return
	}
	name := s.p.opts.manifestName()
	g.add(e, seq, s.p.cutoff, name, s.keep && !g.outside)
	// readManifest rejects a key that is not in normal form unread.
	if s.stream && isManifestEntry(e, name) && e.obj.Key == e.key && !s.requested[e.key] {
		s.requested[e.key] = true
		s.reads = append(s.reads, ManifestRead{Key: e.key, VersionID: version})
	}
}

// namespace returns the scan of namespace directory name, deciding on
// first sight whether it is skipped (outside --prefix or --namespace), a
// stray (not a DNS-1123 label) or scanned.
func (s *rootScan) namespace(name string) *nsScan {
	if n, ok := s.nss[name]; ok {
		return n
	}
	p := s.p
	n := &nsScan{name: name, nsp: JoinKey(s.root, name)}
	switch {
	case !Overlaps(p.prefix, n.nsp) || p.opts.Namespace != "" && name != p.opts.Namespace:
		n.skip = true
	case !IsDNSLabel(name):
		n.stray = p.newStrayScan(n.nsp)
	default:
		n.clusters = map[string]*clusterScan{}
	}
	s.nss[name] = n
	return n
}

// cluster returns the scan of cluster directory cd, deciding on first
// sight whether it is skipped (outside --prefix), a stray (malformed name),
// scanned, or held unlisted as an unreferenced cluster that a storage
// protection or a partial --prefix keeps.
func (s *rootScan) cluster(n *nsScan, cd string) *clusterScan {
	if c, ok := n.clusters[cd]; ok {
		return c
	}
	p := s.p
	c := &clusterScan{d: JoinKey(n.nsp, cd)}
	n.clusters[cd] = c
	_, uid, ok := ParseClusterDir(cd)
	switch {
	case !Overlaps(p.prefix, c.d):
		c.skip = true
		return c
	case !ok:
		c.stray = p.newStrayScan(c.d)
		return c
	}
	c.uid, c.groups = uid, map[string]*groupAgg{}
	if _, referenced := p.refs.clusterReferenced(s.root, n.name, c.d, uid); referenced {
		return c
	}
	hold := Candidate{Type: TypeOrphanClusterRoot, State: StateProtected, Prefix: c.d, Root: s.root,
		ClusterPrefix: c.d, ClusterUID: uid, DeferredScan: true}
	switch pr := p.refs.storage(c.d); {
	case pr != nil:
		hold.Reason, hold.Protection = "unreferenced cluster overlaps storage protection "+pr.Prefix+" ("+pr.Resource+")", pr
		c.hold = &hold
	case StrictlyInside(c.d, p.prefix):
		hold.Reason, hold.DeletionConfigurable = "--prefix covers only part of an unreferenced cluster directory", true
		c.hold = &hold
	}
	return c
}

// group returns the backup directory D/<c>/<b> holding key k, or
// nil when k lies in none.
func (s *rootScan) group(c *clusterScan, k string) *groupAgg {
	if len(k) <= len(c.d) {
		return nil
	}
	rel := k[len(c.d)+1:]
	i := strings.IndexByte(rel, '/')
	if i < 0 {
		return nil
	}
	j := strings.IndexByte(rel[i+1:], '/')
	if j < 0 {
		return nil
	}
	dir := k[:len(c.d)+1+i+1+j]
	if g, ok := c.groups[dir]; ok {
		return g
	}
	if !IsDNSLabel(rel[:i]) || !IsDNSSubdomain(rel[i+1:i+1+j]) {
		return nil
	}
	g := &groupAgg{outside: !Overlaps(s.p.prefix, dir)}
	c.groups[dir] = g
	return g
}

func (p *planner) newStrayScan(dir string) *strayScan {
	t := &strayScan{dir: dir, scope: dir, listed: p.opts.DeleteRepositoryStray}
	if StrictlyInside(dir, p.prefix) {
		t.scope = p.prefix
	}
	return t
}

// strayAdd files an entry of a stray directory; inDir says whether its raw
// key lies below the directory.
func (s *rootScan) strayAdd(t *strayScan, e entry, inDir bool, seq int) {
	if !t.listed || e.marker {
		return
	}
	if t.scope == t.dir && !inDir || t.scope != t.dir && !insideScope(t.scope, e) {
		return
	}
	s.counts.add(e.obj, false)
	t.objs = append(t.objs, seqEntry{e, seq})
}

// insideScope is view.inside's test for one entry.
func insideScope(p string, e entry) bool {
	return hasDirPrefix(e.obj.Key, p) && Contains(p, e.key) && !(e.key == p && !e.slash)
}

// scanCounts are a root's scanned counters: audit over the two shallow levels
// only (what an unreferenced historical root reports), all over everything
// the plan relies on. Each identity counts once, though the audit and the
// granular scan list it twice.
type scanCounts struct {
	ids          idSet
	auditN, allN int64
	auditB, allB int64
}

func (c *scanCounts) add(o Object, audit bool) {
	size := o.Size
	if o.DeleteMarker {
		size = 0
	}
	newAudit, newAll := c.ids.add(o.Key, o.VersionID, audit)
	if newAudit {
		c.auditN++
		c.auditB += size
	}
	if newAll {
		c.allN++
		c.allB += size
	}
}

// idSet remembers the identities counted, in two sets: the audit's and
// all. NewPlan's listing may repeat an identity anywhere, so it uses maps;
// a streamed S3 listing is in key order and repeats one only next to
// itself, so the current key's identities are all that need remembering.
type idSet interface {
	add(key, version string, audit bool) (newAudit, newAll bool)
}

func newIDSet(ordered bool) idSet {
	if ordered {
		return &runIDs{}
	}
	return &mapIDs{audit: map[objectID]bool{}, all: map[objectID]bool{}}
}

type mapIDs struct{ audit, all map[objectID]bool }

func (m *mapIDs) add(key, version string, audit bool) (bool, bool) {
	id := objectID{key, version}
	a := audit && !m.audit[id]
	if a {
		m.audit[id] = true
	}
	n := !m.all[id]
	m.all[id] = true
	return a, n
}

type runIDs struct {
	key        string
	audit, all []string // versions of key
}

func (r *runIDs) add(key, version string, audit bool) (bool, bool) {
	if key != r.key {
		r.key, r.audit, r.all = key, r.audit[:0], r.all[:0]
	}
	a := audit && !slices.Contains(r.audit, version)
	if a {
		r.audit = append(r.audit, version)
	}
	n := !slices.Contains(r.all, version)
	if n {
		r.all = append(r.all, version)
	}
	return a, n
}
