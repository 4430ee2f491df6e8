package validate

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
)

// In a ClusterRepository shared by namespaces, a namespace writes and
// restores only under its own hostname unless the owner declares the
// repository Shared; its own Repository is its own business.
func TestIdentityOwnership(t *testing.T) {
	ctx := context.Background()
	objs := NewObjects()
	all := &snapv1.AllowedNamespaces{List: []string{"billing", "payroll"}}
	objs.Add(clusterRepo("shared", all))
	trusting := clusterRepo("family", all)
	trusting.Annotations = map[string]string{wellknown.AnnotationIdentityScope: wellknown.IdentityScopeShared}
	objs.Add(trusting)
	exprRepo := clusterRepo("expr", all)
	exprRepo.Spec.IdentityDefaults = &snapv1.IdentityDefaults{HostnameExpr: `"tenant-" + namespace`}
	objs.Add(exprRepo)

	onCluster := func(repo, hostname string) *snapv1.SnapshotPolicy {
		p := basePolicy()
		p.Spec.Repository = &snapv1.RepositoryRef{Kind: snapv1.KindClusterRepository, Name: repo}
		if hostname != "" {
			p.Spec.Identity = &snapv1.PolicyIdentity{Hostname: hostname}
		}
		return p
	}
	tests := []struct {
		name       string
		p          *snapv1.SnapshotPolicy
		path, want string
	}{
		{"default hostname", onCluster("shared", ""), "", ""},
		{"own hostname with a suffix", onCluster("shared", "billing.prod"), "", ""},
		{"another namespace's hostname", onCluster("shared", "payroll"), "spec.identity.hostname", `belongs to namespace "payroll", not "billing"`},
		{"another namespace's hostname with a suffix", onCluster("shared", "payroll.prod"), "spec.identity.hostname", "snapflow.dev/identity-scope=Shared"},
		{"a hostname expression that drops the namespace", onCluster("expr", ""), "spec.repository", `kopia hostname "tenant-billing"`},
		{"a repository declared Shared", onCluster("family", "payroll"), "", ""},
		{"a namespaced repository", func() *snapv1.SnapshotPolicy {
			p := basePolicy()
			p.Spec.Identity = &snapv1.PolicyIdentity{Hostname: "payroll"}
			return p
		}(), "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			expect(t, PolicyReferents(ctx, objs, tc.p, nil), tc.path, tc.want)
		})
	}

	// A restore reads: the same rule holds for its identity source, and for
	// another namespace's policy resolved in the shared repository.
	rs := &snapv1.Restore{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "billing"}, Spec: snapv1.RestoreSpec{
		Repository: &snapv1.RepositoryRef{Kind: snapv1.KindClusterRepository, Name: "shared"},
		Source:     snapv1.RestoreSource{Identity: &snapv1.IdentitySource{Username: "pg", Hostname: "payroll"}},
	}}
	expect(t, RestoreReferents(ctx, objs, rs), "spec.source.identity.hostname", `belongs to namespace "payroll"`)
	rs.Spec.Source.Identity.Hostname = "billing"
	expect(t, RestoreReferents(ctx, objs, rs), "", "")

	theirs := onCluster("shared", "")
	theirs.Namespace = "payroll"
	objs.Add(theirs)
	fromTheirs := &snapv1.Restore{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "billing"}, Spec: snapv1.RestoreSpec{
		Source: snapv1.RestoreSource{FromPolicy: &snapv1.FromPolicy{Name: theirs.Name, Namespace: "payroll"}},
	}}
	// Another namespace's policy is not read at admission, whose answer
	// would tell the requester about it: the restore function reads it
	// with the author's rights, and the mover refuses a foreign identity.
	res := RestoreReferents(ctx, objs, fromTheirs)
	expect(t, res, "", "")
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "not checked here") {
		t.Fatalf("want one warning that the policy is checked by the restore function, got %q", res.Warnings)
	}
}

func TestSnapshotRunsOnlyItsNamespacesPolicy(t *testing.T) {
	s := &snapv1.Snapshot{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "billing"},
		Spec: snapv1.SnapshotSpec{PolicyRef: &snapv1.PolicyRef{Name: "pg", Namespace: "payroll"}}}
	expect(t, Snapshot(s, Options{}), "spec.policyRef.namespace", `Create the Snapshot in namespace "payroll"`)
	s.Spec.PolicyRef.Namespace = "billing"
	expect(t, Snapshot(s, Options{}), "", "")
}

func TestSnapshotGroupStaysInItsNamespace(t *testing.T) {
	s := &snapv1.Snapshot{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "billing"},
		Spec: snapv1.SnapshotSpec{PolicyRef: &snapv1.PolicyRef{Name: "pg"}, Source: &snapv1.SnapshotSource{
			Target: snapv1.SnapshotTarget{PVC: snapv1.PVCTarget{Name: "data"}},
			Group:  &snapv1.SnapshotGroup{Namespace: "payroll", VolumeGroupSnapshotName: "g"}}}}
	expect(t, Snapshot(s, Options{}), "spec.source.group.namespace", `set it to "billing"`)
	s.Spec.Source.Group.Namespace = "billing"
	expect(t, Snapshot(s, Options{}), "", "")
	s.Spec.Source.Group.Namespace = ""
	expect(t, Snapshot(s, Options{}), "", "")
	s.Spec.Source.Group.VolumeGroupSnapshotName = strings.Repeat("g", 64)
	expect(t, Snapshot(s, Options{}), "spec.source.group.volumeGroupSnapshotName", "not a valid name")
}

// The group class annotation names a class, and only on a policy that cuts
// groups.
func TestVolumeGroupSnapshotClassAnnotation(t *testing.T) {
	path := "metadata.annotations[" + wellknown.AnnotationVolumeGroupSnapshotClass + "]"
	p := basePolicy()
	p.Spec.Sources = []snapv1.Source{{PVCSelector: &snapv1.PVCSelector{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "pg"}}}}}
	p.Annotations = map[string]string{wellknown.AnnotationVolumeGroupSnapshotClass: "csi-group.example.com"}
	expect(t, SnapshotPolicy(p, Options{}), "", "")
	p.Annotations[wellknown.AnnotationVolumeGroupSnapshotClass] = "Not_A_Class"
	expect(t, SnapshotPolicy(p, Options{}), path, "is not a VolumeGroupSnapshotClass name")
	p.Annotations[wellknown.AnnotationVolumeGroupSnapshotClass] = "csi-group"
	p.Spec.GroupBy = snapv1.GroupByNone
	expect(t, SnapshotPolicy(p, Options{}), path, "cuts no group")
	p.Spec.GroupBy = ""
	p.Spec.Sources = []snapv1.Source{{PVC: &snapv1.LocalObjectRef{Name: "data"}}}
	if r := SnapshotPolicy(p, Options{}); !r.OK() || len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "no source of this policy is a pvcSelector") {
		t.Fatalf("a policy without a selector: %v %v", r.Problems(), r.Warnings)
	}
}
