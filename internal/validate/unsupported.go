package validate

import (
	"fmt"
	"reflect"
	"slices"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
)

// unsupportedField is a field of the Kopiur API that snapflow does not act
// on yet. Admitting it would let a user believe it works, so it is refused
// with the reason; an object stored with it before this rule existed is
// only warned about as long as the field keeps its stored value, so its
// finalizers and status can still be written.
type unsupportedField struct {
	path string
	get  func(*snapv1.RepositorySpec) (any, bool) // false when unset
	why  string
}

var unsupportedRepositoryFields = []unsupportedField{
	{"spec.catalog", func(s *snapv1.RepositorySpec) (any, bool) { return s.Catalog, s.Catalog != nil },
		"snapflow does not scan repositories for snapshots it did not take, so the catalog and its adoption would do nothing"},
	{"spec.seed", func(s *snapv1.RepositorySpec) (any, bool) { return s.Seed, s.Seed != nil },
		"snapflow cannot seed a repository from another one yet; copy the blobs with kopia's own tools, then point the repository at them"},
	{"spec.server", func(s *snapv1.RepositorySpec) (any, bool) { return s.Server, s.Server != nil },
		"snapflow does not run kopia's web UI"},
	{"spec.parameters", func(s *snapv1.RepositorySpec) (any, bool) { return s.Parameters, s.Parameters != nil },
		"snapflow does not change kopia's epoch or blob-retention parameters yet; set them with kopia's own tools"},
	unsupportedBackend("azure", func(b *snapv1.Backend) (any, bool) { return b.Azure, b.Azure != nil }),
	unsupportedBackend("b2", func(b *snapv1.Backend) (any, bool) { return b.B2, b.B2 != nil }),
	unsupportedBackend("gdrive", func(b *snapv1.Backend) (any, bool) { return b.GDrive, b.GDrive != nil }),
	unsupportedBackend("rclone", func(b *snapv1.Backend) (any, bool) { return b.Rclone, b.Rclone != nil }),
	{"spec.backend.s3.auth.workloadIdentity", func(s *snapv1.RepositorySpec) (any, bool) {
		if s.Backend.S3 == nil || s.Backend.S3.Auth == nil || s.Backend.S3.Auth.WorkloadIdentity == nil {
			return nil, false
		}
		return s.Backend.S3.Auth.WorkloadIdentity, true
	}, "snapflow's movers run under their own ServiceAccount without a token, so a cloud identity bound to another ServiceAccount never reaches them and every run would be refused by the bucket; use auth.secretRef with access keys"},
	{"spec.backend.gcs.auth.workloadIdentity", func(s *snapv1.RepositorySpec) (any, bool) {
		if s.Backend.GCS == nil || s.Backend.GCS.Auth == nil || s.Backend.GCS.Auth.WorkloadIdentity == nil {
			return nil, false
		}
		return s.Backend.GCS.Auth.WorkloadIdentity, true
	}, "snapflow's movers run under their own ServiceAccount without a token, so a Google service account bound to another ServiceAccount never reaches them and every run would be refused by the bucket; use auth.secretRef with the service account's JSON key under KOPIA_GCS_CREDENTIALS_JSON"},
	{"spec.moverDefaults.cache.ownership", func(s *snapv1.RepositorySpec) (any, bool) {
		if s.MoverDefaults == nil || s.MoverDefaults.Cache == nil || s.MoverDefaults.Cache.Ownership == nil {
			return nil, false
		}
		return s.MoverDefaults.Cache.Ownership, true
	}, cacheOwnershipWhy},
	{"spec.health.indexBlobWarnThreshold", func(s *snapv1.RepositorySpec) (any, bool) {
		if s.Health == nil || s.Health.IndexBlobWarnThreshold == nil {
			return nil, false
		}
		return *s.Health.IndexBlobWarnThreshold, true
	}, "snapflow does not count a repository's index blobs yet, so no warning would come"},
}

// missingRepositoryFields are fields a run cannot do without that the
// API leaves optional: get reports true when the field is missing, and
// path names the field to set.
var missingRepositoryFields = []unsupportedField{
	// Without keys the cloud clients fall back to the identity of wherever
	// the mover runs: a node's instance role or service account, which
	// every tenant on the node shares.
	{"spec.backend.s3.auth.secretRef", func(s *snapv1.RepositorySpec) (any, bool) {
		return s.Backend.S3, s.Backend.S3 != nil && s.Backend.S3.Auth == nil
	}, "an s3 repository without it would reach the bucket as the node's own identity (its instance role), which every tenant on the node shares, and snapflow never uses that; name the Secret with AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"},
	{"spec.backend.gcs.auth.secretRef", func(s *snapv1.RepositorySpec) (any, bool) {
		return s.Backend.GCS, s.Backend.GCS != nil && s.Backend.GCS.Auth == nil
	}, "a gcs repository without it would reach the bucket as the node's own identity, which every tenant on the node shares, and snapflow never uses that; name the Secret with the service account's JSON key under KOPIA_GCS_CREDENTIALS_JSON"},
}

