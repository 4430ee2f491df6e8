package moverjob

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/internal/kopia"
	"github.com/snapflow/snapflow/internal/mover"
	"github.com/snapflow/snapflow/internal/privilege"
)

func params() Params {
	return Params{
		Name: "snap-1234", Namespace: "apps", Image: "snapflow:test",
		Owner:          metav1.OwnerReference{APIVersion: "kopiur.home-operations.com/v1alpha1", Kind: "Snapshot", Name: "snap", UID: "u1"},
		Work:           mover.WorkSpec{Operation: mover.OpSnapshot, Target: mover.Target{Kind: "Snapshot", Name: "snap"}, Repository: mover.Repository{Backend: kopia.Backend{Filesystem: &kopia.FilesystemBackend{Path: "/repo"}}}, Snapshot: &mover.SnapshotWork{}},
		PasswordSecret: "pw", SourceClaim: "data", SourceReadOnly: true, RepositoryClaim: "repo-pvc",
	}
}

func TestBuildDefaults(t *testing.T) {
	job, cm, err := Build(params())
	if err != nil {
		t.Fatal(err)
	}
	spec := job.Spec.Template.Spec
	c := spec.Containers[0]
	if *job.Spec.BackoffLimit != DefaultBackoffLimit || *job.Spec.ActiveDeadlineSeconds != DefaultActiveDeadline || *job.Spec.TTLSecondsAfterFinished != DefaultTTLSecondsAfterDone {
		t.Errorf("failure policy defaults: backoff %d deadline %d ttl %d", *job.Spec.BackoffLimit, *job.Spec.ActiveDeadlineSeconds, *job.Spec.TTLSecondsAfterFinished)
	}
	if PodStartupDeadline(job).Seconds() != float64(DefaultPodStartupDeadline) {
		t.Errorf("pod startup deadline %s", PodStartupDeadline(job))
	}
	psc := spec.SecurityContext
	if *psc.RunAsUser != 65532 || *psc.RunAsGroup != 65532 || *psc.FSGroup != 65532 || !*psc.RunAsNonRoot || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod security context %+v", psc)
	}
	if c.SecurityContext.Capabilities.Drop[0] != "ALL" || *c.SecurityContext.AllowPrivilegeEscalation || !*c.SecurityContext.ReadOnlyRootFilesystem {
		t.Errorf("container security context %+v", c.SecurityContext)
	}
	// A reported failure ends the Job; crashes and retryable failures
	// (ExitRetryable: the storage unreachable) get another pod.
	if pfp := job.Spec.PodFailurePolicy; pfp == nil || len(pfp.Rules) != 1 || pfp.Rules[0].Action != batchv1.PodFailurePolicyActionFailJob ||
		len(pfp.Rules[0].OnExitCodes.Values) != 1 || pfp.Rules[0].OnExitCodes.Values[0] != mover.ExitReported || *pfp.Rules[0].OnExitCodes.ContainerName != "mover" {
		t.Errorf("pod failure policy %+v", job.Spec.PodFailurePolicy)
	}
	// The mover reports through its termination message: no API token.
	if a := spec.AutomountServiceAccountToken; a == nil || *a {
		t.Errorf("automountServiceAccountToken = %v, want false", a)
	}
	args := strings.Join(c.Args, " ")
	for _, want := range []string{"mover", "--work " + WorkDir + "/work.json", "--source " + SourceDir, "--repository-root " + RepositoryRoot, "--cache-dir " + CacheDir,
		"--config-dir " + ConfigDir, "--termination-log " + corev1.TerminationMessagePathDefault} {
		if !strings.Contains(args, want) {
			t.Errorf("args %q lack %q", args, want)
		}
	}
	if c.Env[0].Name != mover.EnvPassword || c.Env[0].ValueFrom.SecretKeyRef.Name != "pw" || c.Env[0].ValueFrom.SecretKeyRef.Key != mover.EnvPassword {
		t.Errorf("password env %+v", c.Env[0])
	}
	// With a read-only root, kopia's config lives in memory and its
	// temporary files in a volume of the pod's own.
	mountedAt := map[string]string{}
	for _, m := range c.VolumeMounts {
		mountedAt[m.MountPath] = m.Name
	}
	for _, v := range spec.Volumes {
		switch v.Name {
		case mountedAt[ConfigDir]:
			if v.EmptyDir == nil || v.EmptyDir.Medium != corev1.StorageMediumMemory {
				t.Errorf("kopia's config volume %+v, want a memory emptyDir", v.VolumeSource)
			}
		case mountedAt[TmpDir]:
			if v.EmptyDir == nil {
				t.Errorf("the temp volume %+v, want an emptyDir", v.VolumeSource)
			}
		}
	}
	if mountedAt[ConfigDir] == "" || mountedAt[TmpDir] == "" || !slices.Contains(c.Env, corev1.EnvVar{Name: "TMPDIR", Value: TmpDir}) {
		t.Errorf("config and temp volumes or TMPDIR missing: mounts %v env %+v", mountedAt, c.Env)
	}
	var sawSource bool
	for _, v := range spec.Volumes {
		if v.Name == "source" {
			sawSource = v.PersistentVolumeClaim.ClaimName == "data" && v.PersistentVolumeClaim.ReadOnly
		}
	}
	if !sawSource {
		t.Error("the source PVC must be mounted read-only")
	}
	if strings.Contains(cm.Data[mover.WorkSpecKey], "pw") && strings.Contains(cm.Data[mover.WorkSpecKey], "KOPIA_PASSWORD") {
		t.Error("the work spec must not carry credentials")
	}
	if _, err := mover.Parse([]byte(cm.Data[mover.WorkSpecKey])); err != nil {
		t.Errorf("the rendered work spec does not parse: %v", err)
	}
}

