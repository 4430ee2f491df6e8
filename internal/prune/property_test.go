package prune

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// gdir is one generated backup directory and what the generator put in it.
type gdir struct {
	root, ns, cluster, dir, name string
	manifest                     bool   // a current manifest object exists
	parseable                    bool   // its JSON decodes (so its parent/base are visible)
	valid                        bool   // it passes every manifest validity rule
	policy                       string // deletionPolicy written
	creation                     time.Time
	parent, base                 string
	clean                        bool // generated to satisfy every deletion condition
}

type world struct {
	f         *fixture
	rng       *rand.Rand
	dirs      []*gdir
	repoRoots []string
	userRoots []string
	orphanVol []string
	storage   []string
	restores  map[BackupKey]bool
	mapping   map[string]string
	seq       int
	// blocker is the execution blocker the generator planted ("" for
	// none), and blockerNS the namespace it sits in.
	blocker, blockerNS string
}

var uidPool = []string{uuidA, uuidB, "cccccccc-cccc-4ccc-8ccc-cccccccccccc"}

func (w *world) uuid() string {
	w.seq++
	return fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", w.rng.Uint32(), w.seq&0xffff, w.rng.IntN(0xfff), w.rng.IntN(0xfff), w.rng.Uint64()&0xffffffffffff)
}

func (w *world) age() time.Time {
	if w.rng.IntN(5) == 0 {
		return young
	}
	return old
}

func (w *world) chance(pct int) bool { return w.rng.IntN(100) < pct }

// generate builds a random bucket layout and cluster state around the shared
// test fixture (newFixture). Clean orphans get unique names that nothing
// references; the rest draw names from a small pool so keys collide across
// clusters and roots.
func generate(seed uint64) *world {
	w := &world{rng: rand.New(rand.NewPCG(seed, 0x9e3779b9)), f: newFixture(), restores: map[BackupKey]bool{}}
	f := w.f
	o := &f.opts
	o.IncludeRetained, o.DeleteRepositoryStray = w.chance(30), w.chance(40)
	if w.chance(20) {
		f.versioned, o.PurgeVersions, o.Versioning = true, true, VersioningEnabled
	}
	w.mapping = map[string]string{"app": R}
	w.repoRoots = []string{R}
	w.userRoots = []string{U}
	owners := map[string]string{R: "app"}
	if w.chance(50) { // a second namespace with its own Backup PVC
		uid := w.uuid()
		rw := "pvc-" + uid
		f.in.PVCs = append(f.in.PVCs, PVC{Namespace: "web", Name: "pvc-repo-x", UID: uid, StorageClassName: "sc-repo", VolumeName: rw, Phase: "Bound"})
		f.in.PVs = append(f.in.PVs, PV{Name: rw, StorageClassName: "sc-repo", Phase: "Bound", ClaimNamespace: "web", ClaimName: "pvc-repo-x", CSIDriver: CSIDriverS3, VolumeHandle: bkt + "/" + rw})
		w.mapping["web"], owners[rw] = rw, "web"
		w.repoRoots = append(w.repoRoots, rw)
	}
	for range w.rng.IntN(2) + 0 { // historical roots
		h := "pvc-" + w.uuid()
		ns := "app"
		if _, ok := w.mapping["web"]; ok && w.chance(50) {
			ns = "web"
		}
		f.in.PVs = append(f.in.PVs, PV{Name: h, StorageClassName: "sc-repo", Phase: "Released", ClaimNamespace: ns, ClaimName: "pvc-repo-x", CSIDriver: CSIDriverS3, VolumeHandle: bkt + "/" + h})
		owners[h] = ns
		w.repoRoots = append(w.repoRoots, h)
	}
	for range w.rng.IntN(3) {
		w.seq++
		f.put(U+fmt.Sprintf("/u%d", w.seq), 3, w.age())
	}
	for range w.rng.IntN(2) {
		ov := "pvc-" + w.uuid()
		w.orphanVol = append(w.orphanVol, ov)
		for range w.rng.IntN(3) + 1 {
			w.seq++
			f.put(ov+fmt.Sprintf("/d/%d", w.seq), 4, w.age())
		}
	}
	for _, root := range w.repoRoots {
		w.fillRoot(root, owners[root], root == R || root == w.mapping["web"])
	}
	w.liveAndRestores()
	w.storageAndOptions()
	w.plantBlocker()
	if f.versioned {
		for i := range f.objs {
			f.objs[i].VersionID, f.objs[i].IsLatest = fmt.Sprintf("v%d", i), true
		}
		if len(f.objs) > 0 && w.chance(50) { // a noncurrent version of some object
			x := f.objs[w.rng.IntN(len(f.objs))]
			x.VersionID, x.IsLatest, x.LastModified = "old-"+x.VersionID, false, w.age()
			if g := w.dirOf(CleanKey(x.Key)); g != nil && g.clean {
				x.LastModified = old
			}
			f.objs = append(f.objs, x)
		}
	}
	return w
}

