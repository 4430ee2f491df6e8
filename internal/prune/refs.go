package prune

import (
	"fmt"
	"sort"
)

// refs answers the reference questions of §3 against the in-memory
// inventory only.
type refs struct {
	inv *Inventory
	// byNS lists live Backups per namespace, sorted by name for stable
	// reasons.
	byNS     map[string][]LiveBackup
	all      []LiveBackup
	liveDeps map[BackupKey]bool
}

func newRefs(inv *Inventory) *refs {
	r := &refs{inv: inv, byNS: map[string][]LiveBackup{}, liveDeps: map[BackupKey]bool{}}
	for _, b := range inv.Backups {
		r.all = append(r.all, b)
	}
	sort.Slice(r.all, func(i, j int) bool { return r.all[i].Key.String() < r.all[j].Key.String() })
	for _, b := range r.all {
		r.byNS[b.Key.Namespace] = append(r.byNS[b.Key.Namespace], b)
		for _, d := range b.deps() {
			r.liveDeps[d] = true
		}
	}
	return r
}

// deps returns the parent and base keys of a live Backup, resolved in its
// namespace.
func (b LiveBackup) deps() []BackupKey {
	var out []BackupKey
	for _, n := range []string{b.Parent, b.Base} {
		if n != "" {
			out = append(out, BackupKey{b.Key.Namespace, n})
		}
	}
	return out
}

// statusPaths returns the Backup's status.path placed in the bucket: raw
// (resolved under root) and qualified.
func (b LiveBackup) statusPaths(root string) []string { return placed(root, b.Path, b.PathQualified) }

// kopiaPaths is statusPaths for kopiaRepoPath.
func (b LiveBackup) kopiaPaths(root string) []string {
	return placed(root, b.KopiaPath, b.KopiaPathQualified)
}

func placed(root, raw, qualified string) []string {
	var out []string
	if k, ok := resolveUnder(root, raw); ok {
		out = append(out, k)
	}
	if qualified != "" {
		out = append(out, qualified)
	}
	return out
}

// absolutePaths returns the Backup's paths that are placed in the bucket
// without a root to resolve them against: raw paths starting with a canonical
// pvc root, and the qualified forms.
func (b LiveBackup) absolutePaths() []string {
	var out []string
	for _, raw := range []string{b.Path, b.KopiaPath} {
		if k, ok := NormalizeKey(raw); ok && IsCanonicalRoot(firstSegment(k)) {
			out = append(out, k)
		}
	}
	for _, q := range []string{b.PathQualified, b.KopiaPathQualified} {
		if q != "" {
			out = append(out, q)
		}
	}
	return out
}

// absolute returns a live Backup with an absolute path overlapping prefix.
// Relative paths are not resolved here: they belong to the root of the
// Backup PVC, which an unowned root never is.
func (r *refs) absolute(prefix string) (LiveBackup, bool) {
	for _, b := range r.all {
		for _, p := range b.absolutePaths() {
			if Overlaps(p, prefix) {
				return b, true
			}
		}
	}
	return LiveBackup{}, false
}

// storage returns the first storage protection overlapping prefix.
func (r *refs) storage(prefix string) *Protection {
	for i, p := range r.inv.StorageProtections {
		if Overlaps(p.Prefix, prefix) {
			return &r.inv.StorageProtections[i]
		}
	}
	return nil
}

// liveStatus returns a live Backup whose status.path overlaps prefix.
func (r *refs) liveStatus(root, prefix string) (LiveBackup, bool) {
	for _, b := range r.all {
		for _, p := range b.statusPaths(root) {
			if Overlaps(p, prefix) {
				return b, true
			}
		}
	}
	return LiveBackup{}, false
}

// liveKopia returns a live Backup whose kopiaRepoPath overlaps prefix.
func (r *refs) liveKopia(root, prefix string) (LiveBackup, bool) {
	for _, b := range r.all {
		for _, p := range b.kopiaPaths(root) {
			if Overlaps(p, prefix) {
				return b, true
			}
		}
	}
	return LiveBackup{}, false
}

// inCluster reports whether a path resolves into cluster directory d.
func inCluster(paths []string, d string) bool {
	for _, p := range paths {
		if Contains(d, p) {
			return true
		}
	}
	return false
}

