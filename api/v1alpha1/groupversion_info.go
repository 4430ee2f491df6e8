// Package v1alpha1 holds the Kopiur v1alpha1 API (group kopiur.home-operations.com)
// as snapflow implements it. Manifests written for Kopiur apply unchanged.
//
// +kubebuilder:object:generate=true
// +groupName=kopiur.home-operations.com
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the API group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "kopiur.home-operations.com", Version: "v1alpha1"}

	// SchemeBuilder registers the kinds with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds every kind of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
