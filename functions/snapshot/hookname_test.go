package snapshot

import (
	"context"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/moverjob"
	"github.com/snapflow/snapflow/internal/scheme"
)

// A runJob hook's Job never takes the mover Job's name, however long the
// Snapshot's name (a schedule's firings get long ones), nor another
// hook's.
func TestHookJobNamesNeverTakeTheMovers(t *testing.T) {
	for _, name := range []string{"db", strings.Repeat("a", 54), strings.Repeat("nightly-", 8) + "x", strings.Repeat("b", 253)} {
		s := &snapv1.Snapshot{ObjectMeta: metav1.ObjectMeta{Name: name, UID: "s-uid"}}
		seen := map[string]string{moverjob.Name(s.Name, string(s.UID)): "the mover"}
		for _, short := range []string{"pre", "post"} {
			for i := range 3 {
				n := hookJobName(s, short, i)
				if len(n) > 63 {
					t.Fatalf("%s: hook name %q is longer than a label value", name, n)
				}
				if other, ok := seen[n]; ok {
					t.Fatalf("%s: hook %s-%d takes the name %q of %s", name, short, i, n, other)
				}
				seen[n] = short
			}
		}
	}
}

// A Job under the mover Job's name that is not this Snapshot's mover (a
// hook's, from before hook Jobs had names of their own, or one someone
// else made) is never adopted: the run fails saying whose name it took.
func TestAForeignJobUnderTheMoversNameFailsTheRun(t *testing.T) {
	ctx := context.Background()
	const ns = "app"
	yes := true
	for _, labels := range []map[string]string{
		{wellknown.LabelManagedBy: wellknown.ManagedByValue, wellknown.LabelOp: "hook"},
		nil,
	} {
		objs := oneRunFixture(ns, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data"},
			Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-data"}, Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}})
		foreign := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: moverjob.Name("s1", "uid-s1"), Labels: labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: snapv1.GroupVersion.String(), Kind: "Snapshot", Name: "s1", UID: "uid-s1", Controller: &yes}}}}
		c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(append(objs, foreign)...).
			WithStatusSubresource(&snapv1.Snapshot{}, &snapv1.Repository{}).Build()
		f := &Function{Client: c, Namespace: "snapflow-system", MoverImage: "img"}
		if err := f.ReconcileSnapshot(ctx, ns, "s1"); err != nil {
			t.Fatal(err)
		}
		var s snapv1.Snapshot
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "s1"}, &s); err != nil {
			t.Fatal(err)
		}
		if fl := s.Status.Failure; s.Status.Phase != snapv1.SnapshotFailed || fl == nil || fl.Class != "MoverJobNameTaken" ||
			!strings.Contains(fl.Message, "is not this Snapshot's mover") || s.Status.Job != nil && s.Status.Job.Name != "" {
			t.Fatalf("labels %v: phase %s, failure %+v, job %+v", labels, s.Status.Phase, fl, s.Status.Job)
		}
	}
}
