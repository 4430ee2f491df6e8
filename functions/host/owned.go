package host

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/snapflow/snapflow/api/wellknown"
)

// ErrNotOwned means the live object is not one snapflow made for the
// owner: a name read from status (which movers write) must never be enough
// to delete or rewire someone's object.
var ErrNotOwned = errors.New("not owned by this object")

// Owned says whether obj is controlled by owner and carries snapflow's
// managed-by label: both are set when snapflow creates it, and a name read
// from status proves neither.
func Owned(obj, owner metav1.Object) bool {
	return metav1.IsControlledBy(obj, owner) && obj.GetLabels()[wellknown.LabelManagedBy] == wellknown.ManagedByValue
}

// DeleteOwned re-reads obj (its namespace and name set) and deletes it only
// when owner controls it, with a UID precondition so an object recreated
// under the same name in between is never hit. It reports whether it
// deleted; a missing object is not an error, a foreign one is ErrNotOwned.
func DeleteOwned(ctx context.Context, c client.Client, obj client.Object, owner metav1.Object, opts ...client.DeleteOption) (bool, error) {
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return false, nil
		}
		return false, err
	}
	if !Owned(obj, owner) {
		return false, fmt.Errorf("%s/%s: %w", obj.GetNamespace(), obj.GetName(), ErrNotOwned)
	}
	uid := obj.GetUID()
	if err := c.Delete(ctx, obj, append([]client.DeleteOption{client.Preconditions{UID: &uid}}, opts...)...); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return false, nil // gone, or replaced since the read: not ours any more
		}
		return false, err
	}
	return true, nil
}
