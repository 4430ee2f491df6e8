package repository

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
)

func TestProjectionRefused(t *testing.T) {
	spec := func(pwNS string) *snapv1.RepositorySpec {
		return &snapv1.RepositorySpec{
			Encryption: snapv1.RepositoryEncryption{PasswordSecretRef: snapv1.SecretKeyRef{Name: "pw", Namespace: pwNS}},
			Backend:    snapv1.Backend{S3: &snapv1.S3Backend{Bucket: "b", Auth: &snapv1.ObjectStoreAuth{SecretRef: &snapv1.SecretRef{Name: "s3", Namespace: pwNS}}}},
		}
	}
	cluster := func(annotated bool, pwNS string) *Object {
		cr := &snapv1.ClusterRepository{ObjectMeta: metav1.ObjectMeta{Name: "shared"}}
		if annotated {
			cr.Annotations = map[string]string{wellknown.AnnotationAllowCredentialProjection: "true"}
		}
		return &Object{Ref: snapv1.RepositoryRef{Kind: snapv1.KindClusterRepository, Name: "shared"}, Namespace: "snapflow-system", Obj: cr, Spec: spec(pwNS)}
	}
	namespaced := func(ns string) *Object {
		r := &snapv1.Repository{ObjectMeta: metav1.ObjectMeta{Name: "repo", Namespace: ns}}
		return &Object{Ref: snapv1.RepositoryRef{Kind: snapv1.KindRepository, Name: "repo", Namespace: ns}, Namespace: ns, Obj: r, Spec: spec("")}
	}
	tests := []struct {
		name    string
		repo    *Object
		enabled bool
		want    string // substring; empty means allowed
	}{
		{name: "a Repository beside the run needs nothing", repo: namespaced("team-a")},
		{name: "another namespace's Repository is never copied from, even with consent", repo: namespaced("team-b"), enabled: true,
			want: "a Repository's Secrets are never copied out of its namespace"},
		{name: "a ClusterRepository without its owner's consent", repo: cluster(false, "vault"), enabled: true,
			want: "annotation " + wellknown.AnnotationAllowCredentialProjection},
		{name: "a ClusterRepository without the run's consent", repo: cluster(true, "vault"),
			want: "set spec.credentialProjection.enabled: true on SnapshotPolicy app"},
		{name: "both consent", repo: cluster(true, "vault"), enabled: true},
		{name: "credentials already in the run's namespace", repo: cluster(false, "team-a")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := ProjectionRefused(tc.repo, "team-a", tc.enabled, "SnapshotPolicy app")
			if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestHomesFlagsOneNameInTwoNamespaces(t *testing.T) {
	r := &Object{Ref: snapv1.RepositoryRef{Kind: snapv1.KindClusterRepository, Name: "shared"}, Namespace: "snapflow-system",
		Spec: &snapv1.RepositorySpec{
			Encryption: snapv1.RepositoryEncryption{PasswordSecretRef: snapv1.SecretKeyRef{Name: "kopia", Namespace: "vault"}},
			Backend:    snapv1.Backend{S3: &snapv1.S3Backend{Bucket: "b", Auth: &snapv1.ObjectStoreAuth{SecretRef: &snapv1.SecretRef{Name: "kopia"}}}},
		}}
	h := r.Homes()
	if len(h.Ambiguous) != 1 || !strings.Contains(h.Ambiguous[0], "Secret kopia (in vault and snapflow-system)") {
		t.Fatalf("ambiguous %v", h.Ambiguous)
	}
}

// A ClusterRepository reads each backend's Secret and CA bundle from the
// namespace its reference names, or from snapflow's own without one.
func TestHomesReadEachBackendsNamespace(t *testing.T) {
	pw := snapv1.RepositoryEncryption{PasswordSecretRef: snapv1.SecretKeyRef{Name: "pw"}}
	tests := []struct {
		name       string
		backend    snapv1.Backend
		secret, cm string // name -> want namespace "vault"
	}{
		{name: "s3 keys and CA bundle", backend: snapv1.Backend{S3: &snapv1.S3Backend{Bucket: "b",
			Auth: &snapv1.ObjectStoreAuth{SecretRef: &snapv1.SecretRef{Name: "keys", Namespace: "vault"}},
			TLS:  &snapv1.BackendTLS{CABundleRef: &snapv1.ConfigMapKeyRef{Name: "ca", Namespace: "vault"}}}}, secret: "keys", cm: "ca"},
		{name: "sftp key", backend: snapv1.Backend{SFTP: &snapv1.SFTPBackend{Host: "nas", Path: "/r", Username: "u",
			Auth: snapv1.SecretAuth{SecretRef: snapv1.SecretRef{Name: "ssh", Namespace: "vault"}}}}, secret: "ssh"},
		{name: "webDav password", backend: snapv1.Backend{WebDAV: &snapv1.WebDAVBackend{URL: "https://dav/r",
			Auth: &snapv1.SecretAuth{SecretRef: snapv1.SecretRef{Name: "dav", Namespace: "vault"}}}}, secret: "dav"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec := &snapv1.RepositorySpec{Encryption: pw, Backend: tc.backend}
			h := (&Object{Ref: snapv1.RepositoryRef{Kind: snapv1.KindClusterRepository, Name: "shared"}, Namespace: "snapflow-system", Spec: spec}).Homes()
			if h.Secrets[tc.secret] != "vault" || h.Secrets["pw"] != "snapflow-system" {
				t.Errorf("secrets %v: want %s from vault and pw from snapflow-system", h.Secrets, tc.secret)
			}
			if tc.cm != "" && h.ConfigMaps[tc.cm] != "vault" {
				t.Errorf("config maps %v: want %s from vault", h.ConfigMaps, tc.cm)
			}
			if got := h.Elsewhere("apps"); len(got) == 0 {
				t.Errorf("a run in apps would need nothing copied: %v", got)
			}
			// A namespaced Repository reads everything from its own.
			ns := (&Object{Ref: snapv1.RepositoryRef{Kind: snapv1.KindRepository, Name: "own"}, Namespace: "apps", Spec: spec}).Homes()
			if len(ns.Secrets) != 0 || ns.Default != "apps" {
				t.Errorf("a Repository's homes %+v, want its own namespace only", ns)
			}
		})
	}
}
