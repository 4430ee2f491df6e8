package prune

import (
	"fmt"
	"sort"
)

// finish classifies the root from what its listing showed and adds the
// results to the plan.
func (s *rootScan) finish() {
	p := s.p
	switch s.kind {
	case scanVolume:
		s.finishVolume()
		return
	case scanGranular:
		p.scanned(s.counts.allN, s.counts.allB)
		s.finishGranular()
		return
	}
	referenced, calls := s.auditReferenced()
	p.plan.Listed = append(p.plan.Listed, calls...)
	if referenced {
		p.scanned(s.counts.allN, s.counts.allB)
		s.finishGranular() // referenced: scanned like a current root
		return
	}
	p.scanned(s.counts.auditN, s.counts.auditB)
	p.historical(s.root)
}

// auditReferenced reports whether the root is referenced (rootReferenced),
// from the topology its two shallow levels show, and the listings that took.
func (s *rootScan) auditReferenced() (bool, []ListCall) {
	calls := []ListCall{{Prefix: s.root}}
	topo := map[string][]clusterDir{}
	for _, ns := range sortedKeys(s.audited) {
		cds := s.audited[ns]
		if cds == nil {
			continue
		}
		calls = append(calls, ListCall{Prefix: JoinKey(s.root, ns)})
		topo[ns] = []clusterDir{}
		for _, cd := range sortedKeys(cds) {
			if _, uid, ok := ParseClusterDir(cd); ok {
				topo[ns] = append(topo[ns], clusterDir{name: cd, uid: uid})
			}
		}
	}
	_, ok := s.p.refs.rootReferenced(s.root, topo)
	return ok, calls
}

// finishVolume classifies an unowned root listed whole.
func (s *rootScan) finishVolume() {
	p, a := s.p, &s.vol
	p.scanned(s.counts.allN, s.counts.allB)
	p.listed(s.root, true)
	c := Candidate{Type: TypeOrphanVolumeRoot, Prefix: s.root, Root: s.root, Objects: objectsOf(sortedEntries(a.objs)),
		ObjectCount: a.n, Bytes: a.bytes, LastModified: a.newest, CreatedAt: a.newest}
	p.rootState(&c, a)
	p.add(c)
}

// finishGranular classifies a current or referenced repository root.
func (s *rootScan) finishGranular() {
	p, root := s.p, s.root
	p.listed(root, false)
	p.strayLevel(root, "", root, sortedEntries(s.loose))
	for _, ns := range sortedKeys(s.nss) {
		n := s.nss[ns]
		switch {
		case n.skip:
			continue
		case n.stray != nil:
			p.strayDir(root, "", n.stray)
			continue
		}
		p.listed(n.nsp, false)
		p.strayLevel(root, ns, n.nsp, sortedEntries(n.loose))
		for _, cd := range sortedKeys(n.clusters) {
			switch c := n.clusters[cd]; {
			case c.skip:
			case c.stray != nil:
				p.strayDir(root, ns, c.stray)
			case c.hold != nil:
				p.add(*c.hold)
			default:
				s.finishCluster(ns, c)
			}
		}
	}
}

// finishCluster is the cluster scan: a candidate per backup
// directory and one for the objects in none.
func (s *rootScan) finishCluster(ns string, c *clusterScan) {
	p, d := s.p, c.d
	p.listed(d, true)
	for _, dir := range sortedKeys(c.groups) {
		g := c.groups[dir]
		if g.onlyMarkers() {
			continue
		}
		loc := backupLoc{root: s.root, ns: ns, cluster: d, clusterUID: c.uid, dir: dir,
			key: BackupKey{Namespace: ns, Name: baseName(dir)}}
		if g.outside {
			// Left out of the plan, so it remains: whatever it names as
			// parent or base must remain too. Without this, --prefix naming
			// one backup of an incremental chain would delete the parent of
			// a retained sibling.
			p.plan.outsideDeps = append(p.plan.outsideDeps, p.readManifests(loc, sortedEntries(g.mans)).deps...)
			continue
		}
		p.add(p.evalBackup(loc, &g.objAgg))
	}
	if planned := p.inPrefix(sortedEntries(c.loose)); len(planned) > 0 {
		// A streamed plan holds no listing of the directory; the final
		// snapshot lists it before anything is compared or deleted.
		full := []Object{}
		if s.keep {
			full = objectsOf(sortedEntries(c.all))
		}
		st := Candidate{Type: TypeRepositoryStray, Prefix: d, Root: s.root, ClusterPrefix: d, ClusterUID: c.uid,
			Objects: objectsOf(planned), FullScope: full}
		p.strayState(&st, ns)
		p.add(st)
	}
}

