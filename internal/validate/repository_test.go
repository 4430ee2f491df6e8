package validate

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
)

func baseRepo() *snapv1.Repository {
	return &snapv1.Repository{
		ObjectMeta: metav1.ObjectMeta{Name: "nas", Namespace: "billing"},
		Spec: snapv1.RepositorySpec{
			Backend:    snapv1.Backend{S3: &snapv1.S3Backend{Bucket: "my-backups", Endpoint: "s3.example.com", Auth: &snapv1.ObjectStoreAuth{SecretRef: &snapv1.SecretRef{Name: "creds"}}}},
			Encryption: snapv1.RepositoryEncryption{PasswordSecretRef: snapv1.SecretKeyRef{Name: "creds", Key: "KOPIA_PASSWORD"}},
		},
	}
}

func TestRepositoryRules(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*snapv1.RepositorySpec)
		path   string
		want   string
	}{
		{"valid", func(*snapv1.RepositorySpec) {}, "", ""},
		{"rule 52: bucket name", func(s *snapv1.RepositorySpec) { s.Backend.S3.Bucket = "My_Bucket" }, "spec.backend.s3.bucket", "not a valid bucket name"},
		{"rule 52: endpoint with scheme", func(s *snapv1.RepositorySpec) { s.Backend.S3.Endpoint = "https://s3.example.com" }, "spec.backend.s3.endpoint", "without a scheme"},
		{"rule 52: two backends", func(s *snapv1.RepositorySpec) { s.Backend.Filesystem = &snapv1.FilesystemBackend{Path: "/r"} }, "spec.backend", "exactly one backend"},
		{"rule 52: relative filesystem path", func(s *snapv1.RepositorySpec) {
			s.Backend = snapv1.Backend{Filesystem: &snapv1.FilesystemBackend{Path: "repo"}}
		}, "spec.backend.filesystem.path", "absolute path"},
		{"rule 52: auth with both forms", func(s *snapv1.RepositorySpec) {
			s.Backend.S3.Auth.WorkloadIdentity = &snapv1.WorkloadIdentity{}
		}, "spec.backend.s3.auth.secretRef", "exactly one of secretRef and workloadIdentity"},
		{"webDav url with credentials", func(s *snapv1.RepositorySpec) {
			s.Backend = snapv1.Backend{WebDAV: &snapv1.WebDAVBackend{URL: "https://ops:hunter2@dav.example.com/r"}}
		}, "spec.backend.webDav.url", "https://ops:xxxxx@dav.example.com/r carries credentials"},
		{"webDav url with a query", func(s *snapv1.RepositorySpec) {
			s.Backend = snapv1.Backend{WebDAV: &snapv1.WebDAVBackend{URL: "https://dav.example.com/r?token=abc"}}
		}, "spec.backend.webDav.url", "a query"},
		{"sftp secret in another namespace", func(s *snapv1.RepositorySpec) {
			s.Backend = snapv1.Backend{SFTP: &snapv1.SFTPBackend{Host: "nas", Path: "/r", Username: "u", Auth: snapv1.SecretAuth{SecretRef: snapv1.SecretRef{Name: "ssh", Namespace: "other"}}}}
		}, "spec.backend.sftp.auth.secretRef.namespace", "its own namespace"},
		{"webDav secret in another namespace", func(s *snapv1.RepositorySpec) {
			s.Backend = snapv1.Backend{WebDAV: &snapv1.WebDAVBackend{URL: "https://dav.example.com/r", Auth: &snapv1.SecretAuth{SecretRef: snapv1.SecretRef{Name: "dav", Namespace: "other"}}}}
		}, "spec.backend.webDav.auth.secretRef.namespace", "its own namespace"},
		{"gcs bucket with capitals", func(s *snapv1.RepositorySpec) {
			s.Backend = snapv1.Backend{GCS: &snapv1.GCSBackend{Bucket: "Team_Backups", Auth: &snapv1.ObjectStoreAuth{SecretRef: &snapv1.SecretRef{Name: "gcs"}}}}
		}, "spec.backend.gcs.bucket", "not a valid bucket name"},
		{"gcs bucket reserved prefix", func(s *snapv1.RepositorySpec) {
			s.Backend = snapv1.Backend{GCS: &snapv1.GCSBackend{Bucket: "google-backups", Auth: &snapv1.ObjectStoreAuth{SecretRef: &snapv1.SecretRef{Name: "gcs"}}}}
		}, "spec.backend.gcs.bucket", "goog"},
		{"gcs prefix with a leading slash", func(s *snapv1.RepositorySpec) {
			s.Backend = snapv1.Backend{GCS: &snapv1.GCSBackend{Bucket: "team_backups", Prefix: "/kopia", Auth: &snapv1.ObjectStoreAuth{SecretRef: &snapv1.SecretRef{Name: "gcs"}}}}
		}, "spec.backend.gcs.prefix", "leading slash"},
		{"gcs secret in another namespace", func(s *snapv1.RepositorySpec) {
			s.Backend = snapv1.Backend{GCS: &snapv1.GCSBackend{Bucket: "b", Auth: &snapv1.ObjectStoreAuth{SecretRef: &snapv1.SecretRef{Name: "gcs", Namespace: "other"}}}}
		}, "spec.backend.gcs.auth.secretRef.namespace", "its own namespace"},
		{"rule 52: cluster with dot", func(s *snapv1.RepositorySpec) { s.IdentityDefaults = &snapv1.IdentityDefaults{Cluster: "eu.prod"} }, "spec.identityDefaults.cluster", "must not contain '.'"},
		{"rule 52: cluster too long", func(s *snapv1.RepositorySpec) {
			s.IdentityDefaults = &snapv1.IdentityDefaults{Cluster: strings.Repeat("a", 33)}
		}, "spec.identityDefaults.cluster", "at most 32"},
		{"rule 52: identity expr type", func(s *snapv1.RepositorySpec) {
			s.IdentityDefaults = &snapv1.IdentityDefaults{HostnameExpr: "namespace == 'x'"}
		}, "spec.identityDefaults.hostnameExpr", "must return a string"},
		{"rule 52: identity expr variable", func(s *snapv1.RepositorySpec) { s.IdentityDefaults = &snapv1.IdentityDefaults{UsernameExpr: "name"} }, "spec.identityDefaults.usernameExpr", "available variables"},
		{"rule 53: refresh interval", func(s *snapv1.RepositorySpec) { s.Catalog = &snapv1.Catalog{RefreshInterval: "10s"} }, "spec.catalog.refreshInterval", "30s minimum"},
		{"rule 53: fallbackNamespace on a Repository", func(s *snapv1.RepositorySpec) { s.Catalog = &snapv1.Catalog{FallbackNamespace: "x"} }, "spec.catalog.fallbackNamespace", "only meaningful on a ClusterRepository"},
		{"rule 53: foreignSnapshots without cluster", func(s *snapv1.RepositorySpec) { s.Catalog = &snapv1.Catalog{ForeignSnapshots: "Ignore"} }, "spec.catalog.foreignSnapshots", "requires a cluster identity"},
		{"rule 53: maxAgeDays", func(s *snapv1.RepositorySpec) {
			s.Catalog = &snapv1.Catalog{Retain: &snapv1.CatalogRetain{MaxAgeDays: ptr.To[int32](0)}}
		}, "spec.catalog.retain.maxAgeDays", "at least 1"},
		{"rule 54: maintenance namespace on a Repository", func(s *snapv1.RepositorySpec) { s.Maintenance = &snapv1.RepositoryMaintenance{Namespace: "x"} }, "spec.maintenance.namespace", "only meaningful on a ClusterRepository"},
		{"rule 54: maintenance cron", func(s *snapv1.RepositorySpec) {
			s.Maintenance = &snapv1.RepositoryMaintenance{Schedule: &snapv1.MaintenanceSchedule{Full: &snapv1.CronSpec{Cron: "every sunday"}}}
		}, "spec.maintenance.schedule.full.cron", "want 5 fields"},
		{"rule 55: insecure server", func(s *snapv1.RepositorySpec) {
			s.Server = &snapv1.RepositoryServer{Enabled: true, Auth: &snapv1.ServerAuth{Insecure: true}}
		}, "spec.server.auth.insecure", "acknowledgeInsecure: true"},
		{"rule 55: read-write server on ReadOnly", func(s *snapv1.RepositorySpec) {
			s.Mode = snapv1.ModeReadOnly
			s.Server = &snapv1.RepositoryServer{ReadOnly: ptr.To(false)}
		}, "spec.server.readOnly", "mode: ReadOnly"},
		{"rule 56: parameters on ReadOnly", func(s *snapv1.RepositorySpec) {
			s.Mode = snapv1.ModeReadOnly
			s.Parameters = &snapv1.RepositoryParameters{Epoch: &snapv1.EpochParameters{MinDuration: "1h"}}
		}, "spec.parameters", "mode: ReadOnly forbids"},
		{"rule 56: blobRetention period in days", func(s *snapv1.RepositorySpec) {
			s.Parameters = &snapv1.RepositoryParameters{BlobRetention: &snapv1.BlobRetention{Mode: "COMPLIANCE", Period: "30d"}}
		}, "spec.parameters.blobRetention.period", "720h"},
		{"rule 56: blobRetention on filesystem", func(s *snapv1.RepositorySpec) {
			s.Backend = snapv1.Backend{Filesystem: &snapv1.FilesystemBackend{Path: "/r"}}
			s.Parameters = &snapv1.RepositoryParameters{BlobRetention: &snapv1.BlobRetention{Mode: "COMPLIANCE", Period: "720h"}}
		}, "spec.parameters.blobRetention", "s3, azure or gcs"},
		{"rule 57: probe interval", func(s *snapv1.RepositorySpec) { s.Health = &snapv1.Health{Probe: &snapv1.HealthProbe{Interval: "5s"}} }, "spec.health.probe.interval", "30s minimum"},
		{"rule 57: failure threshold", func(s *snapv1.RepositorySpec) {
			s.Health = &snapv1.Health{Probe: &snapv1.HealthProbe{FailureThreshold: ptr.To[int32](0)}}
		}, "spec.health.probe.failureThreshold", "at least 1"},
		{"rule 58: reserved pod label", func(s *snapv1.RepositorySpec) {
			s.MoverDefaults = &snapv1.MoverDefaults{PodLabels: map[string]string{"app.kubernetes.io/managed-by": "me"}}
		}, "spec.moverDefaults.podLabels[app.kubernetes.io/managed-by]", "reserved by snapflow"},
		{"rule 58: scheduleDefaults jitter", func(s *snapv1.RepositorySpec) { s.ScheduleDefaults = &snapv1.ScheduleDefaults{Jitter: "30h"} }, "spec.scheduleDefaults.jitter", "24h maximum"},
		{"rule 59: seed on ReadOnly", func(s *snapv1.RepositorySpec) {
			s.Mode = snapv1.ModeReadOnly
			s.Seed = &snapv1.Seed{From: snapv1.SeedFrom{Repository: &snapv1.RepositoryRef{Name: "old"}}}
		}, "spec.seed", "mode: ReadOnly forbids"},
		{"rule 59: seed sync from a repository", func(s *snapv1.RepositorySpec) {
			s.Seed = &snapv1.Seed{From: snapv1.SeedFrom{Repository: &snapv1.RepositoryRef{Name: "old"}}, Sync: &snapv1.SeedSync{}}
		}, "spec.seed.sync", "use seed.migrate"},
		{"rule 59: seed from own storage", func(s *snapv1.RepositorySpec) {
			b := s.Backend
			s.Seed = &snapv1.Seed{From: snapv1.SeedFrom{Backend: &b}}
		}, "spec.seed.from.backend", "own storage"},
		{"rule 59: seed from a bare node path", func(s *snapv1.RepositorySpec) {
			s.Seed = &snapv1.Seed{From: snapv1.SeedFrom{Backend: &snapv1.Backend{Filesystem: &snapv1.FilesystemBackend{Path: "/old"}}}}
		}, "spec.seed.from.backend.filesystem.volume", "must be mountable"},
		{"rule 59: seed secret in another namespace", func(s *snapv1.RepositorySpec) {
			s.Seed = &snapv1.Seed{From: snapv1.SeedFrom{Backend: &snapv1.Backend{S3: &snapv1.S3Backend{Bucket: "old-backups", Auth: &snapv1.ObjectStoreAuth{SecretRef: &snapv1.SecretRef{Name: "c", Namespace: "other"}}}}}}
		}, "spec.seed.from.backend", "its own namespace"},
		{"rule 59: migrate seed naming itself", func(s *snapv1.RepositorySpec) {
			s.Seed = &snapv1.Seed{From: snapv1.SeedFrom{Repository: &snapv1.RepositoryRef{Name: "nas"}}}
		}, "spec.seed.from.repository", "names this repository itself"},
		{"rule 59: seed path collides", func(s *snapv1.RepositorySpec) {
			s.Backend = snapv1.Backend{Filesystem: &snapv1.FilesystemBackend{Path: "/repo", Volume: &snapv1.FilesystemVolume{PVC: &snapv1.LocalObjectRef{Name: "new"}}}}
			s.Seed = &snapv1.Seed{From: snapv1.SeedFrom{Backend: &snapv1.Backend{Filesystem: &snapv1.FilesystemBackend{Path: "/repo", Volume: &snapv1.FilesystemVolume{PVC: &snapv1.LocalObjectRef{Name: "old"}}}}}}
		}, "spec.seed.from.backend.filesystem.path", "would collide"},
		{"rule 59: seed source without credentials", func(s *snapv1.RepositorySpec) {
			s.Seed = &snapv1.Seed{From: snapv1.SeedFrom{Backend: &snapv1.Backend{S3: &snapv1.S3Backend{Bucket: "old-backups"}}}}
		}, "spec.seed.from.backend.s3.auth", "needs credentials"},
		{"password namespace on a Repository", func(s *snapv1.RepositorySpec) { s.Encryption.PasswordSecretRef.Namespace = "other" }, "spec.encryption.passwordSecretRef.namespace", "its own namespace"},
		{"its own namespace spelled out (as Kopiur manifests may)", func(s *snapv1.RepositorySpec) {
			s.Encryption.PasswordSecretRef.Namespace = "billing"
			s.Backend = snapv1.Backend{SFTP: &snapv1.SFTPBackend{Host: "nas", Path: "/r", Username: "u", Auth: snapv1.SecretAuth{SecretRef: snapv1.SecretRef{Name: "ssh", Namespace: "billing"}}}}
		}, "", ""},
		{"throttle of 0", func(s *snapv1.RepositorySpec) {
			zero := int64(0)
			s.MoverDefaults = &snapv1.MoverDefaults{Throttle: &snapv1.Throttle{UploadBytesPerSecond: &zero}}
		}, "spec.moverDefaults.throttle.uploadBytesPerSecond", "absent field, not 0"},
		{"throttle set", func(s *snapv1.RepositorySpec) {
			rate := int64(5 << 20)
			s.MoverDefaults = &snapv1.MoverDefaults{Throttle: &snapv1.Throttle{UploadBytesPerSecond: &rate, ReadOpsPerSecond: &rate}}
		}, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := baseRepo()
			tc.mutate(&r.Spec)
			expect(t, Repository(r, admission), tc.path, tc.want)
		})
	}
}

