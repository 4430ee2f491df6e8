package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/snapflow/snapflow/internal/prune"
)

// The synthetic bucket is a sorted list of groups. A group is a run of keys
// that share a base and are generated from their index, so a million keys
// cost a few thousand small structs, and the key at any global index (and
// therefore any listing page) is computed on demand.

type kind uint8

const (
	kindSingle kind = iota // one object whose key is the base itself
	kindBackup             // <base>data/NNNNNN.zst …, then <base>kubeblocks-backup.json
	kindFiles              // <base>NNNNNNN.bin …
)

// role is what a backup directory is expected to be classified as.
type role uint8

const (
	roleLive role = iota
	roleOrphan
	roleRetained
	roleYoung
	roleDependency
	roleRestore  // orphan protected by an active Restore
	roleDeferred // inside the unreferenced historical root: never a candidate
)

var roleState = map[role]prune.State{
	roleLive: prune.StateLive, roleOrphan: prune.StateOrphan, roleRetained: prune.StateRetained,
	roleYoung: prune.StateTooYoung, roleDependency: prune.StateDependency, roleRestore: prune.StateProtected,
}

// manifestMeta is what a backup directory's kubeblocks-backup.json says.
type manifestMeta struct {
	ns, name, uid, policy, path   string
	clusterName, clusterUID, comp string
	parent                        string
	created                       time.Time
}

type group struct {
	base    string
	n       int
	kind    kind
	mtime   time.Time
	size    int64 // bytes of every ordinary object
	man     *manifestMeta
	manSize int64
}

func (g *group) appendKey(dst []byte, j int) []byte {
	dst = append(dst, g.base...)
	switch g.kind {
	case kindBackup:
		if j == g.n-1 {
			return append(dst, prune.DefaultManifestName...)
		}
		dst = append(dst, "data/"...)
		dst = appendPadded(dst, j, 6)
		return append(dst, ".zst"...)
	case kindFiles:
		dst = appendPadded(dst, j, 7)
		return append(dst, ".bin"...)
	}
	return dst
}

func (g *group) isManifest(j int) bool { return g.kind == kindBackup && j == g.n-1 }

func (g *group) objectSize(j int) int64 {
	switch {
	case g.isManifest(j):
		return g.manSize
	case g.kind == kindSingle:
		return g.size
	}
	// Vary sizes a little so the byte totals are not all round numbers.
	return g.size + int64(j*7919%65536)
}

func appendPadded(dst []byte, v, width int) []byte {
	var tmp [20]byte
	s := strconv.AppendInt(tmp[:0], int64(v), 10)
	for i := len(s); i < width; i++ {
		dst = append(dst, '0')
	}
	return append(dst, s...)
}

// bucket is the whole synthetic bucket.
type bucket struct {
	name   string
	groups []group
	off    []int // off[g] is the global index of group g's first key
}

func (b *bucket) total() int { return b.off[len(b.groups)] }

func (b *bucket) locate(i int) (*group, int) {
	g := sort.SearchInts(b.off, i+1) - 1
	return &b.groups[g], i - b.off[g]
}

func (b *bucket) appendKey(dst []byte, i int) []byte {
	g, j := b.locate(i)
	return g.appendKey(dst, j)
}

// lowerBound returns the first index in [from, total) whose key is >= s.
func (b *bucket) lowerBound(from int, s string) int {
	var buf []byte
	return from + sort.Search(b.total()-from, func(x int) bool {
		buf = b.appendKey(buf[:0], from+x)
		return string(buf) >= s
	})
}

