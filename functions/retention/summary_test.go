package retention

import (
	"testing"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
)

func TestRepositorySummary(t *testing.T) {
	tests := []struct {
		name string
		spec snapv1.SnapshotPolicySpec
		want string
	}{
		{"one repository", snapv1.SnapshotPolicySpec{Repository: &snapv1.RepositoryRef{Name: "nas"}}, "nas"},
		{"a cluster repository", snapv1.SnapshotPolicySpec{Repository: &snapv1.RepositoryRef{Kind: snapv1.KindClusterRepository, Name: "shared"}}, "ClusterRepository/shared"},
		{"several", snapv1.SnapshotPolicySpec{Repositories: []snapv1.RepositoryRef{{Name: "nas"}, {Kind: snapv1.KindClusterRepository, Name: "offsite"}}}, "nas, ClusterRepository/offsite"},
		{"none", snapv1.SnapshotPolicySpec{}, ""},
	}
	for _, tc := range tests {
		if got := RepositorySummary(&snapv1.SnapshotPolicy{Spec: tc.spec}); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