// Every mover Job passes the privilege gate in Build: a root mover, a
// tenant's node path or NFS export or added capabilities are refused unless
// the namespace opted in; a ClusterRepository's are the administrator's choice.
func TestBuildGatesPrivilege(t *testing.T) {
	root := &snapv1.MoverDefaults{PodSecurityContext: &corev1.PodSecurityContext{RunAsUser: ptr(int64(0))}}
	hostRepo := func(p *Params) { p.RepositoryClaim, p.RepositoryHost = "", "/srv/backups" }
	nfsRepo := func(p *Params) {
		p.RepositoryClaim, p.RepositoryNFS = "", &snapv1.NFSExport{Server: "nas", Path: "/export"}
	}
	cases := []struct {
		name    string
		edit    func(*Params)
		refused string
	}{
		{"hardened default runs", func(*Params) {}, ""},
		{"root from repository defaults", func(p *Params) { p.Defaults = root }, "runs as root"},
		{"opted-in namespace runs root", func(p *Params) { p.Defaults, p.PrivilegedAllowed = root, true }, ""},
		{"capability from the policy", func(p *Params) {
			p.Mover = &snapv1.MoverSpec{SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN"}}}}
		}, "SYS_ADMIN"},
		{"namespaced node path", hostRepo, "node path /srv/backups"},
		{"cluster repository node path", func(p *Params) { hostRepo(p); p.RepositoryHostTrusted = true }, ""},
		{"namespaced inline NFS", nfsRepo, "NFS export nas:/export"},
		{"cluster repository inline NFS", func(p *Params) { nfsRepo(p); p.RepositoryHostTrusted = true }, ""},
		{"nfs source", func(p *Params) {
			p.SourceClaim, p.SourceNFS = "", &corev1.NFSVolumeSource{Server: "nas", Path: "/media"}
		}, "NFS export nas:/media"},
		{"nfs source naming the cluster repository's export", func(p *Params) {
			nfsRepo(p)
			p.RepositoryHostTrusted = true
			p.SourceClaim, p.SourceNFS = "", &corev1.NFSVolumeSource{Server: "nas", Path: "/export"}
		}, "NFS export nas:/export"},
		{"opted-in namespace reads an export", func(p *Params) {
			p.SourceClaim, p.SourceNFS, p.PrivilegedAllowed = "", &corev1.NFSVolumeSource{Server: "nas", Path: "/media"}, true
		}, ""},
		{"unconfined seccomp", func(p *Params) {
			p.Mover = &snapv1.MoverSpec{PodSecurityContext: &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}}}
		}, "seccomp"},
		{"selinux type", func(p *Params) {
			p.Mover = &snapv1.MoverSpec{SecurityContext: &corev1.SecurityContext{SELinuxOptions: &corev1.SELinuxOptions{Type: "spc_t"}}}
		}, "SELinux"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := params()
			c.edit(&p)
			job, _, err := Build(p)
			var np *privilege.NotPermitted
			switch {
			case c.refused == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.refused == "":
				if job == nil {
					t.Fatal("no job")
				}
			case !errors.As(err, &np) || !errors.Is(err, privilege.ErrNotPermitted):
				t.Fatalf("err = %v, want a NotPermitted naming %q", err, c.refused)
			case !strings.Contains(err.Error(), c.refused) || !strings.Contains(err.Error(), "apps"):
				t.Fatalf("message %q should name %q and the namespace", err, c.refused)
			}
		})
	}
}