// page walks one ListObjectsV2 page that starts at global index i: obj
// gets each object, cp each common prefix (delimiter "/"). It returns the
// index the next page starts at, the number of entries and whether the
// listing continues.
func (b *bucket) page(prefix string, delim bool, i, limit int, obj func(i int, key []byte), cp func(p string)) (next, count int, truncated bool) {
	var key []byte
	for i < b.total() {
		key = b.appendKey(key[:0], i)
		if !bytes.HasPrefix(key, []byte(prefix)) {
			break
		}
		if count == limit {
			return i, count, true
		}
		count++
		if delim {
			if d := bytes.IndexByte(key[len(prefix):], '/'); d >= 0 {
				p := string(key[:len(prefix)+d+1])
				cp(p)
				// Skip every key below the common prefix: '/'+1 is '0'.
				i = b.lowerBound(i, p[:len(p)-1]+"0")
				continue
			}
		}
		obj(i, key)
		i++
	}
	return i, count, false
}

// pages counts the pages of a whole listing of prefix.
func (b *bucket) pages(prefix string, delim bool, limit int) int {
	n, i := 0, b.lowerBound(0, prefix)
	for {
		n++
		next, _, more := b.page(prefix, delim, i, limit, func(int, []byte) {}, func(string) {})
		if !more {
			return n
		}
		i = next
	}
}

// find returns the index of key, or -1.
func (b *bucket) find(key string) int {
	i := b.lowerBound(0, key)
	if i < b.total() && string(b.appendKey(nil, i)) == key {
		return i
	}
	return -1
}

// seal sorts the groups and checks that every group is one contiguous,
// strictly increasing run of the global key order.
func (b *bucket) seal() {
	first := make([]string, len(b.groups))
	for i := range b.groups {
		first[i] = string(b.groups[i].appendKey(nil, 0))
	}
	sort.Sort(byFirst{b.groups, first})
	b.off = make([]int, len(b.groups)+1)
	for i := range b.groups {
		b.off[i+1] = b.off[i] + b.groups[i].n
		if i > 0 {
			prev := &b.groups[i-1]
			if string(prev.appendKey(nil, prev.n-1)) >= string(b.groups[i].appendKey(nil, 0)) {
				panic(fmt.Sprintf("layout: group %q overlaps group %q", prev.base, b.groups[i].base))
			}
		}
	}
}

type byFirst struct {
	g     []group
	first []string
}

func (s byFirst) Len() int           { return len(s.g) }
func (s byFirst) Less(i, j int) bool { return s.first[i] < s.first[j] }
func (s byFirst) Swap(i, j int) {
	s.g[i], s.g[j] = s.g[j], s.g[i]
	s.first[i], s.first[j] = s.first[j], s.first[i]
}

// params select one synthetic bucket; the child processes rebuild the same
// layout from them.
type params struct {
	Objects    int
	Candidates int
	Bucket     string
	Now        time.Time
}

// rootInfo describes one top-level pvc root for the report.
type rootInfo struct {
	name, role string
	objects    int
	// fully: the planner lists it recursively (current, referenced
	// historical, unowned); shallow: only two delimiter levels.
	fully, shallow bool
}

type layout struct {
	p      params
	bucket *bucket
	input  prune.InventoryInput
	roots  []rootInfo
	// candidates is the number of backup directories in listed roots: each
	// becomes one backup candidate of the plan.
	candidates int
	// manifests is the number of manifests in listed roots: the planner
	// needs one GET for each.
	manifests int
	// expect is the expected state of every backup candidate.
	expect map[prune.State]int
}

const (
	repoName   = "repo"
	repoUID    = "12345678-aaaa-4bbb-8ccc-1234567890ab"
	backupPVC  = "pvc-repo"
	repoSC     = "sc-repo"
	minObjects = 2 // a backup directory holds at least one data object and its manifest
)

func uuid(a, b int) string {
	return fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", a, b&0xffff, (a*7+b)&0xfff, (b*13+a)&0xfff, uint64(a)<<24|uint64(b))
}

type cluster struct {
	ns, root, name, uid, comp string
	live                      bool // a running cluster with live Backup CRs
	historical                bool // inside the referenced historical root
	dirs                      int
}

func (c *cluster) dir() string { return c.name + "-" + c.uid }

