package cli

import (
	"context"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/snapflow/snapflow/internal/doctor"
	"github.com/snapflow/snapflow/internal/scheme"
)

// A component's account must be named by a binding, and every binding
// naming it must point at a role that exists.
func TestCheckBindings(t *testing.T) {
	sa := func(ns, name string) rbacv1.Subject {
		return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}
	}
	objs := []client.Object{
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "snapflow-snapshot"}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "snapflow-snapshot"}, Subjects: []rbacv1.Subject{sa("snapflow", "snapshot")},
			RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "snapflow-snapshot"}},
		// A RoleBinding's subject without a namespace is of the binding's.
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "snapflow", Name: "record"}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "snapflow", Name: "record"}, Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "schedule"}},
			RoleRef: rbacv1.RoleRef{Kind: "Role", Name: "record"}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "snapflow-restore"}, Subjects: []rbacv1.Subject{sa("snapflow", "restore")},
			RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "snapflow-restore"}},
		// The same name in another namespace is another account.
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere"}, Subjects: []rbacv1.Subject{sa("other", "cleanup")},
			RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "snapflow-snapshot"}},
	}
	b := fake.NewClientBuilder().WithScheme(scheme.New())
	for _, o := range objs {
		b = b.WithObjects(o)
	}
	ws := []doctor.Workload{
		{Kind: "Deployment", Namespace: "snapflow", Name: "snapshot", ServiceAccount: "snapshot"},
		{Kind: "Deployment", Namespace: "snapflow", Name: "schedule", ServiceAccount: "schedule"},
		{Kind: "Deployment", Namespace: "snapflow", Name: "restore", ServiceAccount: "restore"},
		{Kind: "Deployment", Namespace: "snapflow", Name: "cleanup", ServiceAccount: "cleanup"},
		{Kind: "PingSource", Namespace: "snapflow", Name: "tick"},
	}
	if skipped := checkBindings(context.Background(), b.Build(), ws); skipped != "" {
		t.Fatal(skipped)
	}
	for i, want := range []string{"", "", "names ClusterRole snapflow-restore, which does not exist", "no RoleBinding or ClusterRoleBinding names", ""} {
		if got := ws[i].RBAC; (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("%s: %q, want %q", ws[i].Name, got, want)
		}
	}
}
