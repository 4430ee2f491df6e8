package prune

import (
	"errors"
	"fmt"
	"sort"
	"time"
)

// ErrExecutionBlocked is returned when blockers forbid real deletion.
var ErrExecutionBlocked = errors.New("execution blocked")

// ErrStalePlan wraps a failed execution-start refresh or revalidation.
var ErrStalePlan = errors.New("plan is stale")

// scopeView returns the candidate-scope view of a listing for a plan.
func scopeView(opts Options, l Listing) (view, *index, error) {
	if opts.versionedScopes() && !l.Versioned {
		return view{}, nil, errors.New("versioned scopes need a version listing")
	}
	ix := newIndex(l)
	return view{ix: ix, all: opts.versionedScopes(), plainID: !opts.versionedScopes()}, ix, nil
}

// scopeEntries lists a candidate's scope as the executor re-lists it: the
// directory or root, or for a stray only its planned keys (every version).
func scopeEntries(c Candidate, v view) []entry {
	es := v.inside(c.ScopePrefix)
	if c.Type != TypeRepositoryStray {
		return es
	}
	planned := map[string]bool{}
	for _, o := range c.Objects {
		planned[o.Key] = true
	}
	var out []entry
	for _, e := range es {
		if planned[e.obj.Key] {
			out = append(out, e)
		}
	}
	return out
}

// FinalSnapshot is the second traversal, at execution: every orphan
// candidate's snapshot is replaced from a fresh listing, ages are re-checked,
// strays are re-judged on their planned keys and historical roots are
// enumerated and classified. The dependency fixed point then runs again and
// the totals are recomputed. inv is the inventory the plan was made from.
func FinalSnapshot(pl Plan, inv Inventory, l Listing, now time.Time) (Plan, error) {
	if pl.Blocked() {
		return pl, ErrExecutionBlocked
	}
	v, ix, err := scopeView(pl.opts, l)
	if err != nil {
		return pl, err
	}
	p := &planner{inv: &inv, refs: newRefs(&inv), ix: ix, manifests: l.Manifests, scope: v, opts: pl.opts, prefix: pl.Prefix,
		cutoff: pl.opts.cutoff(now), plan: &Plan{}, counted: map[string]bool{}}
	out := pl
	out.Candidates = append([]Candidate(nil), pl.Candidates...)
	for i := range out.Candidates {
		c := &out.Candidates[i]
		if c.State != StateOrphan {
			continue
		}
		c.DeferredScan = false
		switch c.Type {
		case TypeOrphanRepositoryRoot:
			p.finalRoot(c)
		case TypeRepositoryStray:
			es := scopeEntries(*c, v)
			c.Objects = objectsOf(es)
			if c.FullScope != nil {
				c.FullScope = objectsOf(v.inside(c.Prefix))
			}
			ns := ""
			if segs := relSegments(c.Root, c.Prefix); len(segs) > 0 {
				ns = segs[0]
			}
			p.strayState(c, ns)
			if len(es) == 0 {
				c.State, c.Reason = StateProtected, "the planned stray objects are gone"
			}
		default:
			es := v.inside(c.Prefix)
			if c.Type == TypeBackup {
				// A non-empty object named "<backup>/" is a stray at plan
				// time; it must not join the backup at execution time.
				kept := es[:0:0]
				for _, e := range es {
					if e.key != c.Prefix || e.marker {
						kept = append(kept, e)
					}
				}
				es = kept
			}
			c.Objects = objectsOf(es)
			p.finalCheck(c, es)
		}
		c.ObjectCount, c.Bytes = len(c.Objects), sumBytes(c.Objects)
		c.LastModified = newest(c.Objects)
		if c.ManifestKey == "" {
			c.CreatedAt = c.LastModified
		}
	}
	applyDependencies(out.Candidates, p.refs.liveDeps, pl.outsideDeps)
	for i := range out.Candidates {
		if out.Candidates[i].State != StateOrphan {
			out.Candidates[i].Objects, out.Candidates[i].FullScope = nil, nil
		}
	}
	summarize(&out)
	return out, nil
}

