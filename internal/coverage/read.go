package coverage

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/policysource"
	"github.com/snapflow/snapflow/internal/volumepolicy"
)

// Read lists what the verdicts need, in ns ("" for all), through c: the
// CLI's client, or the exporter's watch cache. global names the global
// volume-policy ConfigMap as NAMESPACE/NAME ("" for none); it must be
// readable. A resourcePolicy ConfigMap the reader may not read is a
// warning (its PVCs are judged without its skip rules); one that is
// missing or invalid makes its policy Failing, as every run of it fails.
func Read(ctx context.Context, c client.Reader, ns, global string) (Input, []string, error) {
	var in Input
	var warnings []string
	var pvcs corev1.PersistentVolumeClaimList
	var pols snapv1.SnapshotPolicyList
	var scheds snapv1.SnapshotScheduleList
	for _, l := range []client.ObjectList{&pvcs, &pols, &scheds} {
		if err := c.List(ctx, l, client.InNamespace(ns)); err != nil {
			return in, nil, fmt.Errorf("list %T: %w", l, err)
		}
	}
	in.PVCs, in.Policies, in.Schedules = pvcs.Items, pols.Items, scheds.Items
	// Namespace annotations: one namespace, or all of them.
	if ns != "" {
		var n corev1.Namespace
		if err := c.Get(ctx, client.ObjectKey{Name: ns}, &n); err == nil {
			in.Namespaces = []corev1.Namespace{n}
		} else if !apierrors.IsNotFound(err) {
			warnings = append(warnings, fmt.Sprintf("namespace %s: %v (its %s annotation is not considered)", ns, err, wellknown.AnnotationBackupNotRequired))
		}
	} else {
		var nl corev1.NamespaceList
		if err := c.List(ctx, &nl); err != nil {
			warnings = append(warnings, fmt.Sprintf("list namespaces: %v (their annotations are not considered)", err))
		}
		in.Namespaces = nl.Items
	}
	// Volume policies look at the bound volume: one listing, not a read
	// per claim.
	in.PVs = map[string]*corev1.PersistentVolume{}
	var pvs corev1.PersistentVolumeList
	if err := c.List(ctx, &pvs); err != nil {
		warnings = append(warnings, fmt.Sprintf("list PersistentVolumes: %v (volume-policy rules on volumes are judged from the claims alone)", err))
	}
	for i := range pvs.Items {
		in.PVs[pvs.Items[i].Name] = &pvs.Items[i]
	}
	in.Recipes, in.RecipeErrors = map[string]*volumepolicy.Document{}, map[string]string{}
	for _, p := range pols.Items {
		if p.Spec.ResourcePolicy == nil {
			continue
		}
		key := p.Namespace + "/" + p.Spec.ResourcePolicy.Name
		if _, done := in.Recipes[key]; done {
			continue
		}
		doc, _, err := policysource.Read(ctx, c, p.Namespace, p.Spec.ResourcePolicy.Name, "resourcePolicy")
		switch {
		case apierrors.IsForbidden(err):
			// Unknown, not broken: the user may not read it.
			warnings = append(warnings, fmt.Sprintf("SnapshotPolicy %s/%s spec.resourcePolicy: %v (its skip rules are not considered)", p.Namespace, p.Name, err))
		case err != nil:
			// Every run of the policy fails on it, as the snapshot function reads it.
			in.RecipeErrors[key] = err.Error()
		default:
			in.Recipes[key] = doc
		}
	}
	if global != "" {
		gns, gname, ok := SplitConfigMap(global)
		if !ok {
			return in, nil, fmt.Errorf("global volume policies %q: want NAMESPACE/NAME of the ConfigMap", global)
		}
		doc, _, err := policysource.Read(ctx, c, gns, gname, "global backup volume policies")
		if err != nil {
			return in, nil, fmt.Errorf("global volume policies %s: %w", global, err)
		}
		in.Global, in.GlobalName = doc, global
	}
	return in, warnings, nil
}

// SplitConfigMap splits a ConfigMap named as NAMESPACE/NAME.
func SplitConfigMap(s string) (ns, name string, ok bool) {
	ns, name, ok = strings.Cut(s, "/")
	return ns, name, ok && ns != "" && name != "" && !strings.Contains(name, "/")
}
