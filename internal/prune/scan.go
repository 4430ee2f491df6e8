package prune

import (
	"fmt"
	"sort"
)

// granular scans a current or referenced repository root (3.6).
func (p *planner) granular(root string) {
	contents, nsDirs := p.scope.level(root)
	p.list(root, false, contents)
	p.strayLevel(root, "", root, contents)
	for _, ns := range nsDirs {
		nsp := JoinKey(root, ns)
		if !Overlaps(p.prefix, nsp) || p.opts.Namespace != "" && ns != p.opts.Namespace {
			continue
		}
		if !IsDNSLabel(ns) {
			p.strayDir(root, "", nsp)
			continue
		}
		c2, cdirs := p.scope.level(nsp)
		p.list(nsp, false, c2)
		p.strayLevel(root, ns, nsp, c2)
		for _, cd := range cdirs {
			d := JoinKey(nsp, cd)
			if !Overlaps(p.prefix, d) {
				continue
			}
			if _, uid, ok := ParseClusterDir(cd); ok {
				p.cluster(root, ns, d, uid)
			} else {
				p.strayDir(root, ns, d)
			}
		}
	}
}

// cluster applies the cluster directory logic of 3.7.
func (p *planner) cluster(root, ns, d, uid string) {
	_, referenced := p.refs.clusterReferenced(root, ns, d, uid)
	if !referenced {
		base := Candidate{Type: TypeOrphanClusterRoot, State: StateProtected, Prefix: d, Root: root,
			ClusterPrefix: d, ClusterUID: uid, DeferredScan: true}
		if pr := p.refs.storage(d); pr != nil {
			base.Reason, base.Protection = fmt.Sprintf("unreferenced cluster overlaps storage protection %s (%s)", pr.Prefix, pr.Resource), pr
			p.add(base)
			return
		}
		if StrictlyInside(d, p.prefix) {
			base.Reason, base.DeletionConfigurable = "--prefix covers only part of an unreferenced cluster directory", true
			p.add(base)
			return
		}
	}
	all := p.scope.inside(d)
	p.list(d, true, all)
	dirs := map[string][]entry{}
	var stray []entry
	for _, e := range all {
		segs := relSegments(d, e.key)
		if len(segs) >= 3 && IsDNSLabel(segs[0]) && IsDNSSubdomain(segs[1]) {
			k := JoinKey(d, segs[0], segs[1])
			dirs[k] = append(dirs[k], e)
			continue
		}
		stray = append(stray, e)
	}
	names := make([]string, 0, len(dirs))
	for k := range dirs {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, dir := range names {
		es := dirs[dir]
		if onlyMarkers(es) {
			continue
		}
		loc := backupLoc{root: root, ns: ns, cluster: d, clusterUID: uid, dir: dir,
			key: BackupKey{Namespace: ns, Name: baseName(dir)}}
		if !Overlaps(p.prefix, dir) {
			// Left out of the plan, so it remains: whatever it names as
			// parent or base must remain too. Without this, --prefix naming
			// one backup of an incremental chain would delete the parent of
			// a retained sibling (1.4).
			p.plan.outsideDeps = append(p.plan.outsideDeps, p.readManifests(loc, es).deps...)
			continue
		}
		p.add(p.evalBackup(loc, es))
	}
	if planned := p.inPrefix(withoutMarkers(stray)); len(planned) > 0 {
		c := Candidate{Type: TypeRepositoryStray, Prefix: d, Root: root, ClusterPrefix: d, ClusterUID: uid,
			Objects: objectsOf(planned), FullScope: objectsOf(all)}
		p.strayState(&c, ns)
		p.add(c)
	}
}

// inPrefix keeps the entries inside --prefix (3.10.5).
func (p *planner) inPrefix(es []entry) []entry {
	var out []entry
	for _, e := range es {
		if Contains(p.prefix, e.key) {
			out = append(out, e)
		}
	}
	return out
}

// strayLevel turns the loose objects of one level into a stray (3.10.1).
func (p *planner) strayLevel(root, ns, prefix string, contents []entry) {
	planned := p.inPrefix(withoutMarkers(contents))
	if len(planned) == 0 {
		return
	}
	c := Candidate{Type: TypeRepositoryStray, Prefix: prefix, Root: root, Level: true, Objects: objectsOf(planned)}
	p.strayState(&c, ns)
	p.add(c)
}

// strayDir handles an invalid namespace or cluster directory (3.10.3).
func (p *planner) strayDir(root, ns, dir string) {
	c := Candidate{Type: TypeRepositoryStray, Prefix: dir, ScopePrefix: dir, Root: root}
	if ns != "" {
		c.ClusterPrefix = dir // a malformed cluster directory still belongs to ns
	}
	if StrictlyInside(dir, p.prefix) {
		c.ScopePrefix = p.prefix
	}
	if !p.opts.DeleteRepositoryStray {
		c.DeferredScan = true
		p.strayState(&c, ns)
		if c.DeletionConfigurable {
			c.Reason = "invalid directory; recursive listing skipped: enable --delete-repository-stray to delete it"
		}
		p.add(c)
		return
	}
	es := withoutMarkers(p.scope.inside(c.ScopePrefix))
	p.list(c.ScopePrefix, true, es)
	if len(es) == 0 {
		return
	}
	c.Objects = objectsOf(es)
	p.strayState(&c, ns)
	p.add(c)
}

// strayState decides a stray (3.10.2, 3.10.4).
func (p *planner) strayState(c *Candidate, ns string) {
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

// strayProtection returns the hard protection of 3.10.4 for a stray: an
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