// An nfs source is mounted at SourceDir read-only, whatever the caller asked.
func TestBuildMountsAnExportReadOnly(t *testing.T) {
	p := params()
	p.SourceClaim, p.SourceNFS, p.PrivilegedAllowed = "", &corev1.NFSVolumeSource{Server: "nas", Path: "/media"}, true
	job, _, err := Build(p)
	if err != nil {
		t.Fatal(err)
	}
	spec := job.Spec.Template.Spec
	var vol *corev1.Volume
	for i := range spec.Volumes {
		if spec.Volumes[i].Name == "source" {
			vol = &spec.Volumes[i]
		}
	}
	if vol == nil || vol.NFS == nil || vol.NFS.Server != "nas" || vol.NFS.Path != "/media" || !vol.NFS.ReadOnly {
		t.Fatalf("source volume %+v, want the export read-only", vol)
	}
	var mounted bool
	for _, m := range spec.Containers[0].VolumeMounts {
		if m.Name == "source" {
			mounted = m.MountPath == SourceDir && m.ReadOnly
		}
	}
	if !mounted || !slices.Contains(spec.Containers[0].Args, SourceDir) {
		t.Fatalf("mounts %+v args %v, want the export read-only at %s", spec.Containers[0].VolumeMounts, spec.Containers[0].Args, SourceDir)
	}
}

func TestBuildOverrides(t *testing.T) {
	p := params()
	p.FailurePolicy = &snapv1.FailurePolicy{BackoffLimit: ptr(int32(0)), ActiveDeadlineSeconds: ptr(int64(60)), PodStartupDeadlineSeconds: ptr(int64(30))}
	p.Mover = &snapv1.MoverSpec{TTLSecondsAfterFinished: ptr(int32(5))}
	p.CredentialsSecret = "s3"
	p.CABundle = &snapv1.ConfigMapKeyRef{Name: "ca"}
	p.Work.Repository.Backend = kopia.Backend{S3: &kopia.S3Backend{Bucket: "b"}}
	job, _, err := Build(p)
	if err != nil {
		t.Fatal(err)
	}
	if *job.Spec.BackoffLimit != 0 || *job.Spec.ActiveDeadlineSeconds != 60 || PodStartupDeadline(job).Seconds() != 30 || *job.Spec.TTLSecondsAfterFinished != 5 {
		t.Errorf("overrides not applied: %+v", job.Spec)
	}
	c := job.Spec.Template.Spec.Containers[0]
	// The S3 keys come one by one (the session token optional); nothing
	// else of the Secret.
	var keys []string
	for _, e := range c.Env {
		if r := e.ValueFrom; r != nil && r.SecretKeyRef != nil && r.SecretKeyRef.Name == "s3" && r.SecretKeyRef.Key == e.Name {
			keys = append(keys, fmt.Sprintf("%s:%v", e.Name, r.SecretKeyRef.Optional != nil && *r.SecretKeyRef.Optional))
		}
	}
	if len(c.EnvFrom) != 0 || strings.Join(keys, " ") != "AWS_ACCESS_KEY_ID:false AWS_SECRET_ACCESS_KEY:false AWS_SESSION_TOKEN:true" || !strings.Contains(strings.Join(c.Args, " "), "--ca-file "+CADir+"/ca.crt") {
		t.Errorf("S3 credentials or CA not wired: %+v %+v %v", c.Env, c.EnvFrom, c.Args)
	}
	if strings.Contains(strings.Join(c.Args, " "), "--repository-root") {
		t.Error("an S3 repository mounts no repository volume")
	}
}

