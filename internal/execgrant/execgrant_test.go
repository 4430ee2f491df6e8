package execgrant

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestGrantIsOnePodForOneRun(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).Build()
	g := Grant{Name: "dump-1234", Namespace: "db", Pod: "pg-0", Owner: metav1.OwnerReference{APIVersion: "kopiur.home-operations.com/v1alpha1", Kind: "Snapshot", Name: "dump", UID: "u1"}}
	if err := Ensure(ctx, c, g); err != nil {
		t.Fatal(err)
	}
	var role rbacv1.Role
	if err := c.Get(ctx, client.ObjectKey{Namespace: "db", Name: g.Name}, &role); err != nil {
		t.Fatal(err)
	}
	if len(role.Rules) != 1 || len(role.Rules[0].ResourceNames) != 1 || role.Rules[0].ResourceNames[0] != "pg-0" || role.Rules[0].Resources[0] != "pods/exec" {
		t.Fatalf("rules %+v, want pods/exec on pg-0 alone", role.Rules)
	}
	var rb rbacv1.RoleBinding
	if err := c.Get(ctx, client.ObjectKey{Namespace: "db", Name: g.Name}, &rb); err != nil {
		t.Fatal(err)
	}
	if len(rb.Subjects) != 1 || rb.Subjects[0].Kind != "ServiceAccount" || rb.Subjects[0].Name != g.Name || rb.RoleRef.Name != g.Name {
		t.Fatalf("binding %+v", rb)
	}
	// A retry that resolved another pod of the workload moves the grant.
	g.Pod = "pg-1"
	if err := Ensure(ctx, c, g); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "db", Name: g.Name}, &role); err != nil || role.Rules[0].ResourceNames[0] != "pg-1" {
		t.Fatalf("rules %+v (%v), want pg-1", role.Rules, err)
	}
	// Another run's (or a tenant's) objects are never adopted.
	other := g
	other.Owner.UID = "u2"
	if err := Ensure(ctx, c, other); !errors.Is(err, ErrGrant) {
		t.Fatalf("another owner's grant: %v", err)
	}
	if err := Revoke(ctx, c, "db", g.Name); err != nil {
		t.Fatal(err)
	}
	for _, o := range []client.Object{&rbacv1.RoleBinding{}, &rbacv1.Role{}, &corev1.ServiceAccount{}} {
		if err := c.Get(ctx, client.ObjectKey{Namespace: "db", Name: g.Name}, o); !apierrors.IsNotFound(err) {
			t.Errorf("%T survived the revoke: %v", o, err)
		}
	}
	// A ServiceAccount that was never a grant stays.
	foreign := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: g.Name}}
	if err := c.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	if err := Revoke(ctx, c, "db", g.Name); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(foreign), foreign); err != nil {
		t.Fatalf("a user's ServiceAccount was deleted: %v", err)
	}
}
