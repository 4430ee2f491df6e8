package prune

import (
	"errors"
	"fmt"
)

// backupLoc is where a backup directory sits.
type backupLoc struct {
	root, ns, cluster, clusterUID, dir string
	key                                BackupKey
	// fallback marks manifest-driven mode (see planner.fallback): there is no
	// layout, the key comes from the manifest, and path checks use root as
	// given.
	fallback bool
	// nested is set when another candidate directory lies inside dir.
	nested bool
}

// manifestFacts is what reading the manifests of one directory established.
type manifestFacts struct {
	main          *entry
	m             Manifest
	invalid       error
	nestedRetain  string
	deps          []BackupKey
	identityNames []BackupKey
}

// readManifests reads and validates the directory's manifest and, in volume
// mode, the nested target/pod manifests, from the directory's objects named
// like the manifest (objAgg.mans) in index order. Ambiguity: nested
// manifests are read and validated against the enclosing directory; a
// failure makes the candidate invalid-manifest and Retain makes it retained.
func (p *planner) readManifests(loc backupLoc, es []entry) manifestFacts {
	var f manifestFacts
	name := p.opts.manifestName()
	mkey := JoinKey(loc.dir, name)
	var nested []entry
	for i, e := range es {
		if !e.current || e.slash || e.obj.DeleteMarker {
			continue
		}
		switch {
		case e.key == mkey:
			if f.main != nil {
				f.invalid = errors.New("more than one object maps to the manifest key")
			}
			f.main = &es[i]
		case !loc.fallback && baseName(e.key) == name:
			nested = append(nested, e)
		}
	}
	place := manifestPlace{dir: loc.dir, root: loc.root, clusterUID: loc.clusterUID, repo: p.inv.Repo.Name, nsSegment: loc.ns}
	if f.main != nil {
		m, err := p.readManifest(*f.main)
		f.m = m
		f.absorb(m, loc.key.Namespace)
		if f.invalid == nil && err != nil {
			f.invalid = err
		}
		if f.invalid == nil {
			f.invalid = validateManifest(m, place)
		}
	}
	for _, e := range nested {
		m, err := p.readManifest(e)
		f.absorb(m, loc.key.Namespace)
		if err == nil {
			err = validateManifest(m, place)
		}
		if err != nil && f.invalid == nil {
			f.invalid = fmt.Errorf("nested manifest %s: %w", e.obj.Key, err)
		}
		if err == nil && m.Spec.DeletionPolicy == DeletionPolicyRetain && f.nestedRetain == "" {
			f.nestedRetain = e.obj.Key
		}
	}
	return f
}

// absorb records the identity and dependencies a manifest names, even when
// it later fails validation: they can only add protection.
func (f *manifestFacts) absorb(m Manifest, fallbackNS string) {
	ns := m.Metadata.Namespace
	if ns == "" {
		ns = fallbackNS
	}
	for _, n := range []string{m.Parent(), m.Status.BaseBackupName} {
		if n != "" {
			f.deps = append(f.deps, BackupKey{ns, n})
		}
	}
	if m.Metadata.Name != "" {
		f.identityNames = append(f.identityNames, BackupKey{ns, m.Metadata.Name})
	}
}

func (p *planner) readManifest(e entry) (Manifest, error) {
	if k, ok := NormalizeKey(e.obj.Key); !ok || k != e.obj.Key {
		return Manifest{}, fmt.Errorf("manifest key %q is not normalised", e.obj.Key)
	}
	body, ok := p.manifests[e.obj.Key]
	switch {
	case !ok:
		return Manifest{}, errors.New("manifest was not read")
	case body.Err != nil:
		return Manifest{}, fmt.Errorf("read manifest: %w", body.Err)
	}
	return ParseManifest(body.Data)
}

// evalBackup classifies one backup directory from the summary of its
// objects. The first matching rule of backupRules sets state and reason;
// the dependency rule runs later (applyDependencies).
func (p *planner) evalBackup(loc backupLoc, a *objAgg) Candidate {
	c := Candidate{Type: TypeBackup, Prefix: loc.dir, Backup: loc.key, Root: loc.root,
		ClusterPrefix: loc.cluster, ClusterUID: loc.clusterUID, Objects: objectsOf(sortedEntries(a.objs)),
		ObjectCount: a.n, Bytes: a.bytes}
	c.LastModified = a.newest
	c.CreatedAt = c.LastModified
	f := p.readManifests(loc, sortedEntries(a.mans))
	if f.main != nil {
		mo := f.main.obj
		c.ManifestKey, c.ManifestETag, c.ManifestVersionID, c.ManifestGeneration = mo.Key, mo.ETag, mo.VersionID, mo.Generation
		c.ManifestLastModified = mo.LastModified
		c.UID, c.DeletionPolicy = f.m.Metadata.UID, f.m.Spec.DeletionPolicy
		c.ParentBackupName, c.BaseBackupName = f.m.Parent(), f.m.Status.BaseBackupName
		if ts := f.m.Metadata.CreationTimestamp; ts != nil {
			c.CreatedAt = *ts
		}
		if loc.fallback && f.invalid == nil {
			c.Backup = f.m.Key()
		}
	}
	c.Dependencies = f.deps
	c.ContainedBackups = appendKeys([]BackupKey{c.Backup}, f.identityNames...)
	c.State, c.Reason = p.backupRules(&c, loc, f, a)
	return c
}