// sortedKeys returns the keys of a map in order.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// inPrefix keeps the entries inside --prefix.
func (p *planner) inPrefix(es []entry) []entry {
	var out []entry
	for _, e := range es {
		if Contains(p.prefix, e.key) {
			out = append(out, e)
		}
	}
	return out
}

// strayLevel turns the loose objects of one level into a stray.
func (p *planner) strayLevel(root, ns, prefix string, contents []entry) {
	planned := p.inPrefix(withoutMarkers(contents))
	if len(planned) == 0 {
		return
	}
	c := Candidate{Type: TypeRepositoryStray, Prefix: prefix, Root: root, Level: true, Objects: objectsOf(planned)}
	p.strayState(&c, ns)
	p.add(c)
}

// strayDir handles an invalid namespace or cluster directory.
func (p *planner) strayDir(root, ns string, t *strayScan) {
	c := Candidate{Type: TypeRepositoryStray, Prefix: t.dir, ScopePrefix: t.scope, Root: root}
	if ns != "" {
		c.ClusterPrefix = t.dir // a malformed cluster directory still belongs to ns
	}
	if !t.listed {
		c.DeferredScan = true
		p.strayState(&c, ns)
		if c.DeletionConfigurable {
			c.Reason = "invalid directory; recursive listing skipped: enable --delete-repository-stray to delete it"
		}
		p.add(c)
		return
	}
	p.listed(t.scope, true)
	if len(t.objs) == 0 {
		return
	}
	c.Objects = objectsOf(sortedEntries(t.objs))
	p.strayState(&c, ns)
	p.add(c)
}

// strayState decides a stray: hard protections first, then
// --delete-repository-stray, then age.
func (p *planner) strayState(c *Candidate, ns string) {
	c.ObjectCount, c.Bytes = len(c.Objects), sumBytes(c.Objects)
	c.LastModified, c.CreatedAt = newest(c.Objects), newest(c.Objects)
	if why, pr, hard := strayProtection(p.refs, *c, ns); hard {
		c.State, c.Reason, c.Protection = StateProtected, why, pr
		return
	}
	if !p.opts.DeleteRepositoryStray {
		c.State, c.DeletionConfigurable = StateProtected, true
		c.Reason = "repository stray: enable --delete-repository-stray to delete it"
		return
	}
	if o, ok := youngObject(c.Objects, p.cutoff); ok {
		c.State, c.Reason = StateTooYoung, youngReason(o)
		return
	}
	c.State, c.Reason = StateOrphan, "content outside the canonical backup layout"
}

// strayProtection returns the hard protection of a stray: an
// object inside a live path, a storage protection, or an uncertain reference
// to its cluster directory. For an unlisted stray directory the directory
// prefix stands in for its objects.
func strayProtection(r *refs, c Candidate, ns string) (string, *Protection, bool) {
	keys := []string{c.Prefix}
	if !c.DeferredScan {
		keys = keys[:0]
		for _, o := range c.Objects {
			keys = append(keys, CleanKey(o.Key))
		}
	}
	for _, k := range keys {
		if b, ok := r.liveStatus(c.Root, k); ok {
			return fmt.Sprintf("%s lies inside the status.path of live Backup %s", k, b.Key), nil, true
		}
		if b, ok := r.liveKopia(c.Root, k); ok {
			return fmt.Sprintf("%s lies inside the kopia path of live Backup %s", k, b.Key), nil, true
		}
		if pr := r.storage(k); pr != nil {
			return fmt.Sprintf("%s overlaps storage protection %s (%s)", k, pr.Prefix, pr.Resource), pr, true
		}
	}
	if c.ClusterPrefix != "" && ns != "" {
		if why, ok := r.uncertain(c.Root, ns, c.ClusterPrefix, c.ClusterUID); ok {
			return "uncertain reference: " + why, nil, true
		}
	}
	return "", nil, false
}
