package prune

import (
	"fmt"
	"sort"
)

// refs answers the planner's reference questions (is this prefix used by a
// live Backup, a Restore or a volume?) against the in-memory inventory only.
// Backup paths are normalised once and placed once per root: the questions
// are asked for every candidate.
type refs struct {
	inv *Inventory
	// all lists the live Backups sorted by key, for stable reasons; byNS
	// holds their indices per namespace.
	all      []LiveBackup
	byNS     map[string][]int
	liveDeps map[BackupKey]bool
	// abs are each Backup's paths placed without a root (absolutePaths).
	abs [][]string
	// status and kopia are the normalised raw paths.
	status, kopia []rawPath
	placed        map[string]*rootPaths
	// restoreIn and depIn hold the first Restore-protected key and the
	// first live dependency of each namespace (nsActivity).
	restoreIn, depIn map[string]BackupKey
}

// rawPath is a Backup path normalised for resolveUnder.
type rawPath struct {
	set bool   // the raw path is not empty
	key string // the normalised path; "" resolves to the root itself
	abs bool   // it starts with a canonical pvc root
}

func newRawPath(raw string) rawPath {
	if raw == "" {
		return rawPath{}
	}
	k, ok := NormalizeKey(raw)
	if !ok {
		k = ""
	}
	return rawPath{set: true, key: k, abs: k != "" && IsCanonicalRoot(firstSegment(k))}
}

// under is resolveUnder(root, raw) for the path rp was made from.
func (rp rawPath) under(root string) (string, bool) {
	switch {
	case !rp.set:
		return "", false
	case rp.key == "":
		return root, true
	case rp.abs:
		return rp.key, true
	}
	return JoinKey(root, rp.key), true
}

// rootPaths are the live Backups' paths placed under one root, by index
// into refs.all. Each slice is capped so that appending copies it.
type rootPaths struct {
	status, kopia, both [][]string
	// statusIx and kopiaIx find the overlapping Backup per candidate without
	// a pass over every live Backup.
	statusIx, kopiaIx *pathIndex
}

// pathIndex finds the first live Backup (by index into refs.all) with a
// path overlapping a prefix: an overlapping path is either the prefix or
// one of its ancestors, looked up by name, or lies below it, in one run of
// the sorted paths.
type pathIndex struct {
	first  map[string]int
	sorted []indexedPath
}

type indexedPath struct {
	path string
	i    int
}

func newPathIndex(paths [][]string) *pathIndex {
	x := &pathIndex{first: map[string]int{}}
	for i, ps := range paths {
		for _, p := range ps {
			if _, ok := x.first[p]; !ok {
				x.first[p] = i
			}
			x.sorted = append(x.sorted, indexedPath{p, i})
		}
	}
	sort.Slice(x.sorted, func(a, b int) bool { return x.sorted[a].path < x.sorted[b].path })
	return x
}

// overlapping returns the smallest index whose path overlaps prefix.
func (x *pathIndex) overlapping(prefix string) (int, bool) {
	best := -1
	take := func(i int) {
		if best < 0 || i < best {
			best = i
		}
	}
	if i, ok := x.first[""]; ok {
		take(i)
	}
	for j := 1; j <= len(prefix); j++ {
		if j == len(prefix) || prefix[j] == '/' {
			if i, ok := x.first[prefix[:j]]; ok {
				take(i)
			}
		}
	}
	below := x.sorted
	if prefix != "" {
		lo := sort.Search(len(below), func(k int) bool { return below[k].path > prefix })
		below = below[lo:]
	}
	for _, ip := range below {
		if prefix != "" && !hasDirPrefix(ip.path, prefix) {
			if ip.path > prefix+"/" {
				break // past the run of keys below prefix
			}
			continue
		}
		take(ip.i)
	}
	return best, best >= 0
}

