package validate

import (
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
)

func TestRepositoryUnsupported(t *testing.T) {
	catalog := func(s *snapv1.RepositorySpec) { s.Catalog = &snapv1.Catalog{PeriodicRefresh: true} }
	for _, tc := range []struct {
		name       string
		prev, cur  func(*snapv1.RepositorySpec)
		cluster    bool
		path, want string
		warning    string
	}{
		{name: "nothing unsupported", cur: func(*snapv1.RepositorySpec) {}},
		{name: "catalog", cur: catalog, path: "spec.catalog", want: "not supported by snapflow yet"},
		{name: "seed", cur: func(s *snapv1.RepositorySpec) {
			s.Seed = &snapv1.Seed{From: snapv1.SeedFrom{Repository: &snapv1.RepositoryRef{Name: "old"}}}
		}, path: "spec.seed", want: "cannot seed"},
		{name: "server", cur: func(s *snapv1.RepositorySpec) { s.Server = &snapv1.RepositoryServer{Enabled: true} }, path: "spec.server", want: "web UI"},
		{name: "parameters", cur: func(s *snapv1.RepositorySpec) {
			s.Parameters = &snapv1.RepositoryParameters{BlobRetention: &snapv1.BlobRetention{Mode: "GOVERNANCE", Period: "720h"}}
		}, path: "spec.parameters", want: "epoch or blob-retention"},
		{name: "index blob threshold", cur: func(s *snapv1.RepositorySpec) {
			s.Health = &snapv1.Health{IndexBlobWarnThreshold: ptr.To[int32](1000)}
		}, path: "spec.health.indexBlobWarnThreshold", want: "index blobs"},
		{name: "health probe alone is fine", cur: func(s *snapv1.RepositorySpec) {
			s.Health = &snapv1.Health{Probe: &snapv1.HealthProbe{Interval: "10m"}}
		}},
		{name: "stored before the rule: warned, kept", prev: catalog, cur: catalog, warning: "spec.catalog: not supported by snapflow yet"},
		{name: "changed after the rule: refused", prev: catalog, cur: func(s *snapv1.RepositorySpec) { s.Catalog = &snapv1.Catalog{RefreshInterval: "2h"} }, path: "spec.catalog", want: "remove it"},
		{name: "onNamespaceDelete Delete on a Repository", cur: func(s *snapv1.RepositorySpec) { s.OnNamespaceDelete = snapv1.NamespaceDeleteDelete }, path: "spec.onNamespaceDelete", want: "put the repository in a ClusterRepository"},
		{name: "onNamespaceDelete Delete on a ClusterRepository", cluster: true, cur: func(s *snapv1.RepositorySpec) { s.OnNamespaceDelete = snapv1.NamespaceDeleteDelete }},
		{name: "onNamespaceDelete Delete stored before the rule", warning: "it acts as Orphan", prev: func(s *snapv1.RepositorySpec) { s.OnNamespaceDelete = snapv1.NamespaceDeleteDelete },
			cur: func(s *snapv1.RepositorySpec) { s.OnNamespaceDelete = snapv1.NamespaceDeleteDelete }},
		{name: "gcs backend with a key", cur: func(s *snapv1.RepositorySpec) {
			s.Backend = snapv1.Backend{GCS: &snapv1.GCSBackend{Bucket: "b", Auth: &snapv1.ObjectStoreAuth{SecretRef: &snapv1.SecretRef{Name: "gcs"}}}}
		}},
		{name: "gcs without a key", cur: func(s *snapv1.RepositorySpec) { s.Backend = snapv1.Backend{GCS: &snapv1.GCSBackend{Bucket: "b"}} },
			path: "spec.backend.gcs.auth.secretRef", want: "node's own identity"},
		{name: "s3 without keys", cur: func(s *snapv1.RepositorySpec) { s.Backend = snapv1.Backend{S3: &snapv1.S3Backend{Bucket: "bucket"}} },
			path: "spec.backend.s3.auth.secretRef", want: "instance role"},
		{name: "s3 without keys, stored before the rule: warned, kept", prev: func(s *snapv1.RepositorySpec) { s.Backend = snapv1.Backend{S3: &snapv1.S3Backend{Bucket: "bucket"}} },
			cur: func(s *snapv1.RepositorySpec) { s.Backend = snapv1.Backend{S3: &snapv1.S3Backend{Bucket: "bucket"}} }, warning: "every run against it fails until it is set"},
		{name: "gcs workload identity", cur: func(s *snapv1.RepositorySpec) {
			s.Backend = snapv1.Backend{GCS: &snapv1.GCSBackend{Bucket: "b", Auth: &snapv1.ObjectStoreAuth{WorkloadIdentity: &snapv1.WorkloadIdentity{}}}}
		}, path: "spec.backend.gcs.auth.workloadIdentity", want: "KOPIA_GCS_CREDENTIALS_JSON"},
		{name: "azure backend", cur: func(s *snapv1.RepositorySpec) { s.Backend = snapv1.Backend{Azure: &snapv1.AzureBackend{}} }, path: "spec.backend.azure", want: "filesystem, s3, sftp, webDav and gcs"},
		{name: "b2 backend", cur: func(s *snapv1.RepositorySpec) {
			s.Backend = snapv1.Backend{B2: &snapv1.B2Backend{Bucket: "b", Auth: snapv1.SecretAuth{SecretRef: snapv1.SecretRef{Name: "b2"}}}}
		}, path: "spec.backend.b2", want: "every run against a b2 repository would fail"},
		{name: "gdrive backend", cur: func(s *snapv1.RepositorySpec) {
			s.Backend = snapv1.Backend{GDrive: &snapv1.GDriveBackend{FolderID: "f", Auth: snapv1.SecretAuth{SecretRef: snapv1.SecretRef{Name: "gd"}}}}
		}, path: "spec.backend.gdrive", want: "every run against a gdrive repository would fail"},
		{name: "b2 backend on a ClusterRepository", cluster: true, cur: func(s *snapv1.RepositorySpec) {
			s.Backend = snapv1.Backend{B2: &snapv1.B2Backend{Bucket: "b", Auth: snapv1.SecretAuth{SecretRef: snapv1.SecretRef{Name: "b2"}}}}
		}, path: "spec.backend.b2", want: "b2 repository"},
		{name: "rclone backend", cur: func(s *snapv1.RepositorySpec) {
			s.Backend = snapv1.Backend{Rclone: &snapv1.RcloneBackend{RemotePath: "r:p"}}
		}, path: "spec.backend.rclone", want: "rclone"},
		{name: "s3 workload identity", cur: func(s *snapv1.RepositorySpec) {
			s.Backend = snapv1.Backend{S3: &snapv1.S3Backend{Bucket: "bkt", Auth: &snapv1.ObjectStoreAuth{WorkloadIdentity: &snapv1.WorkloadIdentity{ServiceAccountName: "irsa"}}}}
		}, path: "spec.backend.s3.auth.workloadIdentity", want: "use auth.secretRef"},
		{name: "s3 access keys are supported", cur: func(s *snapv1.RepositorySpec) {
			s.Backend = snapv1.Backend{S3: &snapv1.S3Backend{Bucket: "bkt", Auth: &snapv1.ObjectStoreAuth{SecretRef: &snapv1.SecretRef{Name: "keys"}}}}
		}},
		{name: "webDav backend is supported", cur: func(s *snapv1.RepositorySpec) {
			s.Backend = snapv1.Backend{WebDAV: &snapv1.WebDAVBackend{URL: "https://dav.example.com/r"}}
		}},
		{name: "sftp backend is supported", cur: func(s *snapv1.RepositorySpec) {
			s.Backend = snapv1.Backend{SFTP: &snapv1.SFTPBackend{Host: "nas", Path: "/r", Username: "u", Auth: snapv1.SecretAuth{SecretRef: snapv1.SecretRef{Name: "ssh"}}}}
		}},
		{name: "onNamespaceDelete Orphan", cur: func(s *snapv1.RepositorySpec) { s.OnNamespaceDelete = snapv1.NamespaceDeleteOrphan }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var prev *snapv1.RepositorySpec
			if tc.prev != nil {
				prev = &baseRepo().Spec
				tc.prev(prev)
			}
			cur := &baseRepo().Spec
			tc.cur(cur)
			r := RepositoryUnsupported(prev, cur, tc.cluster)
			expect(t, r, tc.path, tc.want)
			if tc.warning != "" && !strings.Contains(strings.Join(r.Warnings, "\n"), tc.warning) {
				t.Fatalf("warnings %q, want one containing %q", r.Warnings, tc.warning)
			}
		})
	}
}

