// Package kubemeta lists objects' metadata only, for the checks that need
// names and labels and not the objects: the API server sends less, and
// the reader keeps less.
package kubemeta

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// PVCs lists the metadata of the PersistentVolumeClaims in namespace.
func PVCs(ctx context.Context, r client.Reader, namespace string) ([]metav1.ObjectMeta, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaimList"))
	if err := r.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	out := make([]metav1.ObjectMeta, len(list.Items))
	for i := range list.Items {
		out[i] = list.Items[i].ObjectMeta
	}
	return out, nil
}
