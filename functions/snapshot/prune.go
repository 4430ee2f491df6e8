package snapshot

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/kubemeta"
)

// Prune marks s as one of snapflow's own deletions (by is a
// wellknown.PrunedBy* value, which the mass-deletion breaker never counts)
// and deletes it. The mark is a merge patch of one annotation, so a status
// write racing with it cannot make it fail; the delete is guarded by UID.
func Prune(ctx context.Context, c client.Client, s *snapv1.Snapshot, by string) error {
	if s.Annotations[wellknown.AnnotationPrunedBy] != by {
		patch, err := kubemeta.AnnotationsPatch(map[string]string{wellknown.AnnotationPrunedBy: by})
		if err != nil {
			return err
		}
		if err := c.Patch(ctx, s, patch); err != nil {
			return client.IgnoreNotFound(err)
		}
	}
	uid := s.UID
	return client.IgnoreNotFound(c.Delete(ctx, s, client.Preconditions{UID: &uid}))
}
