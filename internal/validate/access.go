package validate

import (
	"context"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
)

// DataAccess checks that namespace consumerNS may read or delete data in
// the repository ref names: a Repository of its own namespace, or a
// ClusterRepository whose allowedNamespaces admit it. Functions run it on
// the live objects right before a mover touches data, because the ref
// they act on is read from status, which movers write: a status naming
// another namespace's repository must not lend its keys.
func DataAccess(ctx context.Context, lk Lookup, consumerNS string, ref snapv1.RepositoryRef) Result {
	var r Result
	switch ref.Kind {
	case snapv1.KindClusterRepository:
		return Tenancy(ctx, lk, consumerNS, &ref)
	case "", snapv1.KindRepository:
		if ref.Namespace != "" && ref.Namespace != consumerNS {
			r.Also(fieldErr("namespace", "Repository %s/%s belongs to namespace %q; namespace %q may use only its own Repositories, or a ClusterRepository that allows it", ref.Namespace, ref.Name, ref.Namespace, consumerNS))
		}
	default:
		r.Also(fieldErr("kind", "repository kind %q is neither Repository nor ClusterRepository", ref.Kind))
	}
	return r
}
