package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/snapflow/snapflow/internal/doctor"
)

// deployedFunctions finds the chart's functions: Knative Services when
// Knative Serving is installed, Deployments otherwise.
func deployedFunctions(ctx context.Context, c client.Client) ([]doctor.Workload, string) {
	var out []doctor.Workload
	sel := client.HasLabels{functionLabel}
	var deps appsv1.DeploymentList
	if err := c.List(ctx, &deps, sel); err != nil {
		return nil, fmt.Sprintf("cannot list Deployments (%v)", err)
	}
	for _, d := range deps.Items {
		out = append(out, deploymentWorkload(&d))
	}
	var ksvcs unstructured.UnstructuredList
	ksvcs.SetAPIVersion("serving.knative.dev/v1")
	ksvcs.SetKind("ServiceList")
	switch err := c.List(ctx, &ksvcs, sel); {
	case meta.IsNoMatchError(err) || apierrors.IsNotFound(err):
	case err != nil:
		return out, fmt.Sprintf("cannot list Knative Services (%v)", err)
	}
	for _, s := range ksvcs.Items {
		fn := readyObject("Knative Service", &s)
		fn.ServiceAccount, _, _ = unstructured.NestedString(s.Object, "spec", "template", "spec", "serviceAccountName")
		if fn.ServiceAccount == "" {
			fn.ServiceAccount = "default"
		}
		out = append(out, fn)
	}
	return out, ""
}

func deploymentWorkload(d *appsv1.Deployment) doctor.Workload {
	w := doctor.Workload{Kind: "Deployment", Namespace: d.Namespace, Name: d.Name, Ready: d.Status.AvailableReplicas > 0, ServiceAccount: d.Spec.Template.Spec.ServiceAccountName}
	if w.ServiceAccount == "" {
		w.ServiceAccount = "default"
	}
	switch {
	case d.Spec.Replicas != nil && *d.Spec.Replicas == 0:
		w.Ready, w.Why = false, "scaled to 0 replicas"
	case !w.Ready:
		w.Why = fmt.Sprintf("%d of %d replicas available", d.Status.AvailableReplicas, d.Status.Replicas)
		// The controller says why pods are missing (a quota, an account
		// that does not exist) in these conditions.
		for _, c := range d.Status.Conditions {
			if (c.Type == appsv1.DeploymentReplicaFailure && c.Status == corev1.ConditionTrue) ||
				(c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse) {
				w.Why += "; " + c.Message
			}
		}
	}
	return w
}

// readyObject judges a Knative object by its Ready condition.
func readyObject(kind string, u *unstructured.Unstructured) doctor.Workload {
	w := doctor.Workload{Kind: kind, Namespace: u.GetNamespace(), Name: u.GetName(), Why: "no Ready condition yet"}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, raw := range conds {
		cm, _ := raw.(map[string]any)
		if cm["type"] == "Ready" {
			w.Ready = cm["status"] == "True"
			w.Why = strings.Trim(fmt.Sprintf("%v: %v", orEmpty(cm["reason"]), orEmpty(cm["message"])), ": ")
		}
	}
	return w
}

func orEmpty(v any) any {
	if v == nil {
		return ""
	}
	return v
}

// sourceComponents are the chart's event-source Deployments.
var sourceComponents = []string{"kube-source", "s3-source"}

