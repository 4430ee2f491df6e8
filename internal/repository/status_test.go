package repository

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

// UpdateStatus reaches both kinds through one reference, writes only a
// change, and treats a repository that is gone as nothing to do.
func TestUpdateStatus(t *testing.T) {
	ctx := context.Background()
	r := &snapv1.Repository{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "primary", Generation: 3}}
	cr := &snapv1.ClusterRepository{ObjectMeta: metav1.ObjectMeta{Name: "shared", Generation: 5}}
	patches := 0
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(r, cr).WithStatusSubresource(r, cr).
		WithInterceptorFuncs(interceptor.Funcs{SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			patches++
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		}}).Build()
	for _, tc := range []struct {
		name    string
		ref     snapv1.RepositoryRef
		ns      string
		message string
		patches int
		get     client.Object
		homeNS  string
		gen     int64
	}{
		{"a Repository in the consumer's namespace", snapv1.RepositoryRef{Kind: snapv1.KindRepository, Name: "primary"}, "app", "hello", 1, &snapv1.Repository{}, "app", 3},
		{"the same message again writes nothing", snapv1.RepositoryRef{Name: "primary"}, "app", "hello", 0, &snapv1.Repository{}, "app", 3},
		{"a Repository named with its namespace", snapv1.RepositoryRef{Kind: snapv1.KindRepository, Name: "primary", Namespace: "app"}, "elsewhere", "again", 1, &snapv1.Repository{}, "app", 3},
		{"a ClusterRepository", snapv1.RepositoryRef{Kind: snapv1.KindClusterRepository, Name: "shared"}, "app", "cluster", 1, &snapv1.ClusterRepository{}, "snapflow-system", 5},
		{"a repository that is gone", snapv1.RepositoryRef{Kind: snapv1.KindRepository, Name: "gone"}, "app", "x", 0, nil, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			patches = 0
			called := false
			err := UpdateStatus(ctx, c, "snapflow-system", tc.ref, tc.ns, func(o *Object) error {
				called = true
				if o.Namespace != tc.homeNS || o.Obj.GetGeneration() != tc.gen {
					t.Errorf("mutate saw home %q generation %d, want %q %d", o.Namespace, o.Obj.GetGeneration(), tc.homeNS, tc.gen)
				}
				o.Status.Backend = tc.message
				return nil
			})
			if err != nil || patches != tc.patches {
				t.Fatalf("err %v, %d patches, want %d", err, patches, tc.patches)
			}
			if tc.get == nil {
				if called {
					t.Fatal("mutate ran for a repository that is gone")
				}
				return
			}
			key := client.ObjectKey{Namespace: "app", Name: tc.ref.Name}
			if tc.ref.Kind == snapv1.KindClusterRepository {
				key.Namespace = ""
			}
			if err := c.Get(ctx, key, tc.get); err != nil {
				t.Fatal(err)
			}
			var got string
			switch o := tc.get.(type) {
			case *snapv1.Repository:
				got = o.Status.Backend
			case *snapv1.ClusterRepository:
				got = o.Status.Backend
			}
			if got != tc.message {
				t.Fatalf("status.backend %q, want %q", got, tc.message)
			}
		})
	}
}