func TestName(t *testing.T) {
	long := strings.Repeat("a", 80)
	for _, base := range []string{"snap", long, "trailing-"} {
		n := Name(base, "uid-1")
		if len(n) > 63 || strings.Contains(n, "--") {
			t.Errorf("Name(%q) = %q", base, n)
		}
		if Name(base, "uid-1") != n || Name(base, "uid-2") == n {
			t.Errorf("Name must be stable per uid and differ across uids")
		}
	}
}

func TestCacheVolume(t *testing.T) {
	q := resource.MustParse("5Gi")
	class := "fast"
	tests := []struct {
		name  string
		c     *snapv1.MoverCache
		claim string
		check func(corev1.VolumeSource) bool
	}{
		{"none: emptyDir", nil, "", func(v corev1.VolumeSource) bool { return v.EmptyDir != nil && v.EmptyDir.SizeLimit == nil }},
		{"capacity: capped emptyDir", &snapv1.MoverCache{Capacity: &q}, "", func(v corev1.VolumeSource) bool {
			return v.EmptyDir != nil && v.EmptyDir.SizeLimit != nil && v.EmptyDir.SizeLimit.Cmp(q) == 0
		}},
		{"capacity and class: ephemeral PVC", &snapv1.MoverCache{Capacity: &q, StorageClassName: &class}, "", func(v corev1.VolumeSource) bool {
			e := v.Ephemeral
			return e != nil && *e.VolumeClaimTemplate.Spec.StorageClassName == "fast" && e.VolumeClaimTemplate.Spec.Resources.Requests.Storage().Cmp(q) == 0
		}},
		{"persistent: the claim", &snapv1.MoverCache{Mode: snapv1.CachePersistent, Capacity: &q}, "kopia-cache-x", func(v corev1.VolumeSource) bool {
			return v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == "kopia-cache-x"
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if v := CacheVolume(tt.c, tt.claim); !tt.check(v) {
				t.Fatalf("volume %+v", v)
			}
		})
	}
	a := CacheClaimName("app", "data", snapv1.RepositoryRef{Kind: snapv1.KindRepository, Namespace: "ns", Name: "primary"})
	b := CacheClaimName("app", "data", snapv1.RepositoryRef{Kind: snapv1.KindRepository, Namespace: "ns", Name: "offsite"})
	if a == b || len(a) > 63 {
		t.Fatalf("cache claims per repository must differ and fit a name: %q %q", a, b)
	}
	if pvc := CacheClaim(a, "ns", &snapv1.MoverCache{Mode: snapv1.CachePersistent}, nil); pvc.Spec.Resources.Requests.Storage().String() != DefaultCacheCapacity {
		t.Fatalf("default capacity %v", pvc.Spec.Resources.Requests.Storage())
	}
}

