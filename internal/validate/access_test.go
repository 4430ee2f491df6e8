package validate

import (
	"context"
	"strings"
	"testing"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
)

func TestDataAccess(t *testing.T) {
	ctx := context.Background()
	objs := NewObjects()
	objs.Add(clusterRepo("shared", &snapv1.AllowedNamespaces{List: []string{"billing"}}))
	tests := []struct {
		name string
		lk   Lookup
		ns   string
		ref  snapv1.RepositoryRef
		want string // "" means allowed
	}{
		{"own repository, namespace implied", objs, "billing", snapv1.RepositoryRef{Name: "nas"}, ""},
		{"own repository, namespace explicit", objs, "billing", snapv1.RepositoryRef{Kind: snapv1.KindRepository, Name: "nas", Namespace: "billing"}, ""},
		{"another namespace's repository", objs, "billing", snapv1.RepositoryRef{Kind: snapv1.KindRepository, Name: "nas", Namespace: "payroll"}, `belongs to namespace "payroll"`},
		{"allowed cluster repository", objs, "billing", snapv1.RepositoryRef{Kind: snapv1.KindClusterRepository, Name: "shared"}, ""},
		{"cluster repository not allowing the namespace", objs, "payroll", snapv1.RepositoryRef{Kind: snapv1.KindClusterRepository, Name: "shared"}, "is not in the allowedNamespaces"},
		{"cluster repository unreadable", broken{}, "billing", snapv1.RepositoryRef{Kind: snapv1.KindClusterRepository, Name: "shared"}, "fail-closed"},
		{"unknown kind", objs, "billing", snapv1.RepositoryRef{Kind: "Bucket", Name: "x"}, "neither Repository nor ClusterRepository"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := DataAccess(ctx, tc.lk, tc.ns, tc.ref).Errs
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}
