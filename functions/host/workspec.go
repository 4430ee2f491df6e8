package host

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CreateWorkSpec creates a mover Job's work spec ConfigMap. One an
// earlier attempt left under the same name with other content (the
// repository was fixed, the stream's pod changed) is replaced, never
// updated (the functions need no right to rewrite ConfigMaps): the Job
// pins the digest of what it runs, and would refuse the old one. A
// ConfigMap of that name that is not the same owner's is left alone and
// reported.
func CreateWorkSpec(ctx context.Context, c client.Client, cm *corev1.ConfigMap) error {
	err := c.Create(ctx, cm)
	if !apierrors.IsAlreadyExists(err) {
		if err != nil {
			return fmt.Errorf("create the work spec ConfigMap %s/%s: %w", cm.Namespace, cm.Name, err)
		}
		return nil
	}
	var old corev1.ConfigMap
	if err := c.Get(ctx, client.ObjectKeyFromObject(cm), &old); err != nil {
		return fmt.Errorf("read the work spec ConfigMap %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	if maps.Equal(old.Data, cm.Data) {
		return nil
	}
	if !sameOwner(&old, cm) {
		return fmt.Errorf("ConfigMap %s/%s exists and is not this run's work spec; delete it and the run starts", cm.Namespace, cm.Name)
	}
	uid := old.UID
	if err := c.Delete(ctx, &old, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("replace the work spec ConfigMap %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	if err := c.Create(ctx, cm); err != nil {
		return fmt.Errorf("create the work spec ConfigMap %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	return nil
}

func sameOwner(a, b *corev1.ConfigMap) bool {
	for _, x := range a.OwnerReferences {
		for _, y := range b.OwnerReferences {
			if x.UID == y.UID {
				return true
			}
		}
	}
	return false
}