func (w *world) fillRoot(root, ns string, current bool) {
	f := w.f
	if w.chance(20) {
		f.put(root+"/loose", 1, w.age())
	}
	if w.chance(10) {
		f.put(root+"/Bad_NS/x", 1, w.age())
	}
	for range w.rng.IntN(2) + 1 {
		uid := uidPool[w.rng.IntN(len(uidPool))]
		cd := JoinKey(root, ns, "db-"+uid)
		// The pool can draw one cluster twice; a bucket holds a key once.
		if w.chance(15) && !f.has(cd+"/unexpected.bin") {
			f.put(cd+"/unexpected.bin", 2, w.age())
		}
		for _, comp := range []string{"pg", "redis"}[:w.rng.IntN(2)+1] {
			var names []string
			for range w.rng.IntN(4) + 1 {
				g := &gdir{root: root, ns: ns, cluster: cd}
				if current && w.chance(35) {
					w.seq++
					g.name, g.clean = fmt.Sprintf("c%d", w.seq), true
				} else {
					g.name = fmt.Sprintf("b%d", w.rng.IntN(5))
				}
				g.dir = JoinKey(cd, comp, g.name)
				if w.known(g.dir) {
					continue
				}
				w.fillDir(g, names)
				if !g.clean {
					names = append(names, g.name) // clean orphans are never named
				}
				w.dirs = append(w.dirs, g)
			}
		}
	}
}

func (w *world) known(dir string) bool {
	for _, d := range w.dirs {
		if d.dir == dir {
			return true
		}
	}
	return false
}

// fillDir writes a backup directory. Parents are drawn from earlier
// directories of the same component, as KubeBlocks chains share a policy.
func (w *world) fillDir(g *gdir, siblings []string) {
	f := w.f
	for i := range w.rng.IntN(2) + 1 {
		t := old
		if !g.clean {
			t = w.age()
		}
		f.put(fmt.Sprintf("%s/data%d", g.dir, i), int64(10+i), t)
	}
	if g.clean {
		if !w.chance(60) {
			return
		}
		g.manifest, g.parseable, g.valid, g.policy, g.creation = true, true, true, DeletionPolicyDelete, old
		if f.opts.IncludeRetained && w.chance(40) {
			g.policy = DeletionPolicyRetain
		}
	} else {
		if !w.chance(70) {
			return
		}
		g.manifest, g.parseable, g.valid = true, true, true
		g.policy = []string{DeletionPolicyDelete, DeletionPolicyRetain, "Archive"}[w.rng.IntN(3)]
		g.valid = g.policy != "Archive"
		g.creation = w.age()
		if len(siblings) > 0 && w.chance(40) {
			g.parent = siblings[w.rng.IntN(len(siblings))]
		}
		if len(siblings) > 0 && w.chance(15) {
			g.base = siblings[w.rng.IntN(len(siblings))]
		}
	}
	doc := manifestDoc(g.root, g.dir, g.policy)
	doc["metadata"].(map[string]any)["namespace"] = g.ns
	doc["metadata"].(map[string]any)["creationTimestamp"] = g.creation.Format(time.RFC3339)
	doc["spec"].(map[string]any)["parentBackupName"] = g.parent
	doc["status"].(map[string]any)["baseBackupName"] = g.base
	body, _ := json.Marshal(doc)
	mt := old
	if !g.clean {
		switch w.rng.IntN(12) {
		case 0:
			body, g.parseable, g.valid = []byte("{"), false, false
		case 1:
			doc["status"].(map[string]any)["path"] = "/elsewhere"
			body, _ = json.Marshal(doc)
			g.valid = false
		case 2:
			mt = young
		}
	}
	key := g.dir + "/" + DefaultManifestName
	f.put(key, int64(len(body)), mt)
	if !g.clean && w.chance(5) {
		g.parseable, g.valid = false, false // unreadable: no body recorded
		return
	}
	f.manifests[key] = ManifestBody{Data: body}
}