// A function that paces retries by a finished Job keeps it however short
// the mover settings' TTL.
func TestMinTTLSecondsAfterFinished(t *testing.T) {
	for _, tt := range []struct {
		user, min, want int32
		set             bool
	}{
		{want: DefaultTTLSecondsAfterDone},
		{user: 0, set: true, want: 0},
		{user: 0, set: true, min: 1800, want: 1800},
		{user: 7200, set: true, min: 1800, want: 7200},
	} {
		p := params()
		if tt.set {
			p.Defaults = &snapv1.MoverDefaults{TTLSecondsAfterFinished: ptr(tt.user)}
		}
		p.MinTTLSecondsAfterFinished = tt.min
		job, _, err := Build(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := *job.Spec.TTLSecondsAfterFinished; got != tt.want {
			t.Errorf("user TTL %d (set %v), floor %d: TTL %d, want %d", tt.user, tt.set, tt.min, got, tt.want)
		}
	}
}

// A recipe's cache overlays the repository's field by field.
func TestEffectiveCacheOverlays(t *testing.T) {
	q := func(v string) *resource.Quantity { r := resource.MustParse(v); return &r }
	class, fast := "standard", "fast"
	n := func(v int64) *int64 { return &v }
	repo := &snapv1.MoverDefaults{Cache: &snapv1.MoverCache{Capacity: q("8Gi"), StorageClassName: &class, ContentCacheSizeMb: n(100)}}
	tests := []struct {
		name string
		m    *snapv1.MoverSpec
		d    *snapv1.MoverDefaults
		want snapv1.MoverCache
	}{
		{"the repository's alone", nil, repo, *repo.Cache},
		{"the recipe's alone", &snapv1.MoverSpec{Cache: &snapv1.MoverCache{Mode: snapv1.CachePersistent}}, nil, snapv1.MoverCache{Mode: snapv1.CachePersistent}},
		{"only the capacity raised", &snapv1.MoverSpec{Cache: &snapv1.MoverCache{Capacity: q("16Gi")}}, repo,
			snapv1.MoverCache{Capacity: q("16Gi"), StorageClassName: &class, ContentCacheSizeMb: n(100)}},
		{"class and budget replaced", &snapv1.MoverSpec{Cache: &snapv1.MoverCache{StorageClassName: &fast, MetadataCacheSizeMb: n(50)}}, repo,
			snapv1.MoverCache{Capacity: q("8Gi"), StorageClassName: &fast, ContentCacheSizeMb: n(100), MetadataCacheSizeMb: n(50)}},
		{"the recipe's content budget over the repository's", &snapv1.MoverSpec{Cache: &snapv1.MoverCache{ContentCacheSizeMb: n(300)}}, repo,
			snapv1.MoverCache{Capacity: q("8Gi"), StorageClassName: &class, ContentCacheSizeMb: n(300)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := EffectiveCache(tt.m, tt.d)
			if got == nil || !equality.Semantic.DeepEqual(*got, tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
	if repo.Cache.Capacity.String() != "8Gi" || repo.Cache.StorageClassName != &class {
		t.Fatal("the overlay changed the repository's settings")
	}
}

func TestCacheBudgets(t *testing.T) {
	q := resource.MustParse("10Gi")
	n := func(v int64) *int64 { return &v }
	for _, tc := range []struct {
		name              string
		c                 *snapv1.MoverCache
		content, metadata int64
	}{
		{"no cache settings: kopia's defaults", nil, 0, 0},
		{"a capacity alone: 40% each", &snapv1.MoverCache{Capacity: &q}, 4096, 4096},
		{"explicit budgets win", &snapv1.MoverCache{Capacity: &q, ContentCacheSizeMb: n(100)}, 100, 4096},
		{"budgets without a capacity", &snapv1.MoverCache{MetadataCacheSizeMb: n(50)}, 0, 50},
	} {
		var w mover.WorkSpec
		CacheBudgets(&w, tc.c)
		if w.ContentCacheMB != tc.content || w.MetadataCacheMB != tc.metadata {
			t.Errorf("%s: content %d metadata %d, want %d and %d", tc.name, w.ContentCacheMB, w.MetadataCacheMB, tc.content, tc.metadata)
		}
	}
}

func TestPinnedAcceptsOnlyTheWorkSpecTheJobStartedWith(t *testing.T) {
	job, cm, err := Build(params())
	if err != nil {
		t.Fatal(err)
	}
	work := cm.Data[mover.WorkSpecKey]
	edited := strings.Replace(work, `"snap"`, `"someone-else"`, 1)
	if edited == work {
		t.Fatal("the edit did not change the work spec")
	}
	unpinned := job.DeepCopy()
	unpinned.Spec.Template.Spec.Containers[0].Args = slices.DeleteFunc(slices.Clone(unpinned.Spec.Template.Spec.Containers[0].Args),
		func(a string) bool { return a == "--work-digest" || strings.HasPrefix(a, "sha256:") })
	renamed := job.DeepCopy()
	renamed.Spec.Template.Spec.Containers[0].Name = "sidecar"
	for _, tc := range []struct {
		name string
		job  *batchv1.Job
		work string
		want bool
	}{
		{"the spec it was built with", job, work, true},
		{"an edited spec", job, edited, false},
		{"an empty spec", job, "", false},
		{"a job without a digest", unpinned, work, false},
		{"a digest on another container", renamed, work, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Pinned(tc.job, tc.work); got != tc.want {
				t.Errorf("Pinned = %v, want %v", got, tc.want)
			}
		})
	}
}

// The mover container's resources are the run's mover.resources, or else
// the repository's moverDefaults.resources: the run's replace the
// defaults as a whole, as a container's resources do.
func TestBuildMoverResources(t *testing.T) {
	q := resource.MustParse
	defaults := &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: q("256Mi")}, Limits: corev1.ResourceList{corev1.ResourceMemory: q("1Gi")}}
	own := &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: q("500m")}}
	for _, tc := range []struct {
		name     string
		defaults *snapv1.MoverDefaults
		mover    *snapv1.MoverSpec
		want     corev1.ResourceRequirements
	}{
		{"none", nil, nil, corev1.ResourceRequirements{}},
		{"the repository's", &snapv1.MoverDefaults{Resources: defaults}, &snapv1.MoverSpec{}, *defaults},
		{"the run's over the repository's", &snapv1.MoverDefaults{Resources: defaults}, &snapv1.MoverSpec{Resources: own}, *own},
		{"the run's alone", nil, &snapv1.MoverSpec{Resources: own}, *own},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := params()
			p.Defaults, p.Mover = tc.defaults, tc.mover
			job, _, err := Build(p)
			if err != nil {
				t.Fatal(err)
			}
			if got := job.Spec.Template.Spec.Containers[0].Resources; !equality.Semantic.DeepEqual(got, tc.want) {
				t.Errorf("resources %+v, want %+v", got, tc.want)
			}
		})
	}
}

