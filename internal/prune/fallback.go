package prune

import (
	"errors"
	"fmt"
	"sort"
)

// fallbackScan is one prefix scanned in manifest-driven mode.
type fallbackScan struct {
	prefix string // what is listed
	root   string // what status.path is relative to ("" in Tool mode)
	ns     string
}

// fallback is the manifest-driven mode used when no canonical repository
// root exists. It is kept read-only-safe: without a canonical root the
// volume-ownership condition a backup needs to be deletable can never
// hold, so the planner raises an execution blocker and the mode only ever
// reports.
func (p *planner) fallback() error {
	inv := p.inv
	if inv.Repo.BackupPVCName != "" && len(inv.Mapping) == 0 {
		return errors.New("object prefixes are unavailable: no backup pvc maps to an object root")
	}
	var scans []fallbackScan
	if len(inv.Mapping) > 0 {
		nss := make([]string, 0, len(inv.Mapping))
		for ns := range inv.Mapping {
			nss = append(nss, ns)
		}
		sort.Strings(nss)
		for _, ns := range nss {
			root := inv.Mapping[ns]
			if p.opts.Namespace != "" && ns != p.opts.Namespace || !Overlaps(p.prefix, root) {
				continue
			}
			sp := root
			if StrictlyInside(root, p.prefix) {
				sp = p.prefix
			}
			scans = append(scans, fallbackScan{prefix: sp, root: root, ns: ns})
		}
		if p.prefix != "" && len(scans) == 0 {
			return fmt.Errorf("--prefix %q does not overlap any mapped object root", p.prefix)
		}
	} else {
		base := JoinKey(CleanKey(inv.Repo.PathPrefix), p.opts.Namespace)
		sp := base
		if p.prefix != "" {
			if !Contains(base, p.prefix) {
				return fmt.Errorf("--prefix %q must lie inside %q", p.prefix, base)
			}
			sp = p.prefix
		}
		scans = append(scans, fallbackScan{prefix: sp, ns: p.opts.Namespace})
	}
	p.block("manifest-driven mode: no canonical repository root, so volume ownership cannot be verified")
	for _, s := range scans {
		p.plan.Prefixes = append(p.plan.Prefixes, s.prefix)
		p.fallbackPrefix(s)
	}
	return nil
}

// fallbackPrefix defines a candidate at every directory holding a manifest
// and counts everything else as unclassified.
func (p *planner) fallbackPrefix(s fallbackScan) {
	es := p.scope.inside(s.prefix)
	p.list(s.prefix, true, es)
	name := p.opts.manifestName()
	set := map[string]bool{}
	for _, e := range es {
		if e.current && !e.slash && !e.obj.DeleteMarker && baseName(e.key) == name {
			set[parentKey(e.key)] = true
		}
	}
	dirs := sortedKeys(set)
	claimed := make([]bool, len(es))
	for _, dir := range dirs {
		if dir == "" {
			continue // a manifest at the bucket top level names no directory
		}
		var mine []entry
		for i, e := range es {
			if Contains(dir, e.key) && !(e.key == dir && !e.slash) {
				mine = append(mine, e)
				claimed[i] = true
			}
		}
		nested := false
		for _, other := range dirs {
			nested = nested || StrictlyInside(dir, other)
		}
		loc := backupLoc{root: s.root, dir: dir, key: BackupKey{Namespace: s.ns, Name: baseName(dir)},
			fallback: true, nested: nested}
		p.add(p.evalBackup(loc, aggOf(mine, p.cutoff, name, true)))
	}
	for i, e := range es {
		if !claimed[i] {
			p.plan.UnclassifiedObjects++
			if !e.obj.DeleteMarker {
				p.plan.UnclassifiedBytes += e.obj.Size
			}
		}
	}
}
