package repository

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/internal/statuspatch"
)

// UpdateStatus applies mutate to the live repository ref points at (from
// consumer namespace ns, as Get) and patches its status the statuspatch
// way: only the difference, guarded by the resourceVersion, retried on
// conflict, nothing when mutate changes nothing or returns
// statuspatch.Skip. A repository that is gone is not an error.
func UpdateStatus(ctx context.Context, c client.Client, installNS string, ref snapv1.RepositoryRef, ns string, mutate func(*Object) error) error {
	newObj := func() client.Object { return &snapv1.ClusterRepository{} }
	if ref.Kind != snapv1.KindClusterRepository {
		newObj = func() client.Object { return &snapv1.Repository{} }
	}
	return statuspatch.Update(ctx, c, keyOf(ref, ns), newObj, func(live client.Object) error {
		var o *Object
		switch r := live.(type) {
		case *snapv1.ClusterRepository:
			o = FromCluster(r, installNS)
		case *snapv1.Repository:
			o = FromRepository(r)
		}
		o.Ref.Namespace = ref.Namespace
		return mutate(o)
	})
}
