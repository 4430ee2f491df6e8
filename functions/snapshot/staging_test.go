package snapshot

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/internal/scheme"
)

// The staged copy a Clone run backs up takes the source's class and
// access modes unless the policy's spec.staging names others.
func TestStagedClaimTakesThePolicysStaging(t *testing.T) {
	ctx := context.Background()
	standard, fast := "standard", "fast"
	src := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: &standard,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
	for _, tc := range []struct {
		name      string
		staging   *snapv1.Staging
		wantClass string
		wantModes []corev1.PersistentVolumeAccessMode
	}{
		{"the source's", nil, "standard", []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}},
		{"the policy's class", &snapv1.Staging{StorageClassName: &fast}, "fast", []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}},
		{"the policy's class and access modes", &snapv1.Staging{StorageClassName: &fast, AccessModes: []string{"ReadOnlyMany", "ReadWriteMany"}},
			"fast", []corev1.PersistentVolumeAccessMode{corev1.ReadOnlyMany, corev1.ReadWriteMany}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &snapv1.Snapshot{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "s1", UID: "s-uid"}}
			c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(src.DeepCopy(), s).WithStatusSubresource(&snapv1.Snapshot{}).Build()
			f := &Function{Client: c, Namespace: "snapflow-system", MoverImage: "img"}
			pol := &snapv1.SnapshotPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "p"}, Spec: snapv1.SnapshotPolicySpec{Staging: tc.staging}}
			ready, err := f.stage(ctx, s, &runPlan{policy: pol, copyMethod: snapv1.CopyClone, pvc: "data"})
			if err != nil || !ready {
				t.Fatalf("stage: ready %v, %v", ready, err)
			}
			var staged corev1.PersistentVolumeClaim
			if err := c.Get(ctx, client.ObjectKey{Namespace: "app", Name: stagedName(s)}, &staged); err != nil {
				t.Fatal(err)
			}
			if ds := staged.Spec.DataSource; ds == nil || ds.Kind != "PersistentVolumeClaim" || ds.Name != "data" {
				t.Fatalf("staged from %+v, want a clone of data", ds)
			}
			if got := staged.Spec.StorageClassName; got == nil || *got != tc.wantClass {
				t.Fatalf("class %v, want %s", got, tc.wantClass)
			}
			if len(staged.Spec.AccessModes) != len(tc.wantModes) {
				t.Fatalf("access modes %v, want %v", staged.Spec.AccessModes, tc.wantModes)
			}
			for i, m := range tc.wantModes {
				if staged.Spec.AccessModes[i] != m {
					t.Fatalf("access modes %v, want %v", staged.Spec.AccessModes, tc.wantModes)
				}
			}
		})
	}
}