// cacheOwnershipWhy is why cache.ownership is refused everywhere it appears.
const cacheOwnershipWhy = "snapflow does not change the cache volume's owner; a kubelet gives a read-write cache volume to the mover's fsGroup, so set podSecurityContext.fsGroup instead"

// cacheOwnership is the mover's cache.ownership, nil when unset.
func cacheOwnership(m *snapv1.MoverSpec) *snapv1.CacheOwnership {
	if m == nil || m.Cache == nil {
		return nil
	}
	return m.Cache.Ownership
}

// unsupportedBackend refuses a backend the mover cannot open yet: admitted,
// every run against it would fail.
func unsupportedBackend(name string, get func(*snapv1.Backend) (any, bool)) unsupportedField {
	return unsupportedField{"spec.backend." + name, func(s *snapv1.RepositorySpec) (any, bool) { return get(&s.Backend) },
		"snapflow's mover opens filesystem, s3, sftp, webDav and gcs repositories; every run against a " + name + " repository would fail. Use one of those backends (rclone can front most clouds behind webDav)"}
}

// RepositoryUnsupported refuses the fields snapflow does not act on yet,
// and onNamespaceDelete: Delete on a Repository, which cannot work. prev
// is the stored spec on an update (nil on create): a field it already had
// with the same value is warned about, not refused again.
func RepositoryUnsupported(prev, cur *snapv1.RepositorySpec, cluster bool) Result {
	var r Result
	kind := "Repository"
	if cluster {
		kind = "ClusterRepository"
	}
	fields := append(append([]unsupportedField{}, unsupportedRepositoryFields...), missingRepositoryFields...)
	for i, f := range fields {
		v, set := f.get(cur)
		if !set {
			continue
		}
		msg := fmt.Sprintf("not supported by snapflow yet: %s; remove it", f.why)
		stored := "(this %s was stored with it, so it is kept, and does nothing)"
		if i >= len(unsupportedRepositoryFields) {
			msg = "required: " + f.why
			stored = "(this %s was stored without it, so it is kept, and every run against it fails until it is set)"
		}
		if prev != nil {
			if was, had := f.get(prev); had && reflect.DeepEqual(was, v) {
				r.Warn("%s: %s "+stored, f.path, msg, kind)
				continue
			}
		}
		r.Also(fieldErr(f.path, "%s", msg))
	}
	if !cluster && cur.OnNamespaceDelete == snapv1.NamespaceDeleteDelete {
		const why = "Delete cannot work on a Repository: it, its Secrets and its Snapshots go with their namespace, and no pod can start in a namespace being deleted to delete the data. Use Orphan (the default), delete the Snapshots before the namespace, or put the repository in a ClusterRepository"
		if prev != nil && prev.OnNamespaceDelete == snapv1.NamespaceDeleteDelete {
			r.Warn("spec.onNamespaceDelete: %s (this Repository was stored with it; it acts as Orphan)", why)
		} else {
			r.Also(fieldErr("spec.onNamespaceDelete", "%s", why))
		}
	}
	return r
}

// PolicyUnsupported is RepositoryUnsupported for a SnapshotPolicy: its
// adoption, and an nfs source beside others, which a Snapshot could not
// pin.
func PolicyUnsupported(prev, cur *snapv1.SnapshotPolicySpec) Result {
	var r Result
	refuse := func(path, why string, stored bool) {
		msg := "not supported by snapflow yet: " + why + "; remove it"
		if stored {
			r.Warn("%s: %s (this SnapshotPolicy was stored with it, so it is kept, and does nothing)", path, msg)
			return
		}
		r.Also(fieldErr(path, "%s", msg))
	}
	if cur.Adoption != "" {
		refuse("spec.adoption", "snapflow does not scan repositories for snapshots it did not take, so there is nothing to adopt", prev != nil && prev.Adoption == cur.Adoption)
	}
	if o := cacheOwnership(cur.Mover); o != nil {
		refuse("spec.mover.cache.ownership", cacheOwnershipWhy, prev != nil && reflect.DeepEqual(cacheOwnership(prev.Mover), o))
	}
	// A stored source keeps its warning wherever it moved in the list.
	stored := func(same func(snapv1.Source) bool) bool {
		return prev != nil && slices.ContainsFunc(prev.Sources, same)
	}
	for i, src := range cur.Sources {
		if src.NFS != nil && len(cur.Sources) > 1 {
			// A Snapshot pins one source of a multi-source policy by its
			// PVC (spec.source.target.pvc), which an export does not have.
			refuse(fmt.Sprintf("spec.sources[%d].nfs", i), fmt.Sprintf("an nfs source must be the only source of its SnapshotPolicy in snapflow, but this one has %d; move the export to a SnapshotPolicy of its own (it may share the repository)", len(cur.Sources)),
				prev != nil && len(prev.Sources) > 1 && stored(func(p snapv1.Source) bool { return reflect.DeepEqual(p.NFS, src.NFS) }))
		}
	}
	return r
}

