package validate

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
)

func clusterRepo(name string, an *snapv1.AllowedNamespaces) *snapv1.ClusterRepository {
	return &snapv1.ClusterRepository{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: snapv1.ClusterRepositorySpec{AllowedNamespaces: an}}
}

// broken fails every read, to prove which checks fail open and which closed.
type broken struct{}

var errDown = errors.New("apiserver unavailable")

func (broken) Namespace(context.Context, string) (*corev1.Namespace, error) { return nil, errDown }
func (broken) Repository(context.Context, string, string) (*snapv1.Repository, error) {
	return nil, errDown
}
func (broken) ClusterRepository(context.Context, string) (*snapv1.ClusterRepository, error) {
	return nil, errDown
}
func (broken) SnapshotPolicy(context.Context, string, string) (*snapv1.SnapshotPolicy, error) {
	return nil, errDown
}
func (broken) SnapshotPolicies(context.Context) ([]snapv1.SnapshotPolicy, error) { return nil, errDown }
func (broken) PVCs(context.Context, string) ([]metav1.ObjectMeta, error)         { return nil, errDown }
func (broken) Snapshots(context.Context, string) ([]snapv1.Snapshot, error)      { return nil, errDown }
func (broken) Restores(context.Context, string) ([]snapv1.Restore, error)        { return nil, errDown }
func (broken) ConfigMap(context.Context, string, string) (*corev1.ConfigMap, error) {
	return nil, errDown
}

func TestTenancy(t *testing.T) {
	ctx := context.Background()
	objs := NewObjects()
	objs.Add(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "billing", Labels: map[string]string{"tenant": "billing"}}})
	objs.Add(clusterRepo("listed", &snapv1.AllowedNamespaces{List: []string{"billing"}}))
	objs.Add(clusterRepo("all", &snapv1.AllowedNamespaces{All: ptr.To(true)}))
	objs.Add(clusterRepo("by-label", &snapv1.AllowedNamespaces{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"tenant": "billing"}}}))
	objs.Add(clusterRepo("other-label", &snapv1.AllowedNamespaces{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"tenant": "ops"}}}))
	objs.Add(clusterRepo("nobody", nil))
	tests := []struct {
		lk   Lookup
		ns   string
		repo string
		want string
	}{
		{objs, "billing", "listed", ""},
		{objs, "ops", "listed", "is not in the allowedNamespaces"},
		{objs, "anything", "all", ""},
		{objs, "billing", "by-label", ""},
		{objs, "billing", "other-label", "does not match the allowedNamespaces.selector"},
		{objs, "ghost", "by-label", "labels were not available"},
		{objs, "billing", "nobody", "no namespace may use it"},
		{objs, "billing", "missing", "does not exist"},
		{nil, "billing", "listed", "fail-closed"},
		{broken{}, "billing", "listed", "fail-closed"},
	}
	for _, tc := range tests {
		err := Tenancy(ctx, tc.lk, tc.ns, &snapv1.RepositoryRef{Kind: snapv1.KindClusterRepository, Name: tc.repo}).Errs
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s in %s: unexpected %v", tc.ns, tc.repo, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s in %s: %v, want %q", tc.ns, tc.repo, err, tc.want)
		}
	}
	// A namespaced Repository needs no tenancy check.
	if r := Tenancy(ctx, nil, "billing", &snapv1.RepositoryRef{Name: "nas"}); !r.OK() {
		t.Fatal(r.Problems())
	}
	// Offline, a ClusterRepository that is not among the manifests is unchecked, not denied.
	offline := NewObjects()
	offline.Offline = true
	r := Tenancy(ctx, offline, "billing", &snapv1.RepositoryRef{Kind: snapv1.KindClusterRepository, Name: "elsewhere"})
	if !r.OK() || len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "not among the given manifests") {
		t.Fatalf("offline tenancy: %v %v", r.Problems(), r.Warnings)
	}
}

func policyWith(name, username string, pvc string) *snapv1.SnapshotPolicy {
	p := basePolicy()
	p.Name = name
	p.Spec.Sources[0].PVC.Name = pvc
	if username != "" {
		p.Spec.Identity = &snapv1.PolicyIdentity{Username: username}
	}
	return p
}