// caBundleRef.key picks the ConfigMap key mounted as the mover's CA file
// (ca.crt when unset); the mover always reads it at one path.
func TestBuildMountsTheCABundleKey(t *testing.T) {
	for key, want := range map[string]string{"": "ca.crt", "bundle.pem": "bundle.pem"} {
		p := params()
		p.CABundle = &snapv1.ConfigMapKeyRef{Name: "corp-ca", Key: key}
		p.Work.Repository.Backend = kopia.Backend{S3: &kopia.S3Backend{Bucket: "b"}}
		job, _, err := Build(p)
		if err != nil {
			t.Fatal(err)
		}
		var items []corev1.KeyToPath
		for _, v := range job.Spec.Template.Spec.Volumes {
			if v.ConfigMap != nil && v.ConfigMap.Name == "corp-ca" {
				items = v.ConfigMap.Items
			}
		}
		if len(items) != 1 || items[0].Key != want || items[0].Path != "ca.crt" {
			t.Errorf("key %q: items %+v, want %s mounted as ca.crt", key, items, want)
		}
		if args := strings.Join(job.Spec.Template.Spec.Containers[0].Args, " "); !strings.Contains(args, "--ca-file "+CADir+"/ca.crt") {
			t.Errorf("key %q: args %s", key, args)
		}
	}
}
