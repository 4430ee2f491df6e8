package prune

import (
	"fmt"
)

// volumeMode reports whether a canonical repository root exists.
func (p *planner) volumeMode() bool { return VolumeDiscovery(*p.inv) }

// VolumeDiscovery reports whether the inventory holds a canonical repository
// root, so that the planner discovers pvc roots; otherwise it runs in
// manifest-driven mode (see planner.fallback), which only NewPlan serves.
func VolumeDiscovery(inv Inventory) bool {
	for root, o := range inv.Owners {
		if o.Kind == OwnerRepository && IsCanonicalRoot(root) {
			return true
		}
	}
	return false
}

// rootAction is what discovery does with one canonical root.
type rootAction uint8

const (
	actOtherNamespace rootAction = iota // root of another --namespace: not listed or counted
	actUser                             // protected-user-volume, user-owned
	actUnknown                          // protected-user-volume, unknown owner
	actUnowned                          // orphan-volume-root, kept unlisted by a filter
	actVolume                           // orphan-volume-root, listed whole
	actCurrent                          // current or mapped repository root: granular
	actHistorical                       // historical repository root: audit first
)

// rootAction classifies a root through the ownership index.
func (p *planner) rootAction(root string) (rootAction, VolumeOwner) {
	o, owned := p.inv.Owners[root]
	if !owned && p.inv.OwnershipIncomplete {
		owned, o = true, VolumeOwner{Kind: OwnerUnknown, Resource: "ownership index incomplete"}
	}
	switch {
	case owned && o.Kind == OwnerRepository && p.opts.Namespace != "" && o.Namespace != "" && o.Namespace != p.opts.Namespace:
		return actOtherNamespace, o
	case !owned && (p.opts.Namespace != "" || StrictlyInside(root, p.prefix)):
		return actUnowned, o
	case !owned:
		return actVolume, o
	case o.Kind == OwnerUser:
		return actUser, o
	case o.Kind == OwnerRepository && (o.Current || p.mapped[root]):
		return actCurrent, o
	case o.Kind == OwnerRepository:
		return actHistorical, o
	}
	return actUnknown, o
}

// countRoot adds a discovered root to the plan's VolumeRootCounts.
func (p *planner) countRoot(a rootAction) {
	c := &p.plan.VolumeRootCounts
	if a == actOtherNamespace {
		return
	}
	c.Total++
	switch a {
	case actUser:
		c.ProtectedUser++
	case actUnknown:
		c.Other++
	case actUnowned, actVolume:
		c.Unowned++
	default:
		c.Repository++
	}
}

// unlisted classifies a root that is never listed. It returns false for a
// root that needs its listing.
func (p *planner) unlisted(root string, a rootAction, o VolumeOwner) bool {
	switch a {
	case actOtherNamespace:
	case actUser:
		p.userVolume(root, o, fmt.Sprintf("owned by %s", o.Resource))
	case actUnknown:
		p.userVolume(root, o, "unknown owner: "+o.Resource)
	case actUnowned:
		p.unlistedVolumeRoot(root)
	default:
		return false
	}
	return true
}

// scanKindOf is how a listed root is scanned.
func scanKindOf(a rootAction) scanKind {
	switch a {
	case actVolume:
		return scanVolume
	case actHistorical:
		return scanHistorical
	}
	return scanGranular
}

// discover lists the bucket top level and classifies each canonical root
// by its owner, feeding each listed root from the index.
func (p *planner) discover() error {
	p.plan.VolumeDiscovery = true
	_, dirs := p.disc.level("")
	p.plan.Listed = append(p.plan.Listed, ListCall{})
	var roots []string
	for _, d := range dirs {
		if IsCanonicalRoot(d) && Overlaps(p.prefix, d) {
			roots = append(roots, d)
		}
	}
	if p.prefix != "" && len(roots) == 0 {
		return fmt.Errorf("--prefix %q does not overlap any discovered pvc root", p.prefix)
	}
	all := view{ix: p.ix, all: true}
	for _, root := range roots {
		a, o := p.rootAction(root)
		p.countRoot(a)
		if p.unlisted(root, a, o) {
			continue
		}
		s := p.newRootScan(root, scanKindOf(a), p.versioned, true)
		for _, e := range all.inside(root) {
			s.addEntry(e)
		}
		s.finish()
	}
	return nil
}

// userVolume emits a hard-protected root that is never listed: a user
// volume or a root of unknown owner.
func (p *planner) userVolume(root string, o VolumeOwner, reason string) {
	p.add(Candidate{Type: TypeProtectedUserVolume, State: StateProtected, Reason: reason, Prefix: root, Root: root,
		DeferredScan: true, Protection: &Protection{Prefix: root, Kind: "volume-owner", Resource: o.Resource}})
}

// unlistedVolumeRoot emits an unowned root that a filter (--namespace, or a
// --prefix inside it) keeps from being listed.
func (p *planner) unlistedVolumeRoot(root string) {
	c := Candidate{Type: TypeOrphanVolumeRoot, Prefix: root, Root: root, State: StateProtected,
		DeletionConfigurable: true, DeferredScan: true}
	if p.opts.Namespace != "" {
		c.Reason = "unowned root: a --namespace filter never authorises deleting an unowned root"
	} else {
		c.Reason = "--prefix covers only part of the unowned root"
	}
	p.add(c)
}

// rootState decides a listed whole-root candidate: protections first, then
// emptiness and age.
func (p *planner) rootState(c *Candidate, a *objAgg) {
	if pr := p.refs.storage(c.Prefix); pr != nil {
		c.State, c.Reason, c.Protection = StateProtected, "storage protection "+pr.Prefix, pr
		return
	}
	if b, ok := p.refs.absolute(c.Prefix); ok {
		c.State, c.Reason = StateProtected, fmt.Sprintf("a path of live Backup %s lies in the root", b.Key)
		return
	}
	switch {
	case a.n == 0:
		c.State, c.Reason = StateProtected, "no current objects"
	case a.onlyMarkers():
		// Directory markers never create a candidate on their own.
		c.State, c.Reason = StateProtected, "only directory markers"
	case a.hasYoung:
		c.State, c.Reason = StateTooYoung, youngReason(a.young.obj)
	default:
		c.State, c.Reason = StateOrphan, "unowned canonical pvc root"
	}
}

// historical emits the deferred candidate of an unreferenced historical
// root, listed in full only at execution.
func (p *planner) historical(root string) {
	c := Candidate{Type: TypeOrphanRepositoryRoot, Prefix: root, Root: root, DeferredScan: true,
		State: StateOrphan, Reason: "historical repository root has no references"}
	if StrictlyInside(root, p.prefix) {
		c.State, c.DeletionConfigurable = StateProtected, true
		c.Reason = "--prefix covers only part of the historical repository root"
	}
	p.add(c)
}