// buildLayout generates the bucket and the Kubernetes inventory. withBodies
// renders every manifest once to know its exact size (the server needs it;
// the planner child does not).
func buildLayout(p params, withBodies bool) *layout {
	l := &layout{p: p, bucket: &bucket{name: p.Bucket}, expect: map[prune.State]int{}}
	b := l.bucket
	old := p.Now.Add(-30 * 24 * time.Hour)

	// Fixed shares of the bucket.
	nExports := max(1, p.Objects/1000)
	nUser := p.Objects * 2 / 100
	nUnowned := p.Objects / 100
	nLegacy := p.Objects * 2 / 100

	namespaces := []string{"prod", "staging", "analytics", "billing"}
	type spec struct{ name, comp string }
	clusterSpecs := map[string][3]spec{ // two running clusters and one deleted
		"prod":      {{"pg-main", "postgresql"}, {"redis-session", "redis"}, {"pg-reporting", "postgresql"}},
		"staging":   {{"pg-main", "postgresql"}, {"mysql-orders", "mysql"}, {"redis-cache", "redis"}},
		"analytics": {{"ch-events", "clickhouse"}, {"mongo-catalog", "mongodb"}, {"pg-etl", "postgresql"}},
		"billing":   {{"pg-ledger", "postgresql"}, {"redis-queue", "redis"}, {"mysql-legacy", "mysql"}},
	}
	in := &l.input
	in.Repo = prune.BackupRepo{Name: repoName, UID: repoUID, Generation: 3,
		Config:       map[string]string{"bucket": p.Bucket, "region": "us-east-1"},
		AccessMethod: "Mount", GeneratedStorageClassName: repoSC, BackupPVCName: backupPVC}
	in.StorageClass = &prune.StorageClass{Name: repoSC, Provisioner: prune.CSIDriverS3, Parameters: map[string]string{"bucket": p.Bucket}}

	markers := 0
	marker := func(key string) {
		b.groups = append(b.groups, group{base: key + "/", n: 1, kind: kindSingle, mtime: old})
		markers++
	}
	repoPV := func(root, ns, phase string) {
		in.PVs = append(in.PVs, prune.PV{Name: root, StorageClassName: repoSC, Phase: phase, ClaimNamespace: ns, ClaimName: backupPVC,
			CSIDriver: prune.CSIDriverS3, VolumeHandle: p.Bucket + "/" + root,
			VolumeAttributes: map[string]string{"capacity": "1099511627776", "mounter": "geesefs", "options": "--memory-limit 1000 --dir-mode 0777 --file-mode 0666"}})
	}

	var clusters []*cluster
	for i, ns := range namespaces {
		uid := uuid(0x1000+i, 1)
		root := "pvc-" + uid
		in.PVCs = append(in.PVCs, prune.PVC{Namespace: ns, Name: backupPVC, UID: uid, StorageClassName: repoSC, VolumeName: root, Phase: "Bound",
			Labels: map[string]string{prune.LabelBackupRepoName: repoName}})
		repoPV(root, ns, "Bound")
		l.roots = append(l.roots, rootInfo{name: root, role: "current repository root of " + ns, fully: true})
		marker(root + "/" + ns)
		for k, s := range clusterSpecs[ns] {
			c := &cluster{ns: ns, root: root, name: s.name, uid: uuid(0x2000+i*16+k, 2), comp: s.comp, live: k < 2}
			clusters = append(clusters, c)
			marker(root + "/" + ns + "/" + c.dir())
			marker(root + "/" + ns + "/" + c.dir() + "/" + c.comp)
			// The cluster's data volumes: ordinary PVCs that the ownership
			// index records (their roots are not in this bucket).
			if c.live {
				for r := range 2 {
					pu := uuid(0x3000+i*16+k, r)
					in.PVCs = append(in.PVCs, prune.PVC{Namespace: ns, Name: fmt.Sprintf("data-%s-%s-%d", c.name, c.comp, r), UID: pu,
						StorageClassName: "local-path", VolumeName: "pvc-" + pu, Phase: "Bound"})
					in.PVs = append(in.PVs, prune.PV{Name: "pvc-" + pu, StorageClassName: "local-path", Phase: "Bound", ClaimNamespace: ns,
						ClaimName: fmt.Sprintf("data-%s-%s-%d", c.name, c.comp, r)})
				}
			}
		}
	}
	// A historical root of prod (the Backup PVC was recreated) that still
	// holds older backups of the running pg-main cluster: referenced by the
	// cluster uid of prod's live Backups, so it gets the granular scan.
	h1 := "pvc-" + uuid(0x1100, 1)
	repoPV(h1, "prod", "Released")
	l.roots = append(l.roots, rootInfo{name: h1, role: "historical repository root of prod, referenced by cluster uid", fully: true, shallow: true})
	pgMain := clusters[0]
	hc := &cluster{ns: "prod", root: h1, name: pgMain.name, uid: pgMain.uid, comp: pgMain.comp, historical: true}
	clusters = append(clusters, hc)
	marker(h1 + "/prod")
	marker(h1 + "/prod/" + hc.dir())
	marker(h1 + "/prod/" + hc.dir() + "/" + hc.comp)

	// A historical root of a deleted namespace: no reference, so one
	// deferred orphan-repository-root and only two shallow levels listed.
	h2 := "pvc-" + uuid(0x1200, 1)
	repoPV(h2, "legacy", "Released")
	l.roots = append(l.roots, rootInfo{name: h2, role: "historical repository root of a deleted namespace, unreferenced", shallow: true, objects: nLegacy})

	// A user volume on another S3 class (never listed) and an unowned root.
	userUID := uuid(0x1300, 1)
	in.PVCs = append(in.PVCs, prune.PVC{Namespace: "prod", Name: "shared-files", UID: userUID, StorageClassName: "s3-shared", VolumeName: "pvc-" + userUID, Phase: "Bound"})
	in.PVs = append(in.PVs, prune.PV{Name: "pvc-" + userUID, StorageClassName: "s3-shared", Phase: "Bound", ClaimNamespace: "prod", ClaimName: "shared-files",
		CSIDriver: prune.CSIDriverS3, VolumeHandle: p.Bucket + "/pvc-" + userUID})
	user := "pvc-" + userUID
	b.groups = append(b.groups, group{base: user + "/shared/", n: nUser, kind: kindFiles, mtime: old, size: 256 << 10})
	l.roots = append(l.roots, rootInfo{name: user, role: "user volume on another StorageClass", objects: nUser})
	unowned := "pvc-" + uuid(0x1400, 1)
	b.groups = append(b.groups, group{base: unowned + "/scratch/", n: nUnowned, kind: kindFiles, mtime: old, size: 1 << 20})
	l.roots = append(l.roots, rootInfo{name: unowned, role: "unowned: orphan-volume-root", fully: true, objects: nUnowned})
	b.groups = append(b.groups, group{base: "exports/", n: nExports, kind: kindFiles, mtime: old, size: 64 << 10})

	// Legacy root content: two clusters of ten backups each.
	for k := range 2 {
		c := &cluster{ns: "legacy", root: h2, name: []string{"pg-main", "redis-cache"}[k], uid: uuid(0x2400+k, 2), comp: []string{"postgresql", "redis"}[k]}
		for d := range 10 {
			n := nLegacy / 20
			if k == 0 && d == 0 {
				n += nLegacy % 20
			}
			l.addBackup(c, d, max(n, minObjects), roleDeferred, withBodies)
		}
	}

	// Everything else is backup directories spread over the 13 listed
	// clusters: nDirs candidates sharing the remaining objects.
	fixed := nExports + nUser + nUnowned + markers
	legacy := 0
	for _, g := range b.groups {
		if g.kind == kindBackup {
			legacy += g.n
		}
	}
	rest := p.Objects - fixed - legacy
	if rest < p.Candidates*minObjects {
		panic(fmt.Sprintf("layout: %d objects leave %d for %d backup directories", p.Objects, rest, p.Candidates))
	}
	perDir, extra := rest/p.Candidates, rest%p.Candidates
	for d := range p.Candidates {
		clusters[d%len(clusters)].dirs++
	}
	next := make(map[*cluster]int)
	for d := range p.Candidates {
		c := clusters[d%len(clusters)]
		k := next[c]
		next[c]++
		n := perDir
		if d < extra {
			n++
		}
		r := c.roleOf(k)
		m := l.addBackup(c, k, n, r, withBodies)
		l.candidates++
		l.manifests++
		l.expect[roleState[r]]++
		if r == roleLive {
			in.Backups = append(in.Backups, liveBackup(c, k, m))
		}
		if r == roleRestore {
			in.Restores = append(in.Restores, prune.Restore{Namespace: c.ns, Name: "restore-" + backupName(c, k), Phase: "Running",
				BackupNamespace: c.ns, BackupName: backupName(c, k)})
		}
	}
	// Finished restores and Backups of another repository: read and ignored.
	for k := range 5 {
		in.Restores = append(in.Restores, prune.Restore{Namespace: "prod", Name: fmt.Sprintf("restore-done-%d", k), Phase: "Completed",
			BackupNamespace: "prod", BackupName: backupName(clusters[0], 4*k)})
	}
	for k := range 20 {
		in.Backups = append(in.Backups, prune.Backup{Namespace: "prod", Name: fmt.Sprintf("offsite-%03d", k), UID: uuid(0x5000, k),
			Labels: map[string]string{prune.LabelBackupRepoName: "repo-offsite"}, BackupRepoName: "repo-offsite", Path: fmt.Sprintf("/prod/offsite-%03d", k)})
	}

	b.seal()
	if b.total() != p.Objects {
		panic(fmt.Sprintf("layout: generated %d objects, want %d", b.total(), p.Objects))
	}
	// Per-root object counts for the report.
	for i := range l.roots {
		r := &l.roots[i]
		lo, hi := b.lowerBound(0, r.name+"/"), b.lowerBound(0, r.name+"0")
		r.objects = hi - lo
	}
	return l
}