func newRefs(inv *Inventory) *refs {
	r := &refs{inv: inv, byNS: map[string][]int{}, liveDeps: map[BackupKey]bool{}, placed: map[string]*rootPaths{}}
	for _, b := range inv.Backups {
		r.all = append(r.all, b)
	}
	sort.Slice(r.all, func(i, j int) bool { return r.all[i].Key.String() < r.all[j].Key.String() })
	for i, b := range r.all {
		r.byNS[b.Key.Namespace] = append(r.byNS[b.Key.Namespace], i)
		for _, d := range b.deps() {
			r.liveDeps[d] = true
		}
		r.abs = append(r.abs, b.absolutePaths())
		r.status = append(r.status, newRawPath(b.Path))
		r.kopia = append(r.kopia, newRawPath(b.KopiaPath))
	}
	r.restoreIn, r.depIn = firstPerNS(inv.RestoreProtected), firstPerNS(r.liveDeps)
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

// paths returns every live Backup's status.path and kopiaRepoPath placed
// under root: raw (resolved under root) and qualified.
func (r *refs) paths(root string) *rootPaths {
	if rp, ok := r.placed[root]; ok {
		return rp
	}
	rp := &rootPaths{}
	for i, b := range r.all {
		st := placed(root, r.status[i], b.PathQualified)
		ko := placed(root, r.kopia[i], b.KopiaPathQualified)
		both := append(append(make([]string, 0, len(st)+len(ko)), st...), ko...)
		rp.status = append(rp.status, st[:len(st):len(st)])
		rp.kopia = append(rp.kopia, ko[:len(ko):len(ko)])
		rp.both = append(rp.both, both)
	}
	rp.statusIx, rp.kopiaIx = newPathIndex(rp.status), newPathIndex(rp.kopia)
	r.placed[root] = rp
	return rp
}

func placed(root string, raw rawPath, qualified string) []string {
	var out []string
	if k, ok := raw.under(root); ok {
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
	for i, b := range r.all {
		for _, p := range r.abs[i] {
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

// liveStatus returns the first live Backup whose status.path overlaps
// prefix.
func (r *refs) liveStatus(root, prefix string) (LiveBackup, bool) {
	return r.backup(r.paths(root).statusIx.overlapping(prefix))
}

// liveKopia returns the first live Backup whose kopiaRepoPath overlaps
// prefix.
func (r *refs) liveKopia(root, prefix string) (LiveBackup, bool) {
	return r.backup(r.paths(root).kopiaIx.overlapping(prefix))
}

func (r *refs) backup(i int, ok bool) (LiveBackup, bool) {
	if !ok {
		return LiveBackup{}, false
	}
	return r.all[i], true
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

// usableLocator reports whether live Backup i can be pinned to one cluster
// directory under root and ns: a canonical cluster-uid label, or a path
// resolving to a well-formed cluster directory there.
func (r *refs) usableLocator(i int, root, ns string) bool {
	if IsCanonicalUUID(r.all[i].ClusterUID) {
		return true
	}
	nsp := JoinKey(root, ns)
	for _, p := range r.paths(root).both[i] {
		if segs := relSegments(nsp, p); len(segs) >= 1 {
			if _, _, ok := ParseClusterDir(segs[0]); ok {
				return true
			}
		}
	}
	return false
}

// nsActivity reports a Restore or live dependency naming a key in ns,
// naming the first such key so that the reason is stable.
func (r *refs) nsActivity(ns string) (string, bool) {
	if k, ok := r.restoreIn[ns]; ok {
		return fmt.Sprintf("an active Restore references %s", k), true
	}
	if k, ok := r.depIn[ns]; ok {
		return fmt.Sprintf("a live Backup depends on %s", k), true
	}
	return "", false
}

// firstPerNS returns the smallest key of each namespace in a key set.
func firstPerNS(set map[BackupKey]bool) map[string]BackupKey {
	out := map[string]BackupKey{}
	for k := range set {
		if old, ok := out[k.Namespace]; !ok || k.Name < old.Name {
			out[k.Namespace] = k
		}
	}
	return out
}

// clusterReferenced reports whether cluster directory d (UUID uid) of
// namespace ns under root is referenced: a live Backup of ns carries the
// cluster uid, has a path into the cluster or has no usable locator, or the
// namespace has a Restore or live dependency (nsActivity).
func (r *refs) clusterReferenced(root, ns, d, uid string) (string, bool) {
	rp := r.paths(root)
	for _, i := range r.byNS[ns] {
		b := r.all[i]
		switch {
		case uid != "" && b.ClusterUID == uid:
			return fmt.Sprintf("live Backup %s carries the cluster uid", b.Key), true
		case inCluster(rp.both[i], d):
			return fmt.Sprintf("a path of live Backup %s resolves into the cluster", b.Key), true
		case !r.usableLocator(i, root, ns):
			return fmt.Sprintf("live Backup %s has no usable locator", b.Key), true
		}
	}
	return r.nsActivity(ns)
}

// uncertain implements the uncertain-reference test for a stray cluster
// directory d (uid "" for a malformed one): a Backup that points at the
// cluster without a matching status.path, one with no usable locator, or a
// Restore or live dependency in the namespace.
func (r *refs) uncertain(root, ns, d, uid string) (string, bool) {
	rp := r.paths(root)
	for _, i := range r.byNS[ns] {
		b := r.all[i]
		points := uid != "" && b.ClusterUID == uid || inCluster(rp.kopia[i], d)
		if points && !inCluster(rp.status[i], d) {
			return fmt.Sprintf("live Backup %s points at the cluster without a matching status.path", b.Key), true
		}
		if !r.usableLocator(i, root, ns) {
			return fmt.Sprintf("live Backup %s has no usable locator", b.Key), true
		}
	}
	return r.nsActivity(ns)
}

// clusterDir is one well-formed cluster directory of a topology.
type clusterDir struct{ name, uid string }

// rootReferenced reports whether a historical root with the given topology
// (namespace → well-formed cluster directories) is still referenced: by a
// storage protection, a live Backup path inside it, a live Backup that
// carries the uid of or resolves into one of its clusters or has no usable
// locator, or a Restore or live dependency in one of its namespaces.
func (r *refs) rootReferenced(root string, topo map[string][]clusterDir) (string, bool) {
	if p := r.storage(root); p != nil {
		return fmt.Sprintf("storage protection %s (%s)", p.Prefix, p.Resource), true
	}
	for i, b := range r.all {
		for _, p := range r.abs[i] {
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
	rp := r.paths(root)
	for _, ns := range nss {
		for _, i := range r.byNS[ns] {
			b, paths := r.all[i], rp.both[i]
			for _, cd := range topo[ns] {
				if IsCanonicalUUID(b.ClusterUID) && b.ClusterUID == cd.uid {
					return fmt.Sprintf("live Backup %s carries the uid of cluster %s", b.Key, cd.name), true
				}
				if inCluster(paths, JoinKey(root, ns, cd.name)) {
					return fmt.Sprintf("a path of live Backup %s resolves into cluster %s", b.Key, cd.name), true
				}
			}
			if !r.usableLocator(i, root, ns) {
				return fmt.Sprintf("live Backup %s has no usable locator", b.Key), true
			}
		}
		if why, ok := r.nsActivity(ns); ok {
			return why, true
		}
	}
	return "", false
}
