// Package scheme builds the runtime.Scheme every snapflow component uses:
// the built-in kinds plus snapflow's own.
package scheme

import (
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
)

// New returns a scheme with the built-in kinds and snapflow's kinds.
func New() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := snapv1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}
