package validate

import (
	"fmt"
	"sort"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
)

// RepositoryRefs are an object's repository references by field path.
type RepositoryRefs map[string]snapv1.RepositoryRef

// PolicyRepositoryRefs are a SnapshotPolicy's targets by field path.
func PolicyRepositoryRefs(s *snapv1.SnapshotPolicySpec) RepositoryRefs {
	if s == nil {
		return nil
	}
	refs := RepositoryRefs{}
	if s.Repository != nil {
		refs["spec.repository"] = *s.Repository
	}
	for i, ref := range s.Repositories {
		refs[fmt.Sprintf("spec.repositories[%d]", i)] = ref
	}
	return refs
}

// has says whether ref is among refs, wherever it stood: removing another
// entry of a list moves an unchanged one to a new index.
func (refs RepositoryRefs) has(ref snapv1.RepositoryRef) bool {
	for _, r := range refs {
		if r == ref {
			return true
		}
	}
	return false
}

// SingleRepositoryRef is the one spec.repository of a Restore, or of a
// Snapshot that names no policy (a policy's Snapshot writes to a repository
// of that policy's, which admission checked there).
func SingleRepositoryRef(ref *snapv1.RepositoryRef) RepositoryRefs {
	if ref == nil {
		return nil
	}
	return RepositoryRefs{"spec.repository": *ref}
}

// ForeignRepositories refuses a reference to a Repository of another
// namespace. A Repository serves its own namespace only: its password and
// backend credentials are never copied out of it, and the functions refuse
// such a run when it starts; refusing it here says so at apply time instead
// of on the first backup. Its own namespace, spelled out, is accepted. prev
// are the stored object's references on an update: one stored before this
// rule is warned about while unchanged, so finalizers can still be written.
// An object whose namespace is not known (offline) is not judged.
func ForeignRepositories(kind, ns string, prev, cur RepositoryRefs) Result {
	var r Result
	if ns == "" {
		return r
	}
	paths := make([]string, 0, len(cur))
	for p := range cur {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, path := range paths {
		ref := cur[path]
		if ref.Kind == snapv1.KindClusterRepository || ref.Namespace == "" || ref.Namespace == ns {
			continue
		}
		msg := fmt.Sprintf("names Repository %q of namespace %q, but this %s is in namespace %q: a Repository serves only its own namespace (its password and credentials are never copied out of it), so no run here could open it; remove namespace to use a Repository of %q, or use a ClusterRepository whose allowedNamespaces admit %q",
			ref.Name, ref.Namespace, kind, ns, ns, ns)
		if prev.has(ref) {
			r.Warn("%s.namespace: %s (this %s was stored with it, and its runs are refused when they start)", path, msg, kind)
			continue
		}
		r.Also(fieldErr(path+".namespace", "%s", msg))
	}
	return r
}
