package prune

import (
	"errors"
	"fmt"
	"sort"
)

// Invalidation says why one planned candidate must not be deleted.
type Invalidation struct {
	// Index is the candidate's position in Plan.Candidates.
	Index  int
	Prefix string
	Reason string
}

// Revalidate re-checks one orphan candidate against a refreshed inventory.
// It returns nil when the candidate may still be deleted.
func Revalidate(pl Plan, c Candidate, inv Inventory) error {
	r := newRefs(&inv)
	owner, owned := inv.Owners[c.Root]
	repoOwned := func() error {
		if !owned || owner.Kind != OwnerRepository {
			if owned {
				return fmt.Errorf("root %s is now owned by %s", c.Root, owner.Resource)
			}
			return fmt.Errorf("root %s is no longer a repository root", c.Root)
		}
		return nil
	}
	switch c.Type {
	case TypeOrphanVolumeRoot:
		if owned {
			return fmt.Errorf("root %s is now owned by %s", c.Root, owner.Resource)
		}
		if inv.OwnershipIncomplete {
			return errors.New("ownership index is incomplete")
		}
		if pr := r.storage(c.Prefix); pr != nil {
			return fmt.Errorf("root overlaps storage protection %s (%s)", pr.Prefix, pr.Resource)
		}
		if b, ok := r.absolute(c.Prefix); ok {
			return fmt.Errorf("a path of live Backup %s lies in the root", b.Key)
		}
	case TypeOrphanRepositoryRoot:
		if !IsCanonicalRoot(c.Prefix) {
			return fmt.Errorf("root %s is not canonical", c.Prefix)
		}
		if err := repoOwned(); err != nil {
			return err
		}
		if owner.Current || mapsRoot(inv, c.Prefix) {
			return fmt.Errorf("root %s is current again", c.Prefix)
		}
		if c.DeferredScan {
			return errors.New("root was never enumerated")
		}
		if why, ok := r.rootReferenced(c.Prefix, topologyOf(c.Prefix, c.Objects)); ok {
			return fmt.Errorf("root is referenced: %s", why)
		}
	case TypeOrphanClusterRoot:
		segs := relSegments(c.Root, c.Prefix)
		if len(segs) != 2 || !IsDNSLabel(segs[0]) {
			return fmt.Errorf("cluster directory %s is not under a namespace root", c.Prefix)
		}
		_, uid, ok := ParseClusterDir(segs[1])
		if !ok {
			return fmt.Errorf("cluster directory %s is malformed", c.Prefix)
		}
		if err := repoOwned(); err != nil {
			return err
		}
		if why, ok := r.clusterReferenced(c.Root, segs[0], c.Prefix, uid); ok {
			return fmt.Errorf("cluster is referenced: %s", why)
		}
		if pr := r.storage(c.Prefix); pr != nil {
			return fmt.Errorf("cluster overlaps storage protection %s (%s)", pr.Prefix, pr.Resource)
		}
	case TypeRepositoryStray:
		if !pl.DeleteRepositoryStray {
			return errors.New("repository strays were not authorised (--delete-repository-stray)")
		}
		if err := repoOwned(); err != nil {
			return err
		}
		ns := ""
		if segs := relSegments(c.Root, c.Prefix); len(segs) > 0 {
			ns = segs[0]
		}
		c.DeferredScan = false
		if why, _, hard := strayProtection(r, c, ns); hard {
			return errors.New(why)
		}
	case TypeBackup:
		if c.Backup.Namespace == "" || c.Backup.Name == "" {
			return errors.New("backup has no namespace or name")
		}
		if c.Root != "" {
			if err := repoOwned(); err != nil {
				return err
			}
		}
		if _, why, _ := backupProtections(r, c); why != "" {
			return errors.New(why)
		}
		for _, k := range c.ContainedBackups {
			if r.liveDeps[k] {
				return fmt.Errorf("%s is now the parent or base of a live Backup", k)
			}
		}
	default:
		return fmt.Errorf("candidate type %s cannot be deleted", c.Type)
	}
	return nil
}

func mapsRoot(inv Inventory, root string) bool {
	for _, r := range inv.Mapping {
		if r == root {
			return true
		}
	}
	return false
}

// topologyOf derives a root's topology (namespace → well-formed cluster
// directories) from snapshot keys.
func topologyOf(root string, os []Object) map[string][]clusterDir {
	topo := map[string][]clusterDir{}
	seen := map[string]bool{}
	for _, o := range os {
		segs := relSegments(root, CleanKey(o.Key))
		if len(segs) < 2 || !IsDNSLabel(segs[0]) {
			continue
		}
		if _, ok := topo[segs[0]]; !ok {
			topo[segs[0]] = []clusterDir{}
		}
		if _, uid, ok := ParseClusterDir(segs[1]); ok && !seen[segs[0]+"/"+segs[1]] {
			seen[segs[0]+"/"+segs[1]] = true
			topo[segs[0]] = append(topo[segs[0]], clusterDir{name: segs[1], uid: uid})
		}
	}
	for ns := range topo {
		sort.Slice(topo[ns], func(i, j int) bool { return topo[ns][i].name < topo[ns][j].name })
	}
	return topo
}

// Recheck is the execution-time re-check of every orphan candidate against
// a fresh listing and a refreshed inventory. A non-nil
// error means the refresh itself failed and the whole run is stale; the
// invalidations name the candidates that must not be deleted.
func Recheck(pl Plan, inv Inventory, l Listing) ([]Invalidation, error) {
	if err := CheckRefresh(pl, inv); err != nil {
		return nil, err
	}
	v, ix, err := scopeView(pl.opts, l)
	if err != nil {
		return nil, err
	}
	var out []Invalidation
	for i, c := range pl.Candidates {
		if c.State != StateOrphan {
			continue
		}
		if why := recheckOne(pl, c, inv, v, ix); why != "" {
			out = append(out, Invalidation{Index: i, Prefix: c.Prefix, Reason: why})
		}
	}
	return out, nil
}

func recheckOne(pl Plan, c Candidate, inv Inventory, v view, ix *index) string {
	if c.DeferredScan {
		return "candidate was never enumerated"
	}
	if err := CompareSnapshots(c.Objects, objectsOf(scopeEntries(c, v))); err != nil {
		return err.Error()
	}
	if c.FullScope != nil {
		if err := CompareSnapshots(c.FullScope, objectsOf(v.inside(c.Prefix))); err != nil {
			return "cluster scope " + err.Error()
		}
	}
	if c.ManifestKey != "" {
		var head *Object
		for _, e := range ix.entries {
			if e.obj.Key == c.ManifestKey && e.current {
				o := e.obj
				head = &o
			}
		}
		if head == nil {
			return "manifest changed: it is gone"
		}
		if err := CheckManifestHead(c, *head); err != nil {
			return err.Error()
		}
	}
	if err := Revalidate(pl, c, inv); err != nil {
		return err.Error()
	}
	return ""
}