func TestIdentityCollision(t *testing.T) {
	ctx := context.Background()
	objs := NewObjects()
	objs.Add(policyWith("existing", "shared", "data"))
	expect(t, PolicyReferents(ctx, objs, policyWith("new", "shared", "data"), nil), "spec.repository", "collides with existing SnapshotPolicy billing/existing")
	// Different PVC, different kopia path: no collision.
	expect(t, PolicyReferents(ctx, objs, policyWith("new", "shared", "other"), nil), "", "")
	// Same identity in another repository: no collision.
	p := policyWith("new", "shared", "data")
	p.Spec.Repository.Name = "offsite"
	expect(t, PolicyReferents(ctx, objs, p, nil), "", "")
	// A collision that came about later (a repository's identityDefaults
	// edited) does not refuse an update leaving the spec alone, such as a
	// controller's finalizer; a spec change still is refused.
	colliding := policyWith("new", "shared", "data")
	withFinalizer := colliding.DeepCopy()
	withFinalizer.Finalizers = []string{"snapflow.dev/cascade"}
	if r := PolicyReferents(ctx, objs, withFinalizer, colliding); !r.OK() || !strings.Contains(strings.Join(r.Warnings, "\n"), "collides with existing SnapshotPolicy billing/existing") {
		t.Fatalf("a metadata-only update of a colliding policy: problems %v, warnings %v", r.Problems(), r.Warnings)
	}
	edited := colliding.DeepCopy()
	edited.Spec.Suspend = true
	expect(t, PolicyReferents(ctx, objs, edited, colliding), "spec.repository", "collides with existing SnapshotPolicy billing/existing")
	// Cannot list: fail open with a warning.
	r := PolicyReferents(ctx, broken{}, policyWith("new", "shared", "data"), nil)
	if !r.OK() || len(r.Warnings) == 0 {
		t.Fatalf("unreadable referents should allow with a warning, got %v %v", r.Problems(), r.Warnings)
	}
}

// A recipe's volume-policy ConfigMap is checked when the policy names it:
// invalid is refused, missing or unreadable only warned about, and an
// update that leaves the reference alone is not refused for it.
func TestResourcePolicyReferent(t *testing.T) {
	ctx := context.Background()
	objs := NewObjects()
	objs.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "billing", Name: "bad"},
		Data: map[string]string{"policy.yaml": "version: v2\n"}})
	objs.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "billing", Name: "good"},
		Data: map[string]string{"policy.yaml": "version: v1\nvolumePolicies: [{conditions: {}, action: {type: skip}}]\n"}})
	with := func(cm string) *snapv1.SnapshotPolicy {
		p := policyWith("p", "shared", "data")
		p.Spec.ResourcePolicy = &snapv1.ResourcePolicyRef{Name: cm}
		return p
	}
	expect(t, PolicyReferents(ctx, objs, with("good"), nil), "", "")
	expect(t, PolicyReferents(ctx, objs, with("bad"), nil), "spec.resourcePolicy.name", "ConfigMap billing/bad holds invalid volume policies")
	if r := PolicyReferents(ctx, objs, with("bad"), with("bad")); !r.OK() {
		t.Fatalf("an update leaving the reference alone: %v", r.Problems())
	}
	expect(t, PolicyReferents(ctx, objs, with("bad"), with("good")), "spec.resourcePolicy.name", "invalid volume policies")
	for _, lk := range []Lookup{objs, broken{}} {
		r := PolicyReferents(ctx, lk, with("absent"), nil)
		if !r.OK() || !strings.Contains(strings.Join(r.Warnings, "\n"), "spec.resourcePolicy") {
			t.Fatalf("a missing or unreadable ConfigMap: problems %v, warnings %v", r.Problems(), r.Warnings)
		}
	}
}