// roleOf decides what the k-th backup directory of a cluster is.
func (c *cluster) roleOf(k int) role {
	switch {
	case c.historical:
		if k%10 == 9 {
			return roleRetained
		}
		return roleOrphan
	case !c.live:
		if c.ns == "staging" && k == 0 {
			return roleRestore
		}
		switch k % 10 {
		case 8:
			return roleRetained
		case 9:
			return roleYoung
		}
		return roleOrphan
	}
	switch m := k % 10; {
	case m < 4:
		return roleLive
	case m == 8:
		return roleRetained
	case m == 9:
		return roleYoung
	case k%40 == 34 && k+6 < c.dirs:
		// The parent of the incremental live backup k+6.
		return roleDependency
	}
	return roleOrphan
}

func backupName(c *cluster, k int) string {
	if c.historical {
		return fmt.Sprintf("%s-%s-old-%06d", c.name, c.comp, k)
	}
	return fmt.Sprintf("%s-%s-%06d", c.name, c.comp, k)
}

func (c *cluster) created(k int, r role, now time.Time) time.Time {
	if r == roleYoung {
		return now.Add(-2*time.Hour - time.Duration(k)*time.Second)
	}
	return now.Add(-8*24*time.Hour - time.Duration(k)*6*time.Hour)
}

