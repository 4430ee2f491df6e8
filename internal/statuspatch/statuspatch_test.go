package statuspatch

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/internal/scheme"
)

func TestUpdateWritesOnlyAChange(t *testing.T) {
	ctx := context.Background()
	p := &snapv1.SnapshotPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}
	p.Status.RepositorySummary = "primary"
	patches := 0
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(p).WithStatusSubresource(p).
		WithInterceptorFuncs(interceptor.Funcs{SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			patches++
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		}}).Build()
	key := client.ObjectKeyFromObject(p)
	newObj := func() *snapv1.SnapshotPolicy { return &snapv1.SnapshotPolicy{} }

	for _, tc := range []struct {
		name    string
		summary string
		want    int
	}{
		{"the same value", "primary", 0},
		{"a new value", "primary, offsite", 1},
		{"the new value again", "primary, offsite", 1},
	} {
		err := Update(ctx, c, key, newObj, func(live *snapv1.SnapshotPolicy) error {
			live.Status.RepositorySummary = tc.summary
			return nil
		})
		if err != nil || patches != tc.want {
			t.Fatalf("%s: %d patches (err %v), want %d in all", tc.name, patches, err, tc.want)
		}
	}
	var live snapv1.SnapshotPolicy
	if err := c.Get(ctx, key, &live); err != nil || live.Status.RepositorySummary != "primary, offsite" {
		t.Fatalf("stored summary %q (%v)", live.Status.RepositorySummary, err)
	}
	if err := Update(ctx, c, key, newObj, func(*snapv1.SnapshotPolicy) error { return Skip }); err != nil || patches != 1 {
		t.Fatalf("Skip: %d patches, %v", patches, err)
	}
}