// finalCheck re-judges a backup or whole-root candidate on its fresh
// snapshot: a manifest that appeared or changed since planning, emptiness and
// age.
func (p *planner) finalCheck(c *Candidate, es []entry) {
	if c.Type == TypeBackup {
		var cur *Object
		for _, e := range es {
			if e.current && !e.obj.DeleteMarker && e.key == JoinKey(c.Prefix, p.opts.manifestName()) {
				o := e.obj
				cur = &o
			}
		}
		switch {
		case c.ManifestKey == "" && cur != nil:
			c.State, c.Reason = StateProtected, "a manifest appeared after planning"
			return
		case c.ManifestKey != "" && (cur == nil || cur.Key != c.ManifestKey || cur.ETag != c.ManifestETag ||
			cur.VersionID != c.ManifestVersionID || cur.Generation != c.ManifestGeneration):
			c.State, c.Reason = StateProtected, "manifest changed after planning"
			return
		}
	}
	if len(es) == 0 || onlyMarkers(es) && c.Type != TypeBackup {
		c.State, c.Reason = StateProtected, "no current objects"
		return
	}
	if o, ok := youngObject(c.Objects, p.cutoff); ok {
		c.State, c.Reason = StateTooYoung, youngReason(o)
	}
}

// finalRoot enumerates a historical root and classifies every manifest in
// it; the first result other than orphan becomes the root's state.
func (p *planner) finalRoot(c *Candidate) {
	root := c.Prefix
	es := p.scope.inside(root)
	c.Objects = objectsOf(es)
	if len(es) == 0 || onlyMarkers(es) {
		c.State, c.Reason = StateProtected, "no current objects"
		return
	}
	name := p.opts.manifestName()
	// Group by canonical backup directory so nested target/pod manifests are
	// judged with their enclosing directory.
	dirs := map[string][]entry{}
	locs := map[string]backupLoc{}
	var keys, deps []BackupKey
	for _, e := range es {
		segs := relSegments(root, e.key)
		if len(segs) >= 5 && IsDNSLabel(segs[0]) && IsDNSLabel(segs[2]) && IsDNSSubdomain(segs[3]) {
			if _, uid, ok := ParseClusterDir(segs[1]); ok {
				d := JoinKey(root, segs[0], segs[1])
				dir := JoinKey(d, segs[2], segs[3])
				dirs[dir] = append(dirs[dir], e)
				locs[dir] = backupLoc{root: root, ns: segs[0], cluster: d, clusterUID: uid, dir: dir,
					key: BackupKey{Namespace: segs[0], Name: segs[3]}}
				keys = appendKeys(keys, locs[dir].key)
				continue
			}
		}
		// A manifest outside the layout is judged at its own directory; it
		// cannot match its path rules there, so it protects the root.
		if e.current && !e.slash && !e.obj.DeleteMarker && baseName(e.key) == name {
			dir := parentKey(e.key)
			locs[dir] = backupLoc{root: root, dir: dir, key: BackupKey{Name: baseName(dir)}, fallback: true}
			dirs[dir] = append(dirs[dir], e)
		}
	}
	state, reason := StateOrphan, ""
	for _, dir := range sortedLocKeys(locs) {
		// Manifest-less directories are judged too: rules 2–6 only add
		// protection.
		b := p.evalBackup(locs[dir], aggOf(dirs[dir], p.cutoff, name, false))
		keys = appendKeys(keys, b.ContainedBackups...)
		deps = appendKeys(deps, b.Dependencies...)
		if b.State != StateOrphan && state == StateOrphan {
			what := "manifest " + b.ManifestKey
			if b.ManifestKey == "" {
				what = "directory " + dir
			}
			state, reason = b.State, fmt.Sprintf("%s: %s", what, b.Reason)
		}
	}
	c.ContainedBackups, c.Dependencies = keys, deps
	if state != StateOrphan {
		c.State, c.Reason = state, reason
		return
	}
	if o, ok := youngObject(c.Objects, p.cutoff); ok {
		c.State, c.Reason = StateTooYoung, youngReason(o)
	}
}

func sortedLocKeys(m map[string]backupLoc) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ErrUnsafe wraps the global guards' refusals: the plan or the bucket is
// in a state no deletion may start from, and only an operator can change
// that (a retry would be refused the same way).
var ErrUnsafe = errors.New("unsafe to prune")

// GlobalGuards are the checks of the whole plan before any write.
func GlobalGuards(pl Plan) error {
	err := globalGuards(pl)
	if err == nil || errors.Is(err, ErrExecutionBlocked) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrUnsafe, err)
}