func (w *world) liveAndRestores() {
	f := w.f
	for _, g := range w.dirs {
		if g.clean || !w.chance(15) {
			continue
		}
		if w.hasCR(g.ns, g.name) {
			continue
		}
		rel := strings.TrimPrefix(g.dir, g.root+"/")
		f.backup(g.name, func(b *Backup) {
			b.Namespace = g.ns
			b.Path = "/" + rel
			if w.chance(50) {
				b.Labels = map[string]string{LabelClusterUID: g.cluster[len(g.cluster)-36:]}
			}
			if w.chance(30) {
				b.ParentBackupName = fmt.Sprintf("b%d", w.rng.IntN(5))
			}
			if w.chance(15) {
				b.BaseBackupName = fmt.Sprintf("b%d", w.rng.IntN(5))
			}
		})
	}
	for range w.rng.IntN(3) {
		ns := []string{"app", "web"}[w.rng.IntN(2)]
		name := fmt.Sprintf("x%d", w.rng.IntN(3))
		if w.hasCR(ns, name) {
			continue // Backup keys are unique in a cluster
		}
		f.backup(name, func(b *Backup) {
			b.Namespace = ns
			switch w.rng.IntN(4) {
			case 0: // no locator at all
			case 1:
				b.Labels = map[string]string{LabelClusterUID: uidPool[w.rng.IntN(len(uidPool))]}
			case 2:
				b.Path = "/" + ns + "/db-" + uidPool[w.rng.IntN(len(uidPool))] + "/pg"
			case 3:
				b.KopiaRepoPath = "/" + ns + "/db-" + uidPool[w.rng.IntN(len(uidPool))] + "/pg/kopia"
			}
			b.ParentBackupName = fmt.Sprintf("b%d", w.rng.IntN(5))
		})
	}
	for range w.rng.IntN(2) {
		k := BackupKey{[]string{"app", "web"}[w.rng.IntN(2)], fmt.Sprintf("b%d", w.rng.IntN(5))}
		phase := []string{"", "Running", "Completed"}[w.rng.IntN(3)]
		f.in.Restores = append(f.in.Restores, Restore{Namespace: k.Namespace, Name: "r", Phase: phase, BackupNamespace: k.Namespace, BackupName: k.Name})
		if phase != "Completed" {
			w.restores[k] = true
		}
	}
}