func (l *layout) addBackup(c *cluster, k, n int, r role, withBodies bool) *manifestMeta {
	name := backupName(c, k)
	m := &manifestMeta{ns: c.ns, name: name, uid: uuid(0x6000+len(l.bucket.groups), k), policy: prune.DeletionPolicyDelete,
		path: "/" + c.ns + "/" + c.dir() + "/" + c.comp + "/" + name, clusterName: c.name, clusterUID: c.uid, comp: c.comp,
		created: c.created(k, r, l.p.Now)}
	if r == roleRetained {
		m.policy = prune.DeletionPolicyRetain
	}
	g := group{base: c.root + m.path + "/", n: n, kind: kindBackup, mtime: m.created.Add(5 * time.Minute), size: 4 << 20, man: m, manSize: 1500}
	if withBodies {
		g.manSize = int64(len(manifestBody(m)))
	}
	l.bucket.groups = append(l.bucket.groups, g)
	return m
}

// liveBackup is the Backup CR of a live directory. Every 40th live backup
// is incremental: its parent is an orphan directory, which then becomes a
// dependency (see roleOf).
func liveBackup(c *cluster, k int, m *manifestMeta) prune.Backup {
	b := prune.Backup{Namespace: c.ns, Name: m.name, UID: m.uid,
		Labels:         map[string]string{prune.LabelBackupRepoName: repoName, prune.LabelClusterUID: c.uid, "app.kubernetes.io/instance": c.name},
		BackupRepoName: repoName, Path: m.path}
	if k%40 == 0 && k >= 40 {
		b.ParentBackupName = backupName(c, k-6)
	}
	return b
}

