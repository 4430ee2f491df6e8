package retention

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/scheme"
)

// A policy that fans out to a repository that does not exist says so on
// its RepositoriesFound condition, naming it, and stops saying so once it
// exists; a suspended policy too.
func TestPolicySaysWhichRepositoriesAreMissing(t *testing.T) {
	ctx := context.Background()
	for _, suspend := range []bool{false, true} {
		p := &snapv1.SnapshotPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "fan", Generation: 1},
			Spec: snapv1.SnapshotPolicySpec{Suspend: suspend, Repositories: []snapv1.RepositoryRef{{Name: "nas"}, {Kind: snapv1.KindClusterRepository, Name: "offsite"}}}}
		nas := &snapv1.Repository{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "nas"}}
		c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(p, nas).WithStatusSubresource(&snapv1.SnapshotPolicy{}).Build()
		f := &Function{Client: c}
		cond := func() *metav1.Condition {
			t.Helper()
			if err := f.Reconcile(ctx, "app", "fan"); err != nil {
				t.Fatal(err)
			}
			var live snapv1.SnapshotPolicy
			if err := c.Get(ctx, client.ObjectKeyFromObject(p), &live); err != nil {
				t.Fatal(err)
			}
			return meta.FindStatusCondition(live.Status.Conditions, wellknown.ConditionRepositoriesFound)
		}
		if got := cond(); got == nil || got.Status != metav1.ConditionFalse || !strings.Contains(got.Message, "ClusterRepository/offsite") || strings.Contains(got.Message, "Repository/nas") {
			t.Fatalf("suspend=%v: with offsite missing: %+v", suspend, got)
		}
		if err := c.Create(ctx, &snapv1.ClusterRepository{ObjectMeta: metav1.ObjectMeta{Name: "offsite"}}); err != nil {
			t.Fatal(err)
		}
		if got := cond(); got == nil || got.Status != metav1.ConditionTrue {
			t.Fatalf("suspend=%v: with both there: %+v", suspend, got)
		}
	}
}