// plantBlocker sometimes adds one state the inventory must turn into an
// execution blocker (spec 4.2), inside or outside the --namespace the run is
// scoped to: blockers are never scoped, since a root cannot be attributed
// safely while any ownership fact is unknown.
func (w *world) plantBlocker() {
	if !w.chance(15) {
		return
	}
	f := w.f
	if w.chance(50) {
		f.opts.Namespace = "app"
	}
	w.blockerNS = []string{"app", "web"}[w.rng.IntN(2)]
	switch w.rng.IntN(3) {
	case 0:
		w.blocker = "incomplete spec.backup reference"
		f.in.Restores = append(f.in.Restores, Restore{Namespace: w.blockerNS, Name: "half", Phase: "Running", BackupNamespace: w.blockerNS})
	case 1:
		w.blocker = "is not bound (no spec.volumeName)"
		f.in.PVCs = append(f.in.PVCs, PVC{Namespace: w.blockerNS, Name: "unbound", UID: w.uuid(), StorageClassName: "sc-repo", Phase: "Bound"})
	case 2:
		w.blocker = "is not a CSI volume of driver"
		f.in.PVCs = append(f.in.PVCs, PVC{Namespace: w.blockerNS, Name: "foreign", UID: w.uuid(), StorageClassName: "sc-repo", VolumeName: "pv-foreign", Phase: "Bound"})
		f.in.PVs = append(f.in.PVs, PV{Name: "pv-foreign", StorageClassName: "sc-repo", Phase: "Bound", ClaimNamespace: w.blockerNS, ClaimName: "foreign", CSIDriver: "other.csi.example", VolumeHandle: "h"})
	}
}

// checkBlocked asserts a planted blocker reached the plan and stops every
// path to a write, while the plan itself is still made (spec 4.1).
func (w *world) checkBlocked(t *testing.T, inv Inventory, pl Plan, stage string) {
	t.Helper()
	if !pl.Blocked() {
		t.Fatalf("%s: blocker %q in namespace %s (run scoped to %q) did not block: inventory blockers %v", stage, w.blocker, w.blockerNS, w.f.opts.Namespace, inv.Blockers)
	}
	if !strings.Contains(strings.Join(pl.BlockingReasons, "\n"), w.blocker) {
		t.Fatalf("%s: blocking reasons %v do not name the planted %q", stage, pl.BlockingReasons, w.blocker)
	}
	if _, err := FinalSnapshot(pl, inv, w.f.listing(), now); !errors.Is(err, ErrExecutionBlocked) {
		t.Fatalf("%s: final snapshot of a blocked plan: got %v, want ErrExecutionBlocked", stage, err)
	}
	if err := GlobalGuards(pl); !errors.Is(err, ErrExecutionBlocked) {
		t.Fatalf("%s: guards of a blocked plan: got %v, want ErrExecutionBlocked", stage, err)
	}
}

func (w *world) hasCR(ns, name string) bool {
	for _, b := range w.f.in.Backups {
		if b.Namespace == ns && b.Name == name {
			return true
		}
	}
	return false
}

func (w *world) storageAndOptions() {
	f := w.f
	if len(w.dirs) > 0 && w.chance(15) {
		g := w.dirs[w.rng.IntN(len(w.dirs))]
		target := []string{g.dir, g.cluster}[w.rng.IntN(2)]
		uid := w.uuid()
		f.in.PVCs = append(f.in.PVCs, PVC{Namespace: g.ns, Name: "w", UID: uid, StorageClassName: "sc-repo", VolumeName: "pv-w", Phase: "Bound"})
		f.in.PVs = append(f.in.PVs, PV{Name: "pv-w", StorageClassName: "sc-repo", Phase: "Bound", ClaimNamespace: g.ns, ClaimName: "w", CSIDriver: CSIDriverS3, VolumeHandle: bkt + "/" + target})
		w.storage = append(w.storage, target, "pvc-"+uid, "pv-w")
	}
	if w.chance(10) {
		f.opts.Namespace = "app"
	}
	if len(w.dirs) > 0 && w.chance(25) {
		g := w.dirs[w.rng.IntN(len(w.dirs))]
		f.opts.Prefix = []string{g.root, JoinKey(g.root, g.ns), g.cluster, g.dir, g.dir + "/data0"}[w.rng.IntN(5)]
	}
}

// livePaths returns every bucket placement of the repo's live Backup paths:
// qualified, and resolved under each repository root.
func (w *world) livePaths() []string {
	var out []string
	for _, b := range w.f.in.Backups {
		for _, raw := range []string{b.Path, b.KopiaRepoPath} {
			if raw == "" {
				continue
			}
			for _, root := range append(w.repoRoots, w.mapping[b.Namespace]) {
				if root != "" {
					k, _ := resolveUnder(root, raw)
					out = append(out, k)
				}
			}
		}
	}
	return out
}