func appendKeys(ks []BackupKey, more ...BackupKey) []BackupKey {
	for _, k := range more {
		dup := false
		for _, x := range ks {
			dup = dup || x == k
		}
		if !dup {
			ks = append(ks, k)
		}
	}
	return ks
}

// backupRules applies the backup rules in order, the first match winning:
// invalid manifest, live or protected by the cluster (backupProtections),
// Retain policy, age of the manifest, a partial --prefix, a nested backup
// directory, young objects; otherwise the backup is an orphan.
func (p *planner) backupRules(c *Candidate, loc backupLoc, f manifestFacts, a *objAgg) (State, string) {
	if f.invalid != nil {
		return StateInvalidManifest, "invalid manifest: " + f.invalid.Error()
	}
	if st, why, pr := backupProtections(p.refs, *c); st != "" {
		c.Protection = pr
		return st, why
	}
	if f.main != nil && f.m.Spec.DeletionPolicy == DeletionPolicyRetain && !p.opts.IncludeRetained {
		return StateRetained, "manifest deletionPolicy is Retain (use --include-retained)"
	}
	if f.nestedRetain != "" && !p.opts.IncludeRetained {
		return StateRetained, fmt.Sprintf("nested manifest %s has deletionPolicy Retain (use --include-retained)", f.nestedRetain)
	}
	if f.main != nil {
		if p.young(f.main.obj.LastModified) {
			return StateTooYoung, "manifest was modified within min-age"
		}
		if p.young(c.CreatedAt) {
			return StateTooYoung, "manifest creationTimestamp is within min-age"
		}
	}
	if StrictlyInside(loc.dir, p.prefix) {
		c.DeletionConfigurable = true
		return StateProtected, "--prefix covers only part of the backup directory"
	}
	if loc.nested {
		return StateProtected, "another backup directory is nested inside"
	}
	if a.hasYoung {
		return StateTooYoung, youngReason(a.young.obj)
	}
	return StateOrphan, "no Backup CR references the directory"
}

// backupProtections applies the rules that keep a backup for the cluster's
// sake: a Backup CR of that name, an active Restore, an overlapping live
// Backup path or kopia repository, a cluster's kopia directory and storage
// protections. The executor reuses it to revalidate backups against a
// refreshed inventory.
func backupProtections(r *refs, c Candidate) (State, string, *Protection) {
	for _, k := range c.ContainedBackups {
		if lb, ok := r.inv.Backups[k]; ok {
			if c.UID != "" && lb.UID != c.UID {
				return StateLive, fmt.Sprintf("name was recreated: Backup CR %s has uid %s", k, lb.UID), nil
			}
			return StateLive, fmt.Sprintf("Backup CR %s exists", k), nil
		}
	}
	for _, k := range c.ContainedBackups {
		if r.inv.RestoreProtected[k] {
			return StateProtected, fmt.Sprintf("an active Restore references %s", k), nil
		}
	}
	if b, ok := r.liveStatus(c.Root, c.Prefix); ok {
		return StateLive, fmt.Sprintf("overlaps a live Backup CR (%s status.path)", b.Key), nil
	}
	if b, ok := r.liveKopia(c.Root, c.Prefix); ok {
		return StateProtected, fmt.Sprintf("overlaps the kopia repository of live Backup %s", b.Key), nil
	}
	// Ambiguity: a component-level "kopia" directory looks like a
	// backup; it is protected while any live Backup uses the cluster.
	if baseName(c.Prefix) == "kopia" && c.ClusterPrefix != "" && r.clusterInUse(c.Root, c.Backup.Namespace, c.ClusterPrefix, c.ClusterUID) {
		return StateProtected, "kopia repository directory of a cluster with live Backups", nil
	}
	if pr := r.storage(c.Prefix); pr != nil {
		return StateProtected, fmt.Sprintf("overlaps storage protection %s (%s)", pr.Prefix, pr.Resource), pr
	}
	return "", "", nil
}

// clusterInUse reports whether a live Backup of ns belongs to cluster d.
func (r *refs) clusterInUse(root, ns, d, uid string) bool {
	both := r.paths(root).both
	for _, i := range r.byNS[ns] {
		if uid != "" && r.all[i].ClusterUID == uid || inCluster(both[i], d) {
			return true
		}
	}
	return false
}