// The run-time recheck: the webhook may have been bypassed, and the
// older of two colliding policies keeps running.
func TestIdentityCollisionsAtRunTime(t *testing.T) {
	ctx := context.Background()
	at := func(p *snapv1.SnapshotPolicy, sec int64) *snapv1.SnapshotPolicy {
		p.CreationTimestamp = metav1.Unix(1_700_000_000+sec, 0)
		return p
	}
	objs := NewObjects()
	stored := func(name string) *snapv1.SnapshotPolicy { return objs.Policies["billing/"+name] }
	objs.Add(at(policyWith("first", "shared", "data"), 0))
	objs.Add(at(policyWith("tie-b", "tied", "data"), 5))
	objs.Add(at(policyWith("later", "shared", "data"), 10))
	tests := []struct {
		name     string
		p        *snapv1.SnapshotPolicy
		collides []string // the other policies, in order
		earlier  string   // the one that was there first, or ""
	}{
		{"newest stops for the first", stored("later"), []string{"billing/first"}, "billing/first"},
		{"oldest keeps running", stored("first"), []string{"billing/later"}, ""},
		{"a tie goes to the lower name", at(policyWith("tie-a", "tied", "data"), 5), []string{"billing/tie-b"}, ""},
		{"the higher name of a tie stops", at(policyWith("tie-c", "tied", "data"), 5), []string{"billing/tie-b"}, "billing/tie-b"},
		{"another PVC does not collide", at(policyWith("other", "shared", "other"), 20), nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cs, err := IdentityCollisions(ctx, objs, tc.p, *tc.p.Spec.Repository)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range cs {
				got = append(got, c.Policy.Namespace+"/"+c.Policy.Name)
				if !strings.Contains(c.Address, "@") {
					t.Errorf("address %q names no kopia source", c.Address)
				}
			}
			if strings.Join(got, ",") != strings.Join(tc.collides, ",") {
				t.Fatalf("collisions %v, want %v", got, tc.collides)
			}
			e, want := Earlier(tc.p, cs), tc.earlier
			switch {
			case want == "" && e != nil:
				t.Fatalf("%s stopped for %s/%s, want it to keep running", tc.p.Name, e.Policy.Namespace, e.Policy.Name)
			case want != "" && (e == nil || e.Policy.Namespace+"/"+e.Policy.Name != want):
				t.Fatalf("earlier %v, want %s", e, want)
			}
		})
	}
	if _, err := IdentityCollisions(ctx, broken{}, stored("later"), *stored("later").Spec.Repository); err == nil {
		t.Fatal("an unreadable cluster must be an error at run time, not a pass")
	}
}

func TestIdentityChangeGuard(t *testing.T) {
	ctx := context.Background()
	objs := NewObjects()
	old := basePolicy()
	old.Status.LastSuccessfulSnapshot = &metav1.Time{}
	edit := old.DeepCopy()
	edit.Spec.Identity = &snapv1.PolicyIdentity{Username: "renamed"}
	expect(t, PolicyReferents(ctx, objs, edit, old), "spec.identity", "allow-identity-change")

	acked := edit.DeepCopy()
	acked.Annotations = map[string]string{wellknown.AnnotationAllowIdentityChange: "intentional"}
	expect(t, PolicyReferents(ctx, objs, acked, old), "", "")

	fresh := old.DeepCopy()
	fresh.Status.LastSuccessfulSnapshot = nil
	expect(t, PolicyReferents(ctx, objs, edit, fresh), "", "")

	path := old.DeepCopy()
	path.Spec.Sources[0].SourcePathOverride = ptr.To("/elsewhere")
	expect(t, PolicyReferents(ctx, objs, path, old), "spec.sources[0].sourcePathOverride", "/pvc/data")

	export := old.DeepCopy()
	export.Spec.Sources[0] = snapv1.Source{NFS: &snapv1.NFSExport{Server: "nas", Path: "/exports/media"}}
	exportEdit := export.DeepCopy()
	exportEdit.Spec.Sources[0].SourcePathOverride = ptr.To("/media")
	expect(t, PolicyReferents(ctx, objs, exportEdit, export), "spec.sources[0].sourcePathOverride", "/exports/media")
	otherServer := export.DeepCopy()
	otherServer.Spec.Sources[0].NFS.Server = "nas2"
	if r := PolicyReferents(ctx, objs, otherServer, export); !r.OK() || len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "nas2") {
		t.Fatalf("a server change under one source path should warn: %v %v", r.Problems(), r.Warnings)
	}
	otherExport := export.DeepCopy()
	otherExport.Spec.Sources[0].NFS.Path = "/exports/photos" // another source, not a fork
	expect(t, PolicyReferents(ctx, objs, otherExport, export), "", "")

	sel := old.DeepCopy()
	sel.Spec.Sources[0] = snapv1.Source{PVCSelector: &snapv1.PVCSelector{}}
	selEdit := sel.DeepCopy()
	selEdit.Spec.Sources[0].SourcePathStrategy = snapv1.SourcePathPvcNamespacedName
	expect(t, PolicyReferents(ctx, objs, selEdit, sel), "spec.sources[0].sourcePathStrategy", "PvcNamespacedName")

	moved := old.DeepCopy()
	moved.Spec.Repository.Name = "elsewhere"
	r := PolicyReferents(ctx, objs, moved, old)
	if !r.OK() || len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "was removed") {
		t.Fatalf("removing a repository should only warn: %v %v", r.Problems(), r.Warnings)
	}
}