func globalGuards(pl Plan) error {
	switch pl.Versioning {
	case VersioningDisabled, VersioningEnabled, VersioningSuspended:
	default:
		return errVersioning
	}
	if pl.VersioningSource != SourceDetected && pl.VersioningSource != SourceOperatorOverride {
		return fmt.Errorf("versioning source %q is neither detected nor operator-override", pl.VersioningSource)
	}
	if pl.Blocked() {
		return ErrExecutionBlocked
	}
	if RequiresPurgeVersions(pl.Versioning) && !pl.PurgeVersions {
		return fmt.Errorf("bucket versioning is %s: real deletion requires --purge-versions", pl.Versioning)
	}
	var objs, bytes int64
	for _, c := range pl.Candidates {
		if c.State != StateOrphan {
			continue
		}
		switch c.Type {
		case TypeBackup:
			if c.Backup.Namespace == "" || c.Backup.Name == "" {
				return fmt.Errorf("backup candidate %s has no namespace or name", c.Prefix)
			}
		case TypeRepositoryStray:
			if !pl.DeleteRepositoryStray {
				return fmt.Errorf("stray %s is orphan but the plan was made without --delete-repository-stray", c.Prefix)
			}
			if c.FullScope != nil && len(c.FullScope) == 0 {
				return fmt.Errorf("stray %s has an empty full-scope snapshot", c.Prefix)
			}
		case TypeOrphanRepositoryRoot, TypeOrphanClusterRoot, TypeOrphanVolumeRoot:
		default:
			return fmt.Errorf("candidate %s of type %s cannot be deleted", c.Prefix, c.Type)
		}
		if c.DeferredScan {
			return fmt.Errorf("candidate %s was never enumerated", c.Prefix)
		}
		if len(c.Objects) != c.ObjectCount || sumBytes(c.Objects) != c.Bytes {
			return fmt.Errorf("candidate %s: snapshot does not match its counts", c.Prefix)
		}
		objs += int64(len(c.Objects))
		bytes += c.Bytes
	}
	if objs != pl.DeleteObjects || bytes != pl.DeleteBytes {
		return fmt.Errorf("snapshot totals %d/%d differ from the plan's eligible totals %d/%d", objs, bytes, pl.DeleteObjects, pl.DeleteBytes)
	}
	return nil
}

// CheckRefresh compares a refreshed inventory with the plan. The namespace
// mapping must be equal in both directions, not only for the namespaces
// the plan covers.
func CheckRefresh(pl Plan, inv Inventory) error {
	switch {
	case len(inv.Blockers) > 0:
		return fmt.Errorf("%w: refreshed inventory has blockers: %v", ErrStalePlan, inv.Blockers)
	case inv.Repo.UID != pl.RepositoryUID:
		return fmt.Errorf("%w: backup repo was recreated (uid %s -> %s)", ErrStalePlan, pl.RepositoryUID, inv.Repo.UID)
	case inv.Repo.Generation != pl.RepositoryGeneration:
		return fmt.Errorf("%w: backup repo spec changed (generation %d -> %d)", ErrStalePlan, pl.RepositoryGeneration, inv.Repo.Generation)
	case inv.Repo.Bucket != pl.Bucket:
		return fmt.Errorf("%w: bucket changed (%s -> %s)", ErrStalePlan, pl.Bucket, inv.Repo.Bucket)
	}
	if len(inv.Mapping) != len(pl.ObjectPrefixes) {
		return fmt.Errorf("%w: namespace mapping changed", ErrStalePlan)
	}
	for ns, root := range pl.ObjectPrefixes {
		if inv.Mapping[ns] != root {
			return fmt.Errorf("%w: namespace %s now maps to %q (planned %q)", ErrStalePlan, ns, inv.Mapping[ns], root)
		}
	}
	return nil
}

// ExecutionGroups returns the indices of orphan candidates in execution
// order: every repository-stray first, as one group, then the rest,
// because deleting a backup would change a stray's full-scope snapshot.
func ExecutionGroups(pl Plan) [][]int {
	var strays, rest []int
	for i, c := range pl.Candidates {
		switch {
		case c.State != StateOrphan:
		case c.Type == TypeRepositoryStray:
			strays = append(strays, i)
		default:
			rest = append(rest, i)
		}
	}
	return [][]int{strays, rest}
}