// usableLocator reports whether the Backup can be pinned to one cluster
// directory under root and ns: a canonical cluster-uid label, or a path
// resolving to a well-formed cluster directory there (3.5.2 c-iii).
func (b LiveBackup) usableLocator(root, ns string) bool {
	if IsCanonicalUUID(b.ClusterUID) {
		return true
	}
	nsp := JoinKey(root, ns)
	for _, p := range append(b.statusPaths(root), b.kopiaPaths(root)...) {
		if segs := relSegments(nsp, p); len(segs) >= 1 {
			if _, _, ok := ParseClusterDir(segs[0]); ok {
				return true
			}
		}
	}
	return false
}

// nsActivity reports a Restore or live dependency naming a key in ns.
func (r *refs) nsActivity(ns string) (string, bool) {
	for k := range r.inv.RestoreProtected {
		if k.Namespace == ns {
			return fmt.Sprintf("an active Restore references %s", k), true
		}
	}
	for k := range r.liveDeps {
		if k.Namespace == ns {
			return fmt.Sprintf("a live Backup depends on %s", k), true
		}
	}
	return "", false
}

// clusterReferenced implements 3.7.1 for cluster directory d (UUID uid) of
// namespace ns under root.
func (r *refs) clusterReferenced(root, ns, d, uid string) (string, bool) {
	for _, b := range r.byNS[ns] {
		switch {
		case uid != "" && b.ClusterUID == uid:
			return fmt.Sprintf("live Backup %s carries the cluster uid", b.Key), true
		case inCluster(append(b.statusPaths(root), b.kopiaPaths(root)...), d):
			return fmt.Sprintf("a path of live Backup %s resolves into the cluster", b.Key), true
		case !b.usableLocator(root, ns):
			return fmt.Sprintf("live Backup %s has no usable locator", b.Key), true
		}
	}
	return r.nsActivity(ns)
}

// uncertain implements the uncertain-reference test of 3.10.4 for a cluster
// directory d (uid "" for a malformed one): a Backup that points at the
// cluster without a matching status.path, one with no usable locator, or a
// Restore or live dependency in the namespace.
func (r *refs) uncertain(root, ns, d, uid string) (string, bool) {
	for _, b := range r.byNS[ns] {
		points := uid != "" && b.ClusterUID == uid || inCluster(b.kopiaPaths(root), d)
		if points && !inCluster(b.statusPaths(root), d) {
			return fmt.Sprintf("live Backup %s points at the cluster without a matching status.path", b.Key), true
		}
		if !b.usableLocator(root, ns) {
			return fmt.Sprintf("live Backup %s has no usable locator", b.Key), true
		}
	}
	return r.nsActivity(ns)
}

// clusterDir is one well-formed cluster directory of a topology.
type clusterDir struct{ name, uid string }

// rootReferenced implements 3.5.2 for a historical root with the given
// topology (namespace → well-formed cluster directories).
func (r *refs) rootReferenced(root string, topo map[string][]clusterDir) (string, bool) {
	if p := r.storage(root); p != nil {
		return fmt.Sprintf("storage protection %s (%s)", p.Prefix, p.Resource), true
	}
	for _, b := range r.all {
		for _, p := range b.absolutePaths() {
			if IsCanonicalRoot(firstSegment(p)) && Overlaps(p, root) {
				return fmt.Sprintf("a path of live Backup %s lies in the root", b.Key), true
			}
		}
	}
	nss := make([]string, 0, len(topo))
	for ns := range topo {
		nss = append(nss, ns)
	}
	sort.Strings(nss)
	for _, ns := range nss {
		for _, b := range r.byNS[ns] {
			paths := append(b.statusPaths(root), b.kopiaPaths(root)...)
			for _, cd := range topo[ns] {
				if IsCanonicalUUID(b.ClusterUID) && b.ClusterUID == cd.uid {
					return fmt.Sprintf("live Backup %s carries the uid of cluster %s", b.Key, cd.name), true
				}
				if inCluster(paths, JoinKey(root, ns, cd.name)) {
					return fmt.Sprintf("a path of live Backup %s resolves into cluster %s", b.Key, cd.name), true
				}
			}
			if !b.usableLocator(root, ns) {
				return fmt.Sprintf("live Backup %s has no usable locator", b.Key), true
			}
		}
		if why, ok := r.nsActivity(ns); ok {
			return why, true
		}
	}
	return "", false
}
