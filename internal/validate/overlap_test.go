package validate

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
)

func TestSourcesMayNotCoverOnePVC(t *testing.T) {
	ctx := context.Background()
	objs := NewObjects()
	objs.Add(&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "billing", Labels: map[string]string{"app": "pg"}}})
	objs.Add(&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "wal", Namespace: "billing", Labels: map[string]string{"app": "pg"}}})
	sel := func(v string) snapv1.Source {
		return snapv1.Source{PVCSelector: &snapv1.PVCSelector{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": v}}}}
	}

	twoPVC := basePolicy()
	twoPVC.Spec.Sources = append(twoPVC.Spec.Sources, snapv1.Source{PVC: &snapv1.LocalObjectRef{Name: "data"}})
	expect(t, PolicyReferents(ctx, objs, twoPVC, nil), "spec.sources[1]", `PVC "data" is covered by spec.sources[0] and spec.sources[1]`)

	pvcAndSelector := basePolicy()
	pvcAndSelector.Spec.Sources = append(pvcAndSelector.Spec.Sources, sel("pg"))
	expect(t, PolicyReferents(ctx, objs, pvcAndSelector, nil), "spec.sources[1]", "Narrow the pvcSelector")

	disjoint := basePolicy()
	disjoint.Spec.Sources = append(disjoint.Spec.Sources, sel("web"))
	expect(t, PolicyReferents(ctx, objs, disjoint, nil), "", "")

	// An update that leaves the spec alone (a finalizer) is let through
	// with a warning: refusing it could wedge the policy's deletion.
	fin := pvcAndSelector.DeepCopy()
	fin.Finalizers = []string{"x"}
	r := PolicyReferents(ctx, objs, fin, pvcAndSelector)
	if !r.OK() || len(r.Warnings) == 0 || !strings.Contains(strings.Join(r.Warnings, "\n"), "covered by spec.sources[0] and spec.sources[1]") {
		t.Fatalf("an unchanged spec: problems %v, warnings %v; want only a warning", r.Problems(), r.Warnings)
	}

	// Nor is any update of a policy being deleted (the mutating webhook
	// of a newer release may have changed its spec): its finalizer must
	// come off.
	going := pvcAndSelector.DeepCopy()
	going.DeletionTimestamp = &metav1.Time{}
	going.Spec.Retention.KeepDaily = nil
	going.Spec.Retention.KeepLatest = ptrInt32(3)
	if r := PolicyReferents(ctx, objs, going, pvcAndSelector); !r.OK() {
		t.Fatalf("an update of a policy being deleted was refused: %v", r.Problems())
	}

	// Claims that cannot be listed: two selectors are allowed with a
	// warning (each firing checks again); two pvc sources naming one
	// claim are still refused, as no listing is needed to see it.
	twoSel := basePolicy()
	twoSel.Spec.Sources = []snapv1.Source{sel("pg"), sel("pg")}
	r = sourceOverlaps(ctx, broken{}, twoSel)
	if !r.OK() || len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "each firing checks again") {
		t.Fatalf("unlistable claims: problems %v, warnings %v", r.Problems(), r.Warnings)
	}
	expect(t, sourceOverlaps(ctx, broken{}, twoPVC), "spec.sources[1]", `PVC "data"`)

	// Offline (`snapflow validate`) without the claims: only what the
	// manifests show is checked, without noise.
	offline := NewObjects()
	offline.Offline = true
	if r := sourceOverlaps(ctx, offline, twoSel); !r.OK() || len(r.Warnings) != 0 {
		t.Fatalf("offline without claims: problems %v, warnings %v", r.Problems(), r.Warnings)
	}
}

func ptrInt32(v int32) *int32 { return &v }