func (w *world) dirOf(key string) *gdir {
	for _, g := range w.dirs {
		if Contains(g.dir, key) {
			return g
		}
	}
	return nil
}

// checkSafety asserts that no deleted object violates a protection.
// pending are orphan roots whose contents are judged only at the final
// snapshot: their directories count as neither kept nor deleted yet.
func (w *world) checkSafety(t *testing.T, deleted []Object, pending []string, stage string) {
	t.Helper()
	opts := w.f.opts
	cutoff := opts.cutoff(now)
	live := map[BackupKey]bool{}
	deps := map[BackupKey]bool{}
	for _, b := range w.f.in.Backups {
		live[BackupKey{b.Namespace, b.Name}] = true
		for _, n := range []string{b.ParentBackupName, b.SpecParentBackupName, b.BaseBackupName} {
			if n != "" {
				deps[BackupKey{b.Namespace, n}] = true
			}
		}
	}
	// Manifest chains are checked within one component directory, where
	// KubeBlocks writes them (one backup policy); live CR dependencies are
	// checked by key everywhere.
	chain := map[string]bool{}
	gone := map[*gdir]bool{}
	for _, o := range deleted {
		if g := w.dirOf(CleanKey(o.Key)); g != nil {
			gone[g] = true
		}
	}
	for _, g := range w.dirs {
		for _, p := range pending {
			gone[g] = gone[g] || Contains(p, g.dir)
		}
		if !gone[g] && g.parseable {
			for _, n := range []string{g.parent, g.base} {
				if n != "" {
					chain[parentKey(g.dir)+"/"+n] = true
				}
			}
		}
	}
	paths := w.livePaths()
	for _, o := range deleted {
		k := CleanKey(o.Key)
		fail := func(why string) { t.Fatalf("%s: %s deleted although %s", stage, o.Key, why) }
		if isYoung(o.LastModified, cutoff) {
			fail("it is younger than min-age")
		}
		for _, u := range w.userRoots {
			if Contains(u, k) {
				fail("it is under a current user volume")
			}
		}
		for _, s := range w.storage {
			if Overlaps(s, k) {
				fail("it overlaps storage protection " + s)
			}
		}
		isRepo := false
		for _, r := range w.repoRoots {
			isRepo = isRepo || Contains(r, k)
		}
		for _, p := range paths {
			if isRepo && Overlaps(p, k) {
				fail("a live Backup path overlaps it: " + p)
			}
		}
		g := w.dirOf(k)
		if g == nil {
			continue
		}
		key := BackupKey{g.ns, g.name}
		switch {
		case live[key]:
			fail("a live Backup CR has its key")
		case w.restores[key]:
			fail("an active Restore references it")
		case deps[key]:
			fail("a live Backup depends on it")
		case chain[g.dir]:
			fail("a remaining backup of its component depends on it")
		case g.manifest && !g.valid:
			fail("its manifest is invalid")
		case g.manifest && g.policy == DeletionPolicyRetain && !opts.IncludeRetained:
			fail("it is retained")
		case g.manifest && isYoung(g.creation, cutoff):
			fail("its manifest creationTimestamp is young")
		}
	}
}

