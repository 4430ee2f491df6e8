// Package execgrant lends one mover run the right to exec into one pod: a
// stream source's command runs in the workload, and the mover that reads
// its output must reach pods/exec. The run gets a ServiceAccount of its
// own and a Role naming that pod alone, bound to it; all three carry the
// run's owner reference and are revoked when the run ends. No mover ever
// holds a standing right: the shared mover ServiceAccount mounts no token.
package execgrant

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/snapflow/snapflow/api/wellknown"
)

// ErrGrant means the grant could not be made: an object of its name is
// someone else's, or snapflow may not create it.
var ErrGrant = errors.New("the run's exec grant could not be made")

// Grant is one run's right: ServiceAccount, Role and RoleBinding Name in
// Namespace let exec into Pod.
type Grant struct {
	Name, Namespace, Pod string
	Owner                metav1.OwnerReference
	// ImagePullSecrets are the mover ServiceAccount's, which the run's
	// account replaces.
	ImagePullSecrets []corev1.LocalObjectReference
}

// Objects renders the grant.
func Objects(g Grant) (*corev1.ServiceAccount, *rbacv1.Role, *rbacv1.RoleBinding) {
	om := metav1.ObjectMeta{Name: g.Name, Namespace: g.Namespace, OwnerReferences: []metav1.OwnerReference{g.Owner},
		Labels: map[string]string{wellknown.LabelManagedBy: wellknown.ManagedByValue, wellknown.LabelExecGrantFor: g.Name}}
	sa := &corev1.ServiceAccount{ObjectMeta: *om.DeepCopy(), ImagePullSecrets: g.ImagePullSecrets}
	role := &rbacv1.Role{ObjectMeta: *om.DeepCopy(), Rules: rules(g.Pod)}
	rb := &rbacv1.RoleBinding{ObjectMeta: *om.DeepCopy(),
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: g.Name, Namespace: g.Namespace}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: g.Name}}
	return sa, role, rb
}

// rules lets exec into pod and nothing else: get for the WebSocket
// upgrade of API servers that authorize it as get, create otherwise.
func rules(pod string) []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods/exec"}, Verbs: []string{"get", "create"}, ResourceNames: []string{pod}}}
}

// Ensure makes the grant, or brings this run's own to g (a retry may run
// in another pod of the workload). An object of the same name that is not
// this run's is never adopted.
func Ensure(ctx context.Context, c client.Client, g Grant) error {
	sa, role, rb := Objects(g)
	for _, want := range []client.Object{sa, role, rb} {
		if err := ensure(ctx, c, g, want); err != nil {
			return err
		}
	}
	return nil
}

func ensure(ctx context.Context, c client.Client, g Grant, want client.Object) error {
	kind := kindOf(want)
	err := c.Create(ctx, want)
	if err == nil {
		return nil
	}
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("%w: snapflow may not create %s %s/%s (%v); install the chart with functions.snapshot.workloadExecHooks=true, which grants the snapshot function what stream sources need", ErrGrant, kind, g.Namespace, g.Name, err)
	}
	if !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create %s %s/%s: %w", kind, g.Namespace, g.Name, err)
	}
	have := want.DeepCopyObject().(client.Object)
	if err := c.Get(ctx, client.ObjectKeyFromObject(want), have); err != nil {
		return fmt.Errorf("read %s %s/%s: %w", kind, g.Namespace, g.Name, err)
	}
	if !ours(have, g) {
		return fmt.Errorf("%w: %s %s/%s exists and is not this run's (it lacks label %s=%s and the run's owner reference); delete it and the run starts", ErrGrant, kind, g.Namespace, g.Name, wellknown.LabelExecGrantFor, g.Name)
	}
	switch h := have.(type) {
	case *rbacv1.Role:
		if !reflect.DeepEqual(h.Rules, rules(g.Pod)) {
			h.Rules = rules(g.Pod)
			if err := c.Update(ctx, h); err != nil {
				return fmt.Errorf("update Role %s/%s: %w", g.Namespace, g.Name, err)
			}
		}
	case *rbacv1.RoleBinding:
		w := want.(*rbacv1.RoleBinding)
		if !reflect.DeepEqual(h.Subjects, w.Subjects) || h.RoleRef != w.RoleRef {
			return fmt.Errorf("%w: RoleBinding %s/%s binds something else than this run's grant; delete it and the run starts", ErrGrant, g.Namespace, g.Name)
		}
	}
	return nil
}

func ours(o client.Object, g Grant) bool {
	if o.GetLabels()[wellknown.LabelExecGrantFor] != g.Name {
		return false
	}
	for _, r := range o.GetOwnerReferences() {
		if r.UID == g.Owner.UID {
			return true
		}
	}
	return false
}

// Revoke deletes the grant of run name in ns: the binding first, so the
// right ends with the first delete. Objects of that name that are not a
// grant's are left alone.
func Revoke(ctx context.Context, c client.Client, ns, name string) error {
	om := metav1.ObjectMeta{Namespace: ns, Name: name}
	for _, o := range []client.Object{&rbacv1.RoleBinding{ObjectMeta: om}, &rbacv1.Role{ObjectMeta: om}, &corev1.ServiceAccount{ObjectMeta: om}} {
		err := c.Get(ctx, client.ObjectKeyFromObject(o), o)
		if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
			// Forbidden: stream sources are off, so no grant was made.
			continue
		}
		if err != nil {
			return fmt.Errorf("read the exec grant %s/%s: %w", ns, name, err)
		}
		if o.GetLabels()[wellknown.LabelExecGrantFor] != name {
			continue
		}
		uid := o.GetUID()
		if err := c.Delete(ctx, o, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("revoke the exec grant %s/%s: %w", ns, name, err)
		}
	}
	return nil
}

func kindOf(o client.Object) string {
	switch o.(type) {
	case *corev1.ServiceAccount:
		return "ServiceAccount"
	case *rbacv1.Role:
		return "Role"
	}
	return "RoleBinding"
}