func TestSnapshotReferents(t *testing.T) {
	ctx := context.Background()
	objs := NewObjects()
	sel := basePolicy()
	sel.Name = "selector"
	sel.Spec.Sources[0] = snapv1.Source{PVCSelector: &snapv1.PVCSelector{}}
	objs.Add(sel)
	multi := basePolicy()
	multi.Name = "multi"
	multi.Spec.Repository = nil
	multi.Spec.Repositories = []snapv1.RepositoryRef{{Name: "a"}, {Name: "b"}}
	objs.Add(multi)
	objs.Add(basePolicy())

	s := baseSnapshot()
	s.Spec.PolicyRef.Name = "selector"
	expect(t, SnapshotReferents(ctx, objs, s), "spec.source", "snapflow snapshot now --policy selector")
	s.Spec.Source = &snapv1.SnapshotSource{Target: snapv1.SnapshotTarget{PVC: snapv1.PVCTarget{Name: "x"}}}
	expect(t, SnapshotReferents(ctx, objs, s), "", "")

	s.Spec.Source.SourceIndex = 3
	expect(t, SnapshotReferents(ctx, objs, s), "spec.source.sourceIndex", "has 1 sources")

	// An export is its policy's only source: a pin of a PVC cannot take it.
	export := basePolicy()
	export.Name = "export"
	export.Spec.Sources[0] = snapv1.Source{NFS: &snapv1.NFSExport{Server: "nas", Path: "/media"}}
	objs.Add(export)
	s = baseSnapshot()
	s.Spec.PolicyRef.Name = "export"
	expect(t, SnapshotReferents(ctx, objs, s), "", "")
	s.Spec.Source = &snapv1.SnapshotSource{Target: snapv1.SnapshotTarget{PVC: snapv1.PVCTarget{Name: "data"}}}
	expect(t, SnapshotReferents(ctx, objs, s), "spec.source.sourceIndex", "not a PVC source")

	s = baseSnapshot()
	s.Spec.PolicyRef.Name = "multi"
	expect(t, SnapshotReferents(ctx, objs, s), "spec.repository", "Repository/billing/a, Repository/billing/b")
	s.Spec.Repository = &snapv1.RepositoryRef{Name: "c"}
	expect(t, SnapshotReferents(ctx, objs, s), "spec.repository", "does not list that repository")
	s.Spec.Repository = &snapv1.RepositoryRef{Name: "b"}
	expect(t, SnapshotReferents(ctx, objs, s), "", "")

	// An unreadable policy is allowed: the function checks again.
	s = baseSnapshot()
	s.Spec.PolicyRef.Name = "selector"
	if r := SnapshotReferents(ctx, broken{}, s); !r.OK() || len(r.Warnings) != 1 {
		t.Fatalf("unreadable policy: %v %v", r.Problems(), r.Warnings)
	}
}

func TestRestoreReferents(t *testing.T) {
	ctx := context.Background()
	objs := NewObjects()
	multi := basePolicy()
	multi.Spec.Repository = nil
	multi.Spec.Repositories = []snapv1.RepositoryRef{{Name: "nas"}, {Name: "offsite"}}
	objs.Add(multi)
	rs := &snapv1.Restore{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "billing"},
		Spec: snapv1.RestoreSpec{Source: snapv1.RestoreSource{FromPolicy: &snapv1.FromPolicy{Name: "pg"}}}}
	expect(t, RestoreReferents(ctx, objs, rs), "spec.repository", "set spec.repository to one of: Repository/billing/nas, Repository/billing/offsite")
	rs.Spec.Repository = &snapv1.RepositoryRef{Name: "tape"}
	expect(t, RestoreReferents(ctx, objs, rs), "spec.repository", "not a repository of SnapshotPolicy")
	rs.Spec.Repository = &snapv1.RepositoryRef{Name: "offsite"}
	expect(t, RestoreReferents(ctx, objs, rs), "", "")
}