// deployedSources finds what feeds the functions: the kube and S3 source
// Deployments, and Knative's ApiServerSources and PingSources, by the
// chart's part-of label.
func deployedSources(ctx context.Context, c client.Client) ([]doctor.Workload, string) {
	var out []doctor.Workload
	var deps appsv1.DeploymentList
	if err := c.List(ctx, &deps, client.MatchingLabels{"app.kubernetes.io/part-of": "snapflow"}); err != nil {
		return nil, fmt.Sprintf("cannot list Deployments (%v)", err)
	}
	for i := range deps.Items {
		comp := deps.Items[i].Labels["app.kubernetes.io/component"]
		if !slices.Contains(sourceComponents, comp) {
			continue
		}
		w := deploymentWorkload(&deps.Items[i])
		if comp == "s3-source" {
			w.ServiceAccount = "" // it calls no Kubernetes API, and the chart binds it nothing
		}
		out = append(out, w)
	}
	for _, kind := range []string{"ApiServerSource", "PingSource"} {
		var l unstructured.UnstructuredList
		l.SetAPIVersion("sources.knative.dev/v1")
		l.SetKind(kind + "List")
		switch err := c.List(ctx, &l, client.MatchingLabels{"app.kubernetes.io/part-of": "snapflow"}); {
		case meta.IsNoMatchError(err) || apierrors.IsNotFound(err):
			continue
		case err != nil:
			return out, fmt.Sprintf("cannot list %ss (%v)", kind, err)
		}
		for i := range l.Items {
			w := readyObject(kind, &l.Items[i])
			if kind == "ApiServerSource" {
				w.ServiceAccount, _, _ = unstructured.NestedString(l.Items[i].Object, "spec", "serviceAccountName")
			}
			out = append(out, w)
		}
	}
	return out, ""
}

// checkBindings fills each workload's RBAC finding: its account must be a
// subject of at least one binding, and every binding naming it must point
// at a role that exists. It returns why it could not look.
func checkBindings(ctx context.Context, c client.Client, groups ...[]doctor.Workload) string {
	var crbs rbacv1.ClusterRoleBindingList
	var rbs rbacv1.RoleBindingList
	var crs rbacv1.ClusterRoleList
	var roles rbacv1.RoleList
	for what, l := range map[string]client.ObjectList{"ClusterRoleBindings": &crbs, "RoleBindings": &rbs, "ClusterRoles": &crs, "Roles": &roles} {
		if err := c.List(ctx, l); err != nil {
			return fmt.Sprintf("cannot list %s (%v)", what, err)
		}
	}
	clusterRoles := map[string]bool{}
	for _, r := range crs.Items {
		clusterRoles[r.Name] = true
	}
	nsRoles := map[string]bool{}
	for _, r := range roles.Items {
		nsRoles[r.Namespace+"/"+r.Name] = true
	}
	exists := func(ns string, ref rbacv1.RoleRef) bool {
		if ref.Kind == "ClusterRole" {
			return clusterRoles[ref.Name]
		}
		return nsRoles[ns+"/"+ref.Name]
	}
	// names says whether a binding's subjects hold the account ns/sa; a
	// RoleBinding's subject without a namespace is of the binding's own.
	names := func(subjects []rbacv1.Subject, bindingNS, ns, sa string) bool {
		return slices.ContainsFunc(subjects, func(s rbacv1.Subject) bool {
			sns := s.Namespace
			if sns == "" {
				sns = bindingNS
			}
			return s.Kind == rbacv1.ServiceAccountKind && s.Name == sa && sns == ns
		})
	}
	for _, ws := range groups {
		for i := range ws {
			w := &ws[i]
			if w.ServiceAccount == "" {
				continue
			}
			bound := 0
			var missing []string
			for _, b := range crbs.Items {
				if names(b.Subjects, "", w.Namespace, w.ServiceAccount) {
					bound++
					if !exists("", b.RoleRef) {
						missing = append(missing, fmt.Sprintf("ClusterRoleBinding %s names %s %s, which does not exist", b.Name, b.RoleRef.Kind, b.RoleRef.Name))
					}
				}
			}
			for _, b := range rbs.Items {
				if names(b.Subjects, b.Namespace, w.Namespace, w.ServiceAccount) {
					bound++
					if !exists(b.Namespace, b.RoleRef) {
						missing = append(missing, fmt.Sprintf("RoleBinding %s/%s names %s %s, which does not exist", b.Namespace, b.Name, b.RoleRef.Kind, b.RoleRef.Name))
					}
				}
			}
			switch {
			case len(missing) > 0:
				w.RBAC = strings.Join(missing, "; ")
			case bound == 0:
				w.RBAC = "no RoleBinding or ClusterRoleBinding names"
			}
		}
	}
	return ""
}
