// Package repository reads a Repository or ClusterRepository as one thing
// for every function: the object and where its Secrets live, what a mover
// Job needs to reach it (the work spec's repository section and its
// mounts), its concurrency pool, whether a namespace may use it or have its
// credentials copied in, and the validator's lookup port over a client.
// Functions, the webhook and the CLI all read repositories through it.
package repository

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/internal/projection"
	"github.com/snapflow/snapflow/internal/validate"
)

// Object is a Repository or ClusterRepository, read as one.
type Object struct {
	Ref       snapv1.RepositoryRef
	Namespace string // where the repository's Secrets and volumes live
	Obj       client.Object
	Spec      *snapv1.RepositorySpec
	Status    *snapv1.RepositoryStatus
	Allowed   *snapv1.AllowedNamespaces
}

func (r *Object) Key() string {
	if r.Ref.Kind == snapv1.KindClusterRepository {
		return "ClusterRepository/" + r.Ref.Name
	}
	return "Repository/" + r.Namespace + "/" + r.Ref.Name
}

// Homes says where each Secret and ConfigMap of the repository lives: a
// ClusterRepository's references name their namespace, a Repository's live
// beside it.
func (r *Object) Homes() projection.Homes {
	h := projection.Homes{Default: r.Namespace, Secrets: map[string]string{}, ConfigMaps: map[string]string{}}
	if r.Ref.Kind != snapv1.KindClusterRepository {
		return h
	}
	add := func(m map[string]string, kind, name, ns string) {
		if ns == "" {
			ns = r.Namespace
		}
		if have, ok := m[name]; ok && have != ns {
			h.Ambiguous = append(h.Ambiguous, fmt.Sprintf("%s %s (in %s and %s)", kind, name, have, ns))
			return
		}
		m[name] = ns
	}
	pw := r.Spec.Encryption.PasswordSecretRef
	add(h.Secrets, "Secret", pw.Name, pw.Namespace)
	if s3 := r.Spec.Backend.S3; s3 != nil {
		if a := s3.Auth; a != nil && a.SecretRef != nil {
			add(h.Secrets, "Secret", a.SecretRef.Name, a.SecretRef.Namespace)
		}
		if t := s3.TLS; t != nil && t.CABundleRef != nil {
			add(h.ConfigMaps, "ConfigMap", t.CABundleRef.Name, t.CABundleRef.Namespace)
		}
	}
	if sf := r.Spec.Backend.SFTP; sf != nil {
		add(h.Secrets, "Secret", sf.Auth.SecretRef.Name, sf.Auth.SecretRef.Namespace)
	}
	if dav := r.Spec.Backend.WebDAV; dav != nil && dav.Auth != nil {
		add(h.Secrets, "Secret", dav.Auth.SecretRef.Name, dav.Auth.SecretRef.Namespace)
	}
	if g := r.Spec.Backend.GCS; g != nil && g.Auth != nil && g.Auth.SecretRef != nil {
		add(h.Secrets, "Secret", g.Auth.SecretRef.Name, g.Auth.SecretRef.Namespace)
	}
	return h
}

// Get reads the repository ref points at, from consumer namespace
// ns; installNS is where a ClusterRepository's Secrets and Jobs live.
func Get(ctx context.Context, c client.Reader, installNS string, ref snapv1.RepositoryRef, ns string) (*Object, error) {
	key := keyOf(ref, ns)
	if ref.Kind == snapv1.KindClusterRepository {
		var cr snapv1.ClusterRepository
		if err := c.Get(ctx, key, &cr); err != nil {
			return nil, err
		}
		o := FromCluster(&cr, installNS)
		o.Ref = ref
		return o, nil
	}
	var r snapv1.Repository
	if err := c.Get(ctx, key, &r); err != nil {
		return nil, err
	}
	o := FromRepository(&r)
	ref.Kind = snapv1.KindRepository
	o.Ref = ref
	return o, nil
}

// keyOf is where the repository ref points at from consumer namespace ns
// lives: a ClusterRepository by name, a Repository in the namespace the
// reference names, else in ns.
func keyOf(ref snapv1.RepositoryRef, ns string) client.ObjectKey {
	switch {
	case ref.Kind == snapv1.KindClusterRepository:
		return client.ObjectKey{Name: ref.Name}
	case ref.Namespace != "":
		return client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}
	}
	return client.ObjectKey{Namespace: ns, Name: ref.Name}
}

// FromRepository and FromCluster wrap a repository read or
// listed, referred to by kind and name; installNS is where a
// ClusterRepository's Secrets and Jobs live.
func FromRepository(r *snapv1.Repository) *Object {
	return &Object{Ref: snapv1.RepositoryRef{Kind: snapv1.KindRepository, Name: r.Name}, Namespace: r.Namespace, Obj: r, Spec: &r.Spec, Status: &r.Status}
}

func FromCluster(cr *snapv1.ClusterRepository, installNS string) *Object {
	return &Object{Ref: snapv1.RepositoryRef{Kind: snapv1.KindClusterRepository, Name: cr.Name}, Namespace: installNS, Obj: cr, Spec: &cr.Spec.RepositorySpec, Status: &cr.Status, Allowed: cr.Spec.AllowedNamespaces}
}

// PoolKey is the wellknown.LabelRepoPool value of a repository's mover Jobs.
func PoolKey(kind snapv1.RepositoryKind, namespace, name string) string {
	key := "Repository/" + namespace + "/" + name
	if kind == snapv1.KindClusterRepository {
		key = "ClusterRepository/" + name
	}
	h := sha256.Sum256([]byte(key))
	return hex.EncodeToString(h[:])[:16]
}

// PolicyRepositories reads the repositories p writes to once and says
// which do not exist (as Kind/name) and which are suspended (as
// validate.RepoKey).
func PolicyRepositories(ctx context.Context, c client.Reader, p *snapv1.SnapshotPolicy) (missing, suspended []string, err error) {
	for _, ref := range validate.PolicyRefs(p) {
		r, err := Get(ctx, c, "", ref, p.Namespace)
		switch {
		case apierrors.IsNotFound(err):
			kind := ref.Kind
			if kind == "" {
				kind = snapv1.KindRepository
			}
			missing = append(missing, fmt.Sprintf("%s/%s", kind, ref.Name))
			continue
		case err != nil:
			return nil, nil, fmt.Errorf("read repository %s of policy %s/%s: %w", ref.Name, p.Namespace, p.Name, err)
		}
		if r.Spec.Suspend {
			suspended = append(suspended, r.Key())
		}
	}
	return missing, suspended, nil
}

// SuspendedRepositories lists the repositories p writes to that are
// suspended, and whether all of them are. A repository that does not
// exist is not suspended: the callers report it otherwise.
func SuspendedRepositories(ctx context.Context, c client.Reader, p *snapv1.SnapshotPolicy) (suspended []string, all bool, err error) {
	_, suspended, err = PolicyRepositories(ctx, c, p)
	refs := validate.PolicyRefs(p)
	return suspended, err == nil && len(refs) > 0 && len(suspended) == len(refs), err
}
