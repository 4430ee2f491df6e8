// Package statuspatch writes an object's status the one way every snapflow
// writer does: re-read the live object, apply the change, and send only
// the difference as a merge patch guarded by the resourceVersion, retrying
// on conflict. Fields this build does not know (written by another
// snapflow version) survive, and concurrent writers never clobber each other.
package statuspatch

import (
	"context"
	"reflect"

	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Update applies mutate to the live object at key and patches its status.
// A mutate that returns Skip, or changes nothing, writes nothing. A missing object is not an error.
func Update[T client.Object](ctx context.Context, c client.Client, key client.ObjectKey, newObj func() T, mutate func(T) error) error {
	return client.IgnoreNotFound(Patch(ctx, c, key, newObj, mutate))
}

// Patch is Update for a writer that must know when the object is gone
// (a report must not go into the void): it returns the not-found error.
// Any other error of mutate ends it and is returned as it is.
func Patch[T client.Object](ctx context.Context, c client.Client, key client.ObjectKey, newObj func() T, mutate func(T) error) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		live := newObj()
		if err := c.Get(ctx, key, live); err != nil {
			return err
		}
		orig := live.DeepCopyObject().(client.Object)
		if err := mutate(live); err != nil {
			return err
		}
		if reflect.DeepEqual(orig, live) {
			// Nothing changed: a patch would cost the API server a full
			// update path (and every sweep writes most objects it reads).
			// reflect, not semantic, equality: nil and empty differ in a
			// patch, so such a change is still written.
			return nil
		}
		return c.Status().Patch(ctx, live, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
	})
	if err == Skip {
		return nil
	}
	return err
}

// Skip, returned by a mutate, ends Update without writing.
var Skip = skip{}

type skip struct{}

func (skip) Error() string { return "nothing to write" }