// manifestBody renders kubeblocks-backup.json as KubeBlocks writes it: the
// Backup CR serialised as JSON.
func manifestBody(m *manifestMeta) []byte {
	ts := m.created.UTC().Format(time.RFC3339)
	done := m.created.Add(4 * time.Minute).UTC().Format(time.RFC3339)
	doc := map[string]any{
		"apiVersion": prune.ManifestAPIVersion,
		"kind":       prune.ManifestKind,
		"metadata": map[string]any{
			"name": m.name, "namespace": m.ns, "uid": m.uid, "creationTimestamp": ts, "generation": 1, "resourceVersion": "48213377",
			"finalizers": []string{"dataprotection.kubeblocks.io/finalizer"},
			"annotations": map[string]string{
				"dataprotection.kubeblocks.io/target-pod-name": m.clusterName + "-" + m.comp + "-0",
				"kubeblocks.io/cluster-snapshot":               "{\"metadata\":{\"name\":\"" + m.clusterName + "\"}}",
			},
			"labels": map[string]string{
				"app.kubernetes.io/instance":                     m.clusterName,
				"app.kubernetes.io/managed-by":                   "kubeblocks-dataprotection",
				"apps.kubeblocks.io/component-name":              m.comp,
				"dataprotection.kubeblocks.io/backup-policy":     m.clusterName + "-" + m.comp + "-backup-policy",
				"dataprotection.kubeblocks.io/backup-repo-name":  repoName,
				"dataprotection.kubeblocks.io/backup-type":       "Full",
				"dataprotection.kubeblocks.io/cluster-uid":       m.clusterUID,
				"dataprotection.kubeblocks.io/backup-schedule":   m.clusterName + "-" + m.comp + "-backup-schedule",
				"dataprotection.kubeblocks.io/autobackup":        "true",
				"dataprotection.kubeblocks.io/backup-repo-class": "mount",
			},
		},
		"spec": map[string]any{
			"backupMethod": "datafile", "backupPolicyName": m.clusterName + "-" + m.comp + "-backup-policy",
			"deletionPolicy": m.policy, "retentionPeriod": "7d", "parentBackupName": m.parent,
		},
		"status": map[string]any{
			"phase": "Completed", "backupRepoName": repoName, "path": m.path, "persistentVolumeClaimName": backupPVC,
			"formatVersion": "0.1.0", "startTimestamp": ts, "completionTimestamp": done, "duration": "4m0s", "totalSize": "2147483648",
			"timeRange": map[string]string{"start": ts, "end": done},
			"target": map[string]any{"podSelector": map[string]any{"matchLabels": map[string]string{
				"app.kubernetes.io/instance": m.clusterName, "apps.kubeblocks.io/component-name": m.comp}}},
			"actions": []map[string]any{{"name": "backup-datafile", "phase": "Completed", "actionType": "Job",
				"startTimestamp": ts, "completionTimestamp": done, "totalSize": "2147483648"}},
			"backupMethod": map[string]any{"name": "datafile", "actionSetName": m.comp + "-physical-backup", "snapshotVolumes": false},
		},
	}
	body, err := json.Marshal(doc)
	if err != nil {
		panic(err)
	}
	return body
}
