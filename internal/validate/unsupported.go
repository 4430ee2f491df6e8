package validate

import (
	"fmt"
	"reflect"

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
	{"spec.health.indexBlobWarnThreshold", func(s *snapv1.RepositorySpec) (any, bool) {
		if s.Health == nil || s.Health.IndexBlobWarnThreshold == nil {
			return nil, false
		}
		return *s.Health.IndexBlobWarnThreshold, true
	}, "snapflow does not count a repository's index blobs yet, so no warning would come"},
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
	for _, f := range unsupportedRepositoryFields {
		v, set := f.get(cur)
		if !set {
			continue
		}
		msg := fmt.Sprintf("not supported by snapflow yet: %s; remove it", f.why)
		if prev != nil {
			if was, had := f.get(prev); had && reflect.DeepEqual(was, v) {
				r.Warn("%s: %s (this %s was stored with it, so it is kept, and does nothing)", f.path, msg, kind)
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

// PolicyUnsupported is RepositoryUnsupported for a SnapshotPolicy.
func PolicyUnsupported(prev, cur *snapv1.SnapshotPolicySpec) Result {
	var r Result
	if cur.Adoption == "" {
		return r
	}
	msg := "not supported by snapflow yet: snapflow does not scan repositories for snapshots it did not take, so there is nothing to adopt; remove it"
	if prev != nil && prev.Adoption == cur.Adoption {
		r.Warn("spec.adoption: %s (this SnapshotPolicy was stored with it, so it is kept, and does nothing)", msg)
		return r
	}
	r.Also(fieldErr("spec.adoption", "%s", msg))
	return r
}