// RestoreUnsupported refuses the mover settings a Restore cannot use.
func RestoreUnsupported(cur *snapv1.RestoreSpec) Result {
	var r Result
	if cacheOwnership(cur.Mover) != nil {
		r.Also(fieldErr("spec.mover.cache.ownership", "not supported by snapflow yet: %s; remove it", cacheOwnershipWhy))
	}
	if m := cur.Mover; m != nil && m.Cache != nil && m.Cache.Mode == snapv1.CachePersistent {
		// A persistent cache is kept for a source's next backup; a restore
		// has no next run to warm.
		r.Also(fieldErr("spec.mover.cache.mode", "not supported by snapflow yet: a Restore's cache lives as long as its mover pod, as a restore runs once (Persistent keeps a SnapshotPolicy's cache for its next backup); remove mode, or set Ephemeral"))
	}
	return r
}

// MaintenanceUnsupported refuses a Maintenance's cache.ownership; prev is
// the stored spec on an update (nil on create): kept unchanged, it is only
// warned about, so the object can still be annotated and its finalizers
// removed.
func MaintenanceUnsupported(prev, cur *snapv1.MaintenanceSpec) Result {
	var r Result
	o := cacheOwnership(cur.Mover)
	if o == nil {
		return r
	}
	msg := "not supported by snapflow yet: " + cacheOwnershipWhy + "; remove it"
	if prev != nil && reflect.DeepEqual(cacheOwnership(prev.Mover), o) {
		r.Warn("spec.mover.cache.ownership: %s (this Maintenance was stored with it, so it is kept, and does nothing)", msg)
		return r
	}
	r.Also(fieldErr("spec.mover.cache.ownership", "%s", msg))
	return r
}

// foreignRefs are the references a namespaced Repository may point only at
// its own namespace: the mover reads every one of them from there, so
// another namespace would be silently ignored (and reading it would let
// one tenant use another's Secret).
var foreignRefs = []struct {
	path string
	get  func(*snapv1.RepositorySpec) string
}{
	{"spec.backend.s3.auth.secretRef.namespace", func(s *snapv1.RepositorySpec) string {
		if b := s.Backend.S3; b != nil && b.Auth != nil && b.Auth.SecretRef != nil {
			return b.Auth.SecretRef.Namespace
		}
		return ""
	}},
	{"spec.backend.s3.tls.caBundleRef.namespace", func(s *snapv1.RepositorySpec) string {
		if b := s.Backend.S3; b != nil && b.TLS != nil && b.TLS.CABundleRef != nil {
			return b.TLS.CABundleRef.Namespace
		}
		return ""
	}},
}

// RepositoryOwnNamespace refuses a namespaced Repository's reference to a
// Secret or ConfigMap of another namespace; its own namespace, spelled
// out, is accepted. prev is the stored spec on an update: a value stored
// before this rule is warned about while it is unchanged, so the object's
// finalizers can still be written.
func RepositoryOwnNamespace(prev, cur *snapv1.RepositorySpec, ns string) Result {
	var r Result
	for _, f := range foreignRefs {
		v := f.get(cur)
		if v == "" || v == ns {
			continue
		}
		msg := fmt.Sprintf("a Repository reads its credentials and CA bundle from its own namespace %q, so %q would be ignored; remove namespace, or use a ClusterRepository to read them from another namespace", ns, v)
		if prev != nil && f.get(prev) == v {
			r.Warn("%s: %s (this Repository was stored with it; %q is read)", f.path, msg, ns)
			continue
		}
		r.Also(fieldErr(f.path, "%s", msg))
	}
	return r
}
