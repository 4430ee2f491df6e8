package runtime

import (
	"context"
	"errors"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/moverjob"
	"github.com/snapflow/snapflow/internal/privilege"
)

// PrivilegedAllowed reads namespace ns's privileged-movers opt-in from the
// API server, not a cache: it decides whether a pod may run as root.
func PrivilegedAllowed(ctx context.Context, c client.Client, ns string) (bool, error) {
	var obj corev1.Namespace
	if err := c.Get(ctx, client.ObjectKey{Name: ns}, &obj); err != nil {
		return false, fmt.Errorf("read namespace %s for its %s opt-in: %w", ns, wellknown.AnnotationPrivilegedMovers, err)
	}
	return obj.Annotations[wellknown.AnnotationPrivilegedMovers] == "true", nil
}

// BuildMoverJob builds a mover Job through the privilege gate, asking the
// namespace for its opt-in only when the pod needs it. A pod the namespace
// does not allow comes back as a *privilege.NotPermitted error.
func BuildMoverJob(ctx context.Context, c client.Client, p moverjob.Params) (*batchv1.Job, *corev1.ConfigMap, error) {
	job, cm, err := moverjob.Build(p)
	if !errors.Is(err, privilege.ErrNotPermitted) || p.PrivilegedAllowed {
		return job, cm, err
	}
	allowed, lerr := PrivilegedAllowed(ctx, c, p.Namespace)
	if lerr != nil {
		return nil, nil, lerr
	}
	if !allowed {
		return nil, nil, err
	}
	p.PrivilegedAllowed = true
	return moverjob.Build(p)
}