func TestPolicyUnsupported(t *testing.T) {
	adopt := &snapv1.SnapshotPolicySpec{Adoption: "Adopt"}
	expect(t, PolicyUnsupported(nil, &snapv1.SnapshotPolicySpec{}), "", "")
	expect(t, PolicyUnsupported(nil, adopt), "spec.adoption", "nothing to adopt")
	if r := PolicyUnsupported(adopt, adopt); !r.OK() || len(r.Warnings) != 1 {
		t.Fatalf("a stored adoption: %+v, want one warning and no error", r)
	}
	nfs := &snapv1.SnapshotPolicySpec{Sources: []snapv1.Source{{PVC: &snapv1.LocalObjectRef{Name: "a"}}, {NFS: &snapv1.NFSExport{Server: "nas", Path: "/x"}}}}
	expect(t, PolicyUnsupported(nil, nfs), "spec.sources[1].nfs", "only source of its SnapshotPolicy")
	if r := PolicyUnsupported(nfs, nfs); !r.OK() || len(r.Warnings) != 1 {
		t.Fatalf("a stored nfs source beside another: %+v, want one warning and no error", r)
	}
	alone := &snapv1.SnapshotPolicySpec{Sources: []snapv1.Source{nfs.Sources[1]}}
	if r := PolicyUnsupported(nfs, alone); !r.OK() || len(r.Warnings) != 0 {
		t.Fatalf("an nfs source on its own is supported: %+v, want neither error nor warning", r)
	}
	expect(t, PolicyUnsupported(alone, nfs), "spec.sources[1].nfs", "only source of its SnapshotPolicy")
	stream := &snapv1.SnapshotPolicySpec{Sources: []snapv1.Source{streamSource("dump.sql")}}
	if r := PolicyUnsupported(nil, stream); !r.OK() || len(r.Warnings) > 0 {
		t.Fatalf("a stream source is supported: %v %v", r.Errs, r.Warnings)
	}
	if r := RestoreUnsupported(&snapv1.RestoreSpec{Target: snapv1.RestoreTarget{StreamExec: &snapv1.StreamExecTarget{}}}); !r.OK() {
		t.Fatalf("a streamExec target is supported: %v", r.Errs)
	}
	expect(t, RestoreUnsupported(&snapv1.RestoreSpec{Target: snapv1.RestoreTarget{PVCRef: &snapv1.LocalObjectRef{Name: "d"}}}), "", "")
	persistent := &snapv1.MoverSpec{Cache: &snapv1.MoverCache{Mode: snapv1.CachePersistent}}
	expect(t, RestoreUnsupported(&snapv1.RestoreSpec{Target: snapv1.RestoreTarget{PVCRef: &snapv1.LocalObjectRef{Name: "d"}}, Mover: persistent}), "spec.mover.cache.mode", "runs once")
	ephemeral := &snapv1.MoverSpec{Cache: &snapv1.MoverCache{Mode: snapv1.CacheEphemeral}}
	expect(t, RestoreUnsupported(&snapv1.RestoreSpec{Target: snapv1.RestoreTarget{PVCRef: &snapv1.LocalObjectRef{Name: "d"}}, Mover: ephemeral}), "", "")

	// cache.ownership changes nothing; the fsGroup does what it asks.
	owned := &snapv1.MoverSpec{Cache: &snapv1.MoverCache{Ownership: &snapv1.CacheOwnership{RunAsUser: ptr.To[int64](1000)}}}
	ownedPolicy := &snapv1.SnapshotPolicySpec{Mover: owned}
	expect(t, PolicyUnsupported(nil, ownedPolicy), "spec.mover.cache.ownership", "podSecurityContext.fsGroup")
	if r := PolicyUnsupported(ownedPolicy, ownedPolicy); !r.OK() || len(r.Warnings) != 1 {
		t.Fatalf("a stored cache.ownership: %+v, want one warning and no error", r)
	}
	expect(t, RestoreUnsupported(&snapv1.RestoreSpec{Target: snapv1.RestoreTarget{PVCRef: &snapv1.LocalObjectRef{Name: "d"}}, Mover: owned}), "spec.mover.cache.ownership", "remove it")
	expect(t, RepositoryUnsupported(nil, &snapv1.RepositorySpec{MoverDefaults: &snapv1.MoverDefaults{Cache: owned.Cache}}, false), "spec.moverDefaults.cache.ownership", "fsGroup")
	ownedMaint := &snapv1.MaintenanceSpec{Mover: owned}
	expect(t, MaintenanceUnsupported(nil, ownedMaint), "spec.mover.cache.ownership", "fsGroup")
	if r := MaintenanceUnsupported(ownedMaint, ownedMaint); !r.OK() || len(r.Warnings) != 1 {
		t.Fatalf("a stored Maintenance cache.ownership: %+v, want one warning and no error, so its finalizers can come off", r)
	}
}

