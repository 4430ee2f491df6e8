package snapshot

import (
	"context"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/scheme"
)

// Two policies that resolve to one kopia source in one repository (the
// webhook bypassed, or identityDefaults edited since admission): before a
// backup the function checks again, and only the older policy runs.
func TestRunRechecksIdentityCollisions(t *testing.T) {
	ctx := context.Background()
	const ns = "app"
	created := time.Unix(1_700_000_000, 0)
	tests := []struct {
		name     string
		otherAge time.Duration // the other policy's creation relative to "app"
		stopped  bool
	}{
		{"an older policy on the same source stops this run", -time.Hour, true},
		{"a newer policy on the same source does not stop this run", time.Hour, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-data"}, Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}
			objs := oneRunFixture(ns, pvc)
			for _, o := range objs {
				if p, ok := o.(*snapv1.SnapshotPolicy); ok {
					p.CreationTimestamp = metav1.NewTime(created)
				}
			}
			// Same PVC, same identity (both default to the namespace and
			// the policy name unless set): the other names "app"'s identity.
			other := &snapv1.SnapshotPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "copycat", CreationTimestamp: metav1.NewTime(created.Add(tc.otherAge))},
				Spec: snapv1.SnapshotPolicySpec{Repository: &snapv1.RepositoryRef{Name: "primary"}, CopyMethod: snapv1.CopyDirect,
					Identity: &snapv1.PolicyIdentity{Username: "app", Hostname: ns},
					Sources:  []snapv1.Source{{PVC: &snapv1.LocalObjectRef{Name: "data"}}}}}
			c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(append(objs, other)...).
				WithStatusSubresource(&snapv1.Snapshot{}, &snapv1.Repository{}).Build()
			f := &Function{Client: c, Namespace: "snapflow-system", MoverImage: "img"}
			if err := f.ReconcileSnapshot(ctx, ns, "s1"); err != nil {
				t.Fatal(err)
			}
			var s snapv1.Snapshot
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "s1"}, &s); err != nil {
				t.Fatal(err)
			}
			var jobs batchv1.JobList
			if err := c.List(ctx, &jobs, client.InNamespace(ns)); err != nil {
				t.Fatal(err)
			}
			ready := meta.FindStatusCondition(s.Status.Conditions, wellknown.ConditionReady)
			if !tc.stopped {
				if len(jobs.Items) != 1 {
					t.Fatalf("%d mover Jobs, want the run to start (Ready %+v)", len(jobs.Items), ready)
				}
				return
			}
			if len(jobs.Items) != 0 {
				t.Fatalf("%d mover Jobs: the newer policy must not write the older one's source", len(jobs.Items))
			}
			if s.Status.Phase != snapv1.SnapshotFailed || ready == nil || ready.Reason != ReasonIdentityCollision ||
				!strings.Contains(ready.Message, "SnapshotPolicy app/copycat") || !strings.Contains(ready.Message, "spec.identity") {
				t.Fatalf("phase %s, Ready %+v: want Failed with %s naming app/copycat and the field to change", s.Status.Phase, ready, ReasonIdentityCollision)
			}
		})
	}
}
