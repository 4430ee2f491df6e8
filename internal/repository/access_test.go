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