func TestIdentityDefaultsEditGuard(t *testing.T) {
	ctx := context.Background()
	objs := NewObjects()
	withHistory := basePolicy()
	withHistory.Status.LastSuccessfulSnapshot = &metav1.Time{}
	objs.Add(withHistory)
	pinned := basePolicy()
	pinned.Name = "pinned"
	pinned.Spec.Identity = &snapv1.PolicyIdentity{Username: "u", Hostname: "h"}
	pinned.Status.LastSuccessfulSnapshot = &metav1.Time{}
	objs.Add(pinned)

	old := baseRepo().Spec
	cur := old.DeepCopy()
	cur.IdentityDefaults = &snapv1.IdentityDefaults{Cluster: "eu1"}
	key := "Repository/billing/nas"
	r := RepositoryReferents(ctx, objs, key, nil, &old, cur)
	expect(t, r, "spec.identityDefaults", "billing/pg")
	if strings.Contains(strings.Join(r.Problems(), ""), "pinned") {
		t.Fatal("a policy with a fully pinned identity is not affected")
	}
	r = RepositoryReferents(ctx, objs, key, map[string]string{wellknown.AnnotationAllowIdentityChange: "yes"}, &old, cur)
	if !r.OK() || len(r.Warnings) != 1 {
		t.Fatalf("acknowledged edit should warn: %v %v", r.Problems(), r.Warnings)
	}
	expect(t, RepositoryReferents(ctx, objs, "Repository/other/nas", nil, &old, cur), "", "")
}

func TestPrivilegedMoverWarning(t *testing.T) {
	ctx := context.Background()
	objs := NewObjects()
	objs.Add(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "billing"}})
	objs.Add(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "trusted", Annotations: map[string]string{wellknown.AnnotationPrivilegedMovers: "true"}}})
	p := basePolicy()
	p.Spec.Mover = &snapv1.MoverSpec{SecurityContext: &corev1.SecurityContext{RunAsUser: ptr.To[int64](0)}}
	r := PolicyReferents(ctx, objs, p, nil)
	if !r.OK() || len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "MoverPermitted=False") {
		t.Fatalf("root mover without opt-in: %v %v", r.Problems(), r.Warnings)
	}
	p.Namespace = "trusted"
	if r := PolicyReferents(ctx, objs, p, nil); len(r.Warnings) != 0 {
		t.Fatalf("opted-in namespace: %v", r.Warnings)
	}
	p.Namespace = "billing"
	p.Spec.Mover = &snapv1.MoverSpec{SecurityContext: &corev1.SecurityContext{RunAsUser: ptr.To[int64](1000)}}
	if r := PolicyReferents(ctx, objs, p, nil); len(r.Warnings) != 0 {
		t.Fatalf("unprivileged mover: %v", r.Warnings)
	}
	p.Spec.Mover = &snapv1.MoverSpec{SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN"}}}}
	if r := PolicyReferents(ctx, objs, p, nil); len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "SYS_ADMIN") {
		t.Fatalf("added capability: %v", r.Warnings)
	}

	// A namespaced Repository: its moverDefaults, a bare node path and an
	// inline NFS export.
	repo := &snapv1.Repository{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "billing"}, Spec: snapv1.RepositorySpec{
		Backend: snapv1.Backend{Filesystem: &snapv1.FilesystemBackend{Path: "/var/lib"}}}}
	if r := RepositoryPrivilege(ctx, objs, repo); len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "node path /var/lib") {
		t.Fatalf("bare node path: %v", r.Warnings)
	}
	repo.Spec.Backend.Filesystem.Volume = &snapv1.FilesystemVolume{NFS: &snapv1.NFSExport{Server: "nas", Path: "/export"}}
	if r := RepositoryPrivilege(ctx, objs, repo); len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "NFS export nas:/export") {
		t.Fatalf("inline NFS: %v", r.Warnings)
	}
	repo.Spec.Backend.Filesystem.Volume = &snapv1.FilesystemVolume{PVC: &snapv1.LocalObjectRef{Name: "repo"}}
	if r := RepositoryPrivilege(ctx, objs, repo); len(r.Warnings) != 0 {
		t.Fatalf("a PVC-backed repository: %v", r.Warnings)
	}
	repo.Spec.MoverDefaults = &snapv1.MoverDefaults{PodSecurityContext: &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](0)}}
	if r := RepositoryPrivilege(ctx, objs, repo); len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "runs as root") {
		t.Fatalf("root moverDefaults: %v", r.Warnings)
	}
	repo.Namespace = "trusted"
	if r := RepositoryPrivilege(ctx, objs, repo); len(r.Warnings) != 0 {
		t.Fatalf("opted-in namespace: %v", r.Warnings)
	}
}