// A preflight check reading a value that may not be observed yet, without
// its flag, is admitted with a warning saying it holds runs until then.
func TestUnguardedPreflightWarns(t *testing.T) {
	p := basePolicy()
	p.Spec.Preflight = &snapv1.Preflight{Checks: []snapv1.PreflightCheck{{Name: "small", Expr: "repository.indexBlobCount < 500"}}}
	r := SnapshotPolicy(p, admission)
	if !r.OK() || !strings.Contains(strings.Join(r.Warnings, "\n"), "spec.preflight.checks[0].expr reads repository.indexBlobCount without repository.indexBlobCountKnown") {
		t.Fatalf("problems %v, warnings %q", r.Problems(), r.Warnings)
	}
}

func TestRepositoryOwnNamespace(t *testing.T) {
	s3 := func(secretNS, caNS string) *snapv1.RepositorySpec {
		return &snapv1.RepositorySpec{Backend: snapv1.Backend{S3: &snapv1.S3Backend{Bucket: "b",
			Auth: &snapv1.ObjectStoreAuth{SecretRef: &snapv1.SecretRef{Name: "keys", Namespace: secretNS}},
			TLS:  &snapv1.BackendTLS{CABundleRef: &snapv1.ConfigMapKeyRef{Name: "ca", Namespace: caNS}}}}}
	}
	for _, tc := range []struct {
		name       string
		prev, cur  *snapv1.RepositorySpec
		path, want string
		warning    string
	}{
		{name: "no namespace", cur: s3("", "")},
		{name: "its own namespace, spelled out", cur: s3("team-a", "team-a")},
		{name: "another namespace's keys", cur: s3("team-b", ""), path: "spec.backend.s3.auth.secretRef.namespace", want: `"team-b" would be ignored`},
		{name: "another namespace's CA bundle", cur: s3("", "kube-system"), path: "spec.backend.s3.tls.caBundleRef.namespace", want: "use a ClusterRepository"},
		{name: "stored before the rule: warned, kept", prev: s3("team-b", ""), cur: s3("team-b", ""), warning: `"team-a" is read`},
		{name: "changed to another namespace: refused", prev: s3("team-b", ""), cur: s3("team-c", ""), path: "spec.backend.s3.auth.secretRef.namespace", want: "remove namespace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := RepositoryOwnNamespace(tc.prev, tc.cur, "team-a")
			expect(t, r, tc.path, tc.want)
			if tc.warning != "" && !strings.Contains(strings.Join(r.Warnings, "\n"), tc.warning) {
				t.Fatalf("warnings %v, want %q", r.Warnings, tc.warning)
			}
		})
	}
}
