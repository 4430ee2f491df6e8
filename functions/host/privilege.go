package host

import (
	"context"
	"errors"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/moverjob"
	"github.com/snapflow/snapflow/internal/privilege"
)

// Permit decides whether a pod that needs reasons (privilege.Pod's list)
// may run in namespace ns: nil when it may, a *privilege.NotPermitted when
// the namespace has not opted in. The opt-in is read from the API server,
// not a cache, and only when there are reasons: it decides whether a pod
// may run as root.
func Permit(ctx context.Context, c client.Client, ns string, reasons []string) error {
	if len(reasons) == 0 {
		return nil
	}
	var obj corev1.Namespace
	if err := c.Get(ctx, client.ObjectKey{Name: ns}, &obj); err != nil {
		return fmt.Errorf("read namespace %s for its %s opt-in: %w", ns, wellknown.AnnotationPrivilegedMovers, err)
	}
	if obj.Annotations[wellknown.AnnotationPrivilegedMovers] != "true" {
		return &privilege.NotPermitted{Namespace: ns, Reasons: reasons}
	}
	return nil
}

// BuildMoverJob builds a mover Job through the privilege gate, asking the
// namespace for its opt-in only when the pod needs it. A pod the namespace
// does not allow comes back as a *privilege.NotPermitted error.
func BuildMoverJob(ctx context.Context, c client.Client, p moverjob.Params) (*batchv1.Job, *corev1.ConfigMap, error) {
	job, cm, err := moverjob.Build(p)
	var refused *privilege.NotPermitted
	if !errors.As(err, &refused) || p.PrivilegedAllowed {
		return job, cm, err
	}
	if err := Permit(ctx, c, p.Namespace, refused.Reasons); err != nil {
		return nil, nil, err
	}
	p.PrivilegedAllowed = true
	return moverjob.Build(p)
}

// Workload finds, in namespace ns, the workload whose identity a mover
// inherits (privilege.FindWorkload over the pods read fresh from the API
// server). None to inherit from is not an error: it comes back as a
// *privilege.NotInherited saying why, and the mover keeps its explicit and
// default settings.
func Workload(ctx context.Context, c client.Client, ns string, from *snapv1.InheritSecurityContextFrom, claim string) (*privilege.Workload, *privilege.NotInherited, error) {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		return nil, nil, fmt.Errorf("list the pods of namespace %s to find the workload whose security context the mover inherits: %w", ns, err)
	}
	w, err := privilege.FindWorkload(from, claim, pods.Items)
	var ni *privilege.NotInherited
	if errors.As(err, &ni) {
		return nil, ni, nil
	}
	return w, nil, err
}
