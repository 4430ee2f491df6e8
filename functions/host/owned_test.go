package host

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/snapflow/snapflow/api/wellknown"
)

func TestDeleteOwned(t *testing.T) {
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "owner", UID: types.UID("owner-uid")}}
	ctl := true
	ref := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: owner.UID, Controller: &ctl}
	managed := map[string]string{wellknown.LabelManagedBy: wellknown.ManagedByValue}
	for _, tc := range []struct {
		name    string
		obj     *corev1.PersistentVolumeClaim
		deleted bool
		err     error
	}{
		{name: "missing object", obj: nil},
		{name: "owned and labelled", obj: pvc(managed, ref), deleted: true},
		{name: "a user's PVC of the same name", obj: pvc(nil), err: ErrNotOwned},
		{name: "labelled but another controller", obj: pvc(managed, metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "other", UID: "other", Controller: &ctl}), err: ErrNotOwned},
		{name: "owner reference but not snapflow's label", obj: pvc(nil, ref), err: ErrNotOwned},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := fake.NewClientBuilder()
			if tc.obj != nil {
				b = b.WithObjects(tc.obj)
			}
			c := b.Build()
			target := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "data"}}
			deleted, err := DeleteOwned(context.Background(), c, target, owner)
			if deleted != tc.deleted || !errors.Is(err, tc.err) {
				t.Fatalf("DeleteOwned = %v, %v; want %v, %v", deleted, err, tc.deleted, tc.err)
			}
			getErr := c.Get(context.Background(), client.ObjectKey{Namespace: "a", Name: "data"}, &corev1.PersistentVolumeClaim{})
			if gone := apierrors.IsNotFound(getErr); gone != (tc.deleted || tc.obj == nil) {
				t.Fatalf("object gone = %v after DeleteOwned (deleted %v)", gone, tc.deleted)
			}
		})
	}
}

func pvc(labels map[string]string, refs ...metav1.OwnerReference) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "data", UID: "pvc-uid", Labels: labels, OwnerReferences: refs}}
}