// expectDeletable asserts that every clean orphan the oracle can vouch for is
// an orphan candidate.
func (w *world) expectDeletable(t *testing.T, pl Plan, stage string) int {
	t.Helper()
	opts := w.f.opts
	names := map[BackupKey]bool{}
	for _, b := range w.f.in.Backups {
		for _, n := range []string{b.Name, b.ParentBackupName, b.BaseBackupName} {
			names[BackupKey{b.Namespace, n}] = true
		}
	}
	for _, g := range w.dirs {
		if g.parseable {
			names[BackupKey{g.ns, g.parent}], names[BackupKey{g.ns, g.base}] = true, true
		}
	}
	paths := w.livePaths()
	n := 0
	for _, g := range w.dirs {
		ok := g.clean && (opts.Namespace == "" || opts.Namespace == g.ns) && (opts.Prefix == "" || Contains(opts.Prefix, g.cluster)) &&
			!names[BackupKey{g.ns, g.name}] && !w.restores[BackupKey{g.ns, g.name}]
		for _, s := range w.storage {
			ok = ok && !Overlaps(s, g.cluster)
		}
		for _, p := range paths {
			ok = ok && !Overlaps(p, g.dir)
		}
		if !ok {
			continue
		}
		n++
		c := find(pl, TypeBackup, g.dir)
		if c == nil || c.State != StateOrphan {
			t.Fatalf("%s: clean orphan %s is not deletable:\n%s", stage, g.dir, dump(pl))
		}
	}
	return n
}

func deletedObjects(pl Plan) (objs []Object, pending []string) {
	for _, c := range pl.Candidates {
		if c.State == StateOrphan {
			objs = append(objs, c.Objects...)
			if c.DeferredScan {
				pending = append(pending, c.Prefix)
			}
		}
	}
	return objs, pending
}

// TestPlannerProperties is the randomized safety and liveness property test
// over generated layouts and inventories: nothing live, referenced,
// retained, young, depended on or protected is ever deleted, and clean
// orphans are deletable.
func TestPlannerProperties(t *testing.T) {
	iterations := 10000
	if testing.Short() {
		iterations = 1000
	}
	expected, orphans, blocked := 0, 0, map[string]int{}
	for seed := range uint64(iterations) {
		w := generate(seed)
		inv := w.f.inv()
		if len(inv.Blockers) > 0 && w.blocker == "" {
			t.Fatalf("seed %d: generator produced unplanned blockers %v", seed, inv.Blockers)
		}
		pl, err := NewPlan(inv, w.f.listing(), w.f.opts, now)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		stage := fmt.Sprintf("seed %d plan", seed)
		objs, pending := deletedObjects(pl)
		w.checkSafety(t, objs, pending, stage)
		if w.blocker != "" {
			w.checkBlocked(t, inv, pl, stage)
			scope := "inside"
			if w.f.opts.Namespace != "" && w.f.opts.Namespace != w.blockerNS {
				scope = "outside"
			}
			blocked[scope]++
			continue
		}
		expected += w.expectDeletable(t, pl, stage)
		fin, err := FinalSnapshot(pl, inv, w.f.listing(), now)
		if err != nil {
			t.Fatalf("seed %d: final snapshot: %v", seed, err)
		}
		stage = fmt.Sprintf("seed %d final", seed)
		objs, pending = deletedObjects(fin)
		if len(pending) > 0 {
			t.Fatalf("%s: deferred orphans after the final snapshot: %v", stage, pending)
		}
		w.checkSafety(t, objs, nil, stage)
		w.expectDeletable(t, fin, stage)
		if err := GlobalGuards(fin); err != nil && !strings.Contains(err.Error(), "purge") {
			t.Fatalf("%s: guards: %v", stage, err)
		}
		if inv2, err := Recheck(fin, inv, w.f.listing()); err != nil || len(inv2) > 0 {
			t.Fatalf("%s: unchanged world must recheck clean: %v %v", stage, err, inv2)
		}
		orphans += fin.StateCounts[StateOrphan]
	}
	if expected < iterations/2 {
		t.Fatalf("only %d clean orphans were checked over %d layouts: generator too weak", expected, iterations)
	}
	if blocked["inside"] < iterations/50 || blocked["outside"] < iterations/200 {
		t.Fatalf("blocked layouts inside/outside --namespace: %d/%d over %d layouts: generator too weak", blocked["inside"], blocked["outside"], iterations)
	}
	t.Logf("%d layouts, %d clean orphans confirmed deletable, %d orphan candidates checked, %d blocked layouts (%d by a blocker outside --namespace)", iterations, expected, orphans, blocked["inside"]+blocked["outside"], blocked["outside"])
}
