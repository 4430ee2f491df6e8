package snapshot

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/internal/scheme"
)

// A policy's volumeSnapshotClassName names the class of the run's own
// VolumeSnapshot; without one the cluster's default class is left to choose.
func TestOwnSnapshotTakesThePolicysClass(t *testing.T) {
	ctx := context.Background()
	fast := "fast-snaps"
	for _, tc := range []struct {
		name  string
		class *string
		want  string
	}{
		{"the policy's class", &fast, "fast-snaps"},
		{"no class: the default", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &snapv1.Snapshot{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "s1", UID: "s-uid"}}
			mapper := meta.NewDefaultRESTMapper(nil)
			mapper.Add(volumeSnapshotGVK, meta.RESTScopeNamespace)
			c := fake.NewClientBuilder().WithScheme(scheme.New()).WithRESTMapper(mapper).WithObjects(s).Build()
			f := &Function{Client: c, Namespace: "snapflow-system", MoverImage: "img"}
			if _, err := f.ownSnapshot(ctx, s, &runPlan{pvc: "data", snapshotClass: tc.class}, "s1-src"); err != nil {
				t.Fatal(err)
			}
			vs := &unstructured.Unstructured{}
			vs.SetGroupVersionKind(volumeSnapshotGVK)
			if err := c.Get(ctx, client.ObjectKey{Namespace: "app", Name: "s1-src"}, vs); err != nil {
				t.Fatal(err)
			}
			got, _, _ := unstructured.NestedString(vs.Object, "spec", "volumeSnapshotClassName")
			src, _, _ := unstructured.NestedString(vs.Object, "spec", "source", "persistentVolumeClaimName")
			if got != tc.want || src != "data" {
				t.Fatalf("VolumeSnapshot class %q of %q, want %q of data", got, src, tc.want)
			}
		})
	}
}