func TestRepositoryWarnings(t *testing.T) {
	r := baseRepo()
	r.Spec.Backend.S3.TLS = &snapv1.BackendTLS{CABundleRef: &snapv1.ConfigMapKeyRef{Name: "ca"}, InsecureSkipVerify: true}
	if res := Repository(r, admission); !res.OK() || len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "insecureSkipVerify") {
		t.Fatalf("rule 62 (s3): %v %v", res.Problems(), res.Warnings)
	}
	r = baseRepo()
	r.Spec.Backend = snapv1.Backend{Filesystem: &snapv1.FilesystemBackend{Path: "/r", Volume: &snapv1.FilesystemVolume{NFS: &snapv1.NFSExport{Server: "nas", Path: "/x"}}}}
	r.Spec.MoverDefaults = &snapv1.MoverDefaults{PodSecurityContext: &corev1.PodSecurityContext{FSGroup: ptr.To[int64](1000)}}
	if res := Repository(r, admission); !res.OK() || len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "supplementalGroups") {
		t.Fatalf("rule 62 (nfs): %v %v", res.Problems(), res.Warnings)
	}
}

func TestClusterRepositoryRules(t *testing.T) {
	base := func() *snapv1.ClusterRepository {
		r := baseRepo()
		c := &snapv1.ClusterRepository{ObjectMeta: metav1.ObjectMeta{Name: "shared"}, Spec: snapv1.ClusterRepositorySpec{RepositorySpec: r.Spec}}
		c.Spec.Encryption.PasswordSecretRef.Namespace = "snapflow-system"
		c.Spec.AllowedNamespaces = &snapv1.AllowedNamespaces{All: ptr.To(true)}
		return c
	}
	tests := []struct {
		name   string
		mutate func(*snapv1.ClusterRepository)
		path   string
		want   string
	}{
		{"valid", func(*snapv1.ClusterRepository) {}, "", ""},
		{"rule 60: all false", func(c *snapv1.ClusterRepository) { c.Spec.AllowedNamespaces.All = ptr.To(false) }, "spec.allowedNamespaces.all", "must be true"},
		{"rule 60: two forms", func(c *snapv1.ClusterRepository) { c.Spec.AllowedNamespaces.List = []string{"a"} }, "spec.allowedNamespaces", "exactly one of"},
		{"password namespace required", func(c *snapv1.ClusterRepository) { c.Spec.Encryption.PasswordSecretRef.Namespace = "" }, "spec.encryption.passwordSecretRef.namespace", "no namespace of its own"},
		{"rule 53: fallback needs a choice", func(c *snapv1.ClusterRepository) { c.Spec.Catalog = &snapv1.Catalog{FallbackNamespace: "lost"} }, "spec.catalog.foreignSnapshots", "Ignore or Fallback"},
		{"rule 55: server namespace", func(c *snapv1.ClusterRepository) { c.Spec.Server = &snapv1.RepositoryServer{Enabled: true} }, "spec.server.namespace", "needs a namespace"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := base()
			tc.mutate(c)
			expect(t, ClusterRepository(c, admission), tc.path, tc.want)
		})
	}
}

func TestRepositoryUpdate(t *testing.T) {
	old := baseRepo().Spec
	old.Create = &snapv1.RepositoryCreate{Enabled: true, Splitter: "DYNAMIC-4M-BUZHASH", Hash: "BLAKE2B-256-128"}
	edit := old.DeepCopy()
	edit.Create.Splitter = "FIXED-4M"
	expect(t, RepositoryUpdate(&old, edit, true), "spec.create.splitter", "immutable after repository creation")
	// Before any kopia repository was made for it, the format is still
	// only an intention: a Repository that never connected may change it.
	expect(t, RepositoryUpdate(&old, edit, false), "", "")
	// The password Secret reference stays editable.
	pw := old.DeepCopy()
	pw.Encryption.PasswordSecretRef.Name = "rotated"
	expect(t, RepositoryUpdate(&old, pw, true), "", "")
}
