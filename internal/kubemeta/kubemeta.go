// Package kubemeta handles objects' metadata alone: it lists it, for the
// checks that need names and labels and not the objects (the API server
// sends less, and the reader keeps less), and patches annotations.
package kubemeta

import (
	"context"
	"encoding/json"

	"k8s.io/apimachinery/pkg/types"

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

// AnnotationsPatch is a merge patch that sets ann on an object and
// touches nothing else (values are JSON-encoded, whatever they hold).
func AnnotationsPatch(ann map[string]string) (client.Patch, error) {
	b, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
	if err != nil {
		return nil, err
	}
	return client.RawPatch(types.MergePatchType, b), nil
}
