package v1alpha1

import "testing"

func TestRepositoryRefQualified(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   RepositoryRef
		want RepositoryRef
	}{
		{"kind and namespace default", RepositoryRef{Name: "nas"}, RepositoryRef{Kind: KindRepository, Namespace: "app", Name: "nas"}},
		{"another namespace kept", RepositoryRef{Kind: KindRepository, Namespace: "ops", Name: "nas"}, RepositoryRef{Kind: KindRepository, Namespace: "ops", Name: "nas"}},
		{"cluster repository has none", RepositoryRef{Kind: KindClusterRepository, Namespace: "app", Name: "s3"}, RepositoryRef{Kind: KindClusterRepository, Name: "s3"}},
	} {
		if got := tc.in.Qualified("app"); got != tc.want {
			t.Errorf("%s: Qualified = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
