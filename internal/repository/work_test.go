package repository

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
)

// moverDefaults.throttle goes into the work spec every mover reads.
func TestWorkCarriesTheThrottle(t *testing.T) {
	rate := int64(2 << 20)
	spec := &snapv1.RepositorySpec{Backend: snapv1.Backend{Filesystem: &snapv1.FilesystemBackend{Path: "/r"}},
		MoverDefaults: &snapv1.MoverDefaults{Throttle: &snapv1.Throttle{UploadBytesPerSecond: &rate, WriteOpsPerSecond: &rate}}}
	w, _, err := Work(snapv1.RepositoryRef{Kind: snapv1.KindRepository, Name: "r"}, nil, spec)
	if err != nil {
		t.Fatal(err)
	}
	if w.Throttle == nil || w.Throttle.UploadBytesPerSecond != float64(rate) || w.Throttle.WritesPerSecond != float64(rate) || w.Throttle.ReadsPerSecond != 0 {
		t.Fatalf("throttle %+v", w.Throttle)
	}
}

// A gcs repository reaches the mover as bucket and prefix in the work spec
// (never the key), with its auth Secret as the Job's credentials; a
// ClusterRepository's Secret lives where it says.
func TestGCSWork(t *testing.T) {
	spec := &snapv1.RepositorySpec{Backend: snapv1.Backend{GCS: &snapv1.GCSBackend{Bucket: "team", Prefix: "kopia/",
		Auth: &snapv1.ObjectStoreAuth{SecretRef: &snapv1.SecretRef{Name: "gcs-key", Namespace: "vault"}}}},
		Encryption: snapv1.RepositoryEncryption{PasswordSecretRef: snapv1.SecretKeyRef{Name: "pw", Namespace: "vault"}}}
	w, m, err := Work(snapv1.RepositoryRef{Kind: snapv1.KindClusterRepository, Name: "r"}, nil, spec)
	if err != nil {
		t.Fatal(err)
	}
	if g := w.Backend.GCS; g == nil || g.Bucket != "team" || g.Prefix != "kopia/" || len(g.CredentialsJSON) != 0 || m.Credentials != "gcs-key" {
		t.Fatalf("work %+v, mounts %+v", w.Backend.GCS, m)
	}
	r := &Object{Ref: snapv1.RepositoryRef{Kind: snapv1.KindClusterRepository, Name: "r"}, Namespace: "snapflow-system", Spec: spec}
	if h := r.Homes(); h.Secrets["gcs-key"] != "vault" {
		t.Fatalf("homes %+v", h)
	}
	spec.Backend.GCS.Auth = nil
	if _, _, err := Work(snapv1.RepositoryRef{Kind: snapv1.KindRepository, Name: "r"}, nil, spec); err == nil {
		t.Fatal("a gcs repository without a key resolved")
	}
}

// An s3 repository stored without keys (before admission refused it) is
// refused before any Job: no run reaches the bucket as the node.
func TestS3WithoutKeysIsRefusedBeforeAJob(t *testing.T) {
	spec := &snapv1.RepositorySpec{Backend: snapv1.Backend{S3: &snapv1.S3Backend{Bucket: "team"}}}
	if _, _, err := Work(snapv1.RepositoryRef{Kind: snapv1.KindRepository, Name: "r"}, nil, spec); err == nil || !strings.Contains(err.Error(), "spec.backend.s3.auth.secretRef") {
		t.Fatalf("err = %v", err)
	}
}

// A ClusterRepository's claim is mountable in snapflow's namespace only;
// a namespaced Repository's claim is its own namespace's.
func TestClaimProblem(t *testing.T) {
	onPVC := snapv1.RepositorySpec{Backend: snapv1.Backend{Filesystem: &snapv1.FilesystemBackend{Path: "/r", Volume: &snapv1.FilesystemVolume{PVC: &snapv1.LocalObjectRef{Name: "repo"}}}}}
	s3 := snapv1.RepositorySpec{Backend: snapv1.Backend{S3: &snapv1.S3Backend{Bucket: "b", Auth: &snapv1.ObjectStoreAuth{SecretRef: &snapv1.SecretRef{Name: "keys"}}}}}
	cluster := func(spec snapv1.RepositorySpec) *Object {
		return FromCluster(&snapv1.ClusterRepository{ObjectMeta: metav1.ObjectMeta{Name: "shared"}, Spec: snapv1.ClusterRepositorySpec{RepositorySpec: spec}}, "snapflow-system")
	}
	own := FromRepository(&snapv1.Repository{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "primary"}, Spec: onPVC})
	for _, tc := range []struct {
		name string
		repo *Object
		ns   string
		want string
	}{
		{"a ClusterRepository on a PVC, from a tenant's namespace", cluster(onPVC), "app",
			"ClusterRepository shared keeps its repository on a PVC of namespace snapflow-system, which a mover in namespace app cannot mount"},
		{"a ClusterRepository on a PVC, from snapflow's namespace", cluster(onPVC), "snapflow-system", ""},
		{"a ClusterRepository on S3", cluster(s3), "app", ""},
		{"a Repository on its own namespace's PVC", own, "app", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, m, err := Work(tc.repo.Ref, tc.repo.Obj, tc.repo.Spec)
			if err != nil {
				t.Fatal(err)
			}
			if got := tc.repo.ClaimProblem(m, "mover", tc.ns); got != tc.want {
				t.Fatalf("%q, want %q", got, tc.want)
			}
		})
	}
}
