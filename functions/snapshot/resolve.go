package snapshot

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/identity"
	"github.com/snapflow/snapflow/internal/kopia"
	"github.com/snapflow/snapflow/internal/kubemeta"
	"github.com/snapflow/snapflow/internal/mover"
	"github.com/snapflow/snapflow/internal/projection"
	"github.com/snapflow/snapflow/internal/validate"
)

// RepositoryObject is a Repository or ClusterRepository, read as one.
type RepositoryObject struct {
	Ref       snapv1.RepositoryRef
	Namespace string // where the repository's Secrets and volumes live
	Obj       client.Object
	Spec      *snapv1.RepositorySpec
	Status    *snapv1.RepositoryStatus
	Allowed   *snapv1.AllowedNamespaces
}

func (r *RepositoryObject) Key() string {
	if r.Ref.Kind == snapv1.KindClusterRepository {
		return "ClusterRepository/" + r.Ref.Name
	}
	return "Repository/" + r.Namespace + "/" + r.Ref.Name
}

// Homes says where each Secret and ConfigMap of the repository lives: a
// ClusterRepository's references name their namespace, a Repository's live
// beside it.
func (r *RepositoryObject) Homes() projection.Homes {
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

// getRepository reads the repository ref points at, from consumer namespace ns.
func (f *Function) getRepository(ctx context.Context, ref snapv1.RepositoryRef, ns string) (*RepositoryObject, error) {
	return GetRepository(ctx, f.Client, f.Namespace, ref, ns)
}

// GetRepository reads the repository ref points at, from consumer namespace
// ns; installNS is where a ClusterRepository's Secrets and Jobs live.
func GetRepository(ctx context.Context, c client.Client, installNS string, ref snapv1.RepositoryRef, ns string) (*RepositoryObject, error) {
	if ref.Kind == snapv1.KindClusterRepository {
		var cr snapv1.ClusterRepository
		if err := c.Get(ctx, client.ObjectKey{Name: ref.Name}, &cr); err != nil {
			return nil, err
		}
		o := clusterRepositoryObject(&cr, installNS)
		o.Ref = ref
		return o, nil
	}
	if ref.Namespace != "" {
		ns = ref.Namespace
	}
	var r snapv1.Repository
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, &r); err != nil {
		return nil, err
	}
	o := repositoryObject(&r)
	ref.Kind = snapv1.KindRepository
	o.Ref = ref
	return o, nil
}

// repositoryObject and clusterRepositoryObject wrap a repository read or
// listed, referred to by kind and name; installNS is where a
// ClusterRepository's Secrets and Jobs live.
func repositoryObject(r *snapv1.Repository) *RepositoryObject {
	return &RepositoryObject{Ref: snapv1.RepositoryRef{Kind: snapv1.KindRepository, Name: r.Name}, Namespace: r.Namespace, Obj: r, Spec: &r.Spec, Status: &r.Status}
}

func clusterRepositoryObject(cr *snapv1.ClusterRepository, installNS string) *RepositoryObject {
	return &RepositoryObject{Ref: snapv1.RepositoryRef{Kind: snapv1.KindClusterRepository, Name: cr.Name}, Namespace: installNS, Obj: cr, Spec: &cr.Spec.RepositorySpec, Status: &cr.Status, Allowed: cr.Spec.AllowedNamespaces}
}

// lookup adapts the client to the validator's Lookup port.
type lookup struct{ c client.Client }

func (l lookup) Namespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	return getOrNil(ctx, l.c, client.ObjectKey{Name: name}, &corev1.Namespace{})
}
func (l lookup) Repository(ctx context.Context, ns, name string) (*snapv1.Repository, error) {
	return getOrNil(ctx, l.c, client.ObjectKey{Namespace: ns, Name: name}, &snapv1.Repository{})
}
func (l lookup) ClusterRepository(ctx context.Context, name string) (*snapv1.ClusterRepository, error) {
	return getOrNil(ctx, l.c, client.ObjectKey{Name: name}, &snapv1.ClusterRepository{})
}
func (l lookup) SnapshotPolicy(ctx context.Context, ns, name string) (*snapv1.SnapshotPolicy, error) {
	return getOrNil(ctx, l.c, client.ObjectKey{Namespace: ns, Name: name}, &snapv1.SnapshotPolicy{})
}
func (l lookup) SnapshotPolicies(ctx context.Context) ([]snapv1.SnapshotPolicy, error) {
	var list snapv1.SnapshotPolicyList
	err := l.c.List(ctx, &list)
	return list.Items, err
}

// PVCs lists claim metadata only: selectors and overlaps need no more.
func (l lookup) PVCs(ctx context.Context, ns string) ([]metav1.ObjectMeta, error) {
	return kubemeta.PVCs(ctx, l.c, ns)
}

func (l lookup) Snapshots(ctx context.Context, ns string) ([]snapv1.Snapshot, error) {
	var list snapv1.SnapshotList
	err := l.c.List(ctx, &list, client.InNamespace(ns))
	return list.Items, err
}

func (l lookup) Restores(ctx context.Context, ns string) ([]snapv1.Restore, error) {
	var list snapv1.RestoreList
	err := l.c.List(ctx, &list, client.InNamespace(ns))
	return list.Items, err
}

func (l lookup) ConfigMap(ctx context.Context, ns, name string) (*corev1.ConfigMap, error) {
	return getOrNil(ctx, l.c, client.ObjectKey{Namespace: ns, Name: name}, &corev1.ConfigMap{})
}

func getOrNil[T client.Object](ctx context.Context, c client.Client, key client.ObjectKey, obj T) (T, error) {
	var zero T
	if err := c.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return zero, nil
		}
		return zero, err
	}
	return obj, nil
}

// backendFor resolves a repository spec into the engine's backend (no
// secrets: the mover reads those from its environment) and what the Job must
// mount or inject.
func backendFor(spec *snapv1.RepositorySpec) (kopia.Backend, JobMounts, error) {
	b := spec.Backend
	var m JobMounts
	switch {
	case b.Filesystem != nil:
		fs := b.Filesystem
		if fs.Volume == nil {
			m.HostPath = fs.Path
			return kopia.Backend{Filesystem: &kopia.FilesystemBackend{Path: "/"}}, m, nil
		}
		if fs.Volume.PVC != nil {
			m.RepoClaim = fs.Volume.PVC.Name
		}
		m.RepoNFS = fs.Volume.NFS
		return kopia.Backend{Filesystem: &kopia.FilesystemBackend{Path: fs.Path}}, m, nil
	case b.S3 != nil:
		s := b.S3
		out := &kopia.S3Backend{Bucket: s.Bucket, Prefix: s.Prefix, Endpoint: s.Endpoint, Region: s.Region}
		if t := s.TLS; t != nil {
			out.DisableTLS, out.InsecureSkipVerify = t.DisableTLS, t.InsecureSkipVerify
			m.CABundle = t.CABundleRef
		}
		// Admission requires auth.secretRef (one stored before is
		// refused here, before any Job): no run uses the node's identity.
		if s.Auth == nil || s.Auth.SecretRef == nil {
			return kopia.Backend{}, m, fmt.Errorf("spec.backend.s3.auth.secretRef: an s3 repository needs the Secret holding its access keys (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY); snapflow never uses the node's own identity")
		}
		m.Credentials = s.Auth.SecretRef.Name
		return kopia.Backend{S3: out}, m, nil
	case b.SFTP != nil:
		s := b.SFTP
		m.Credentials = s.Auth.SecretRef.Name
		return kopia.Backend{SFTP: &kopia.SFTPBackend{Host: s.Host, Port: int(s.Port), Path: s.Path, Username: s.Username}}, m, nil
	case b.WebDAV != nil:
		if b.WebDAV.Auth != nil {
			m.Credentials = b.WebDAV.Auth.SecretRef.Name
		}
		return kopia.Backend{WebDAV: &kopia.WebDAVBackend{URL: b.WebDAV.URL}}, m, nil
	case b.GCS != nil:
		// Admission requires auth.secretRef: no run falls back to the
		// node's identity.
		if b.GCS.Auth == nil || b.GCS.Auth.SecretRef == nil {
			return kopia.Backend{}, m, fmt.Errorf("spec.backend.gcs.auth.secretRef: a gcs repository needs the Secret holding its service account key (KOPIA_GCS_CREDENTIALS_JSON)")
		}
		m.Credentials = b.GCS.Auth.SecretRef.Name
		return kopia.Backend{GCS: &kopia.GCSBackend{Bucket: b.GCS.Bucket, Prefix: b.GCS.Prefix}}, m, nil
	}
	return kopia.Backend{}, m, fmt.Errorf("spec.backend: snapflow's mover supports the filesystem, s3, sftp, webDav and gcs backends; this repository uses another one")
}

// JobMounts is what a mover Job mounts or injects to reach a repository.
type JobMounts struct {
	RepoClaim string
	RepoNFS   *snapv1.NFSExport
	HostPath  string
	// HostTrusted says HostPath or RepoNFS is a ClusterRepository's, chosen
	// by the cluster's administrator: it needs no namespace opt-in.
	HostTrusted bool
	Credentials string
	CABundle    *snapv1.ConfigMapKeyRef
}

func createOptions(spec *snapv1.RepositorySpec) *kopia.CreateOptions {
	c := spec.Create
	if c == nil || !c.Enabled {
		return nil
	}
	o := &kopia.CreateOptions{Encryption: c.Encryption, Splitter: c.Splitter, Hash: c.Hash}
	if c.ECC != nil {
		o.ECC = c.ECC.Algorithm
		if c.ECC.OverheadPercent != nil {
			o.ECCOverheadPercent = int(*c.ECC.OverheadPercent)
		}
	}
	return o
}

// RepositoryWork is the repository section of a work spec, and what the
// mover Job must mount or inject to reach it. obj is the live repository
// (its annotations say whether it is namespace-bound; nil counts as bound
// for a ClusterRepository).
func RepositoryWork(ref snapv1.RepositoryRef, obj client.Object, spec *snapv1.RepositorySpec) (mover.Repository, JobMounts, error) {
	b, m, err := backendFor(spec)
	if err != nil {
		return mover.Repository{}, m, err
	}
	m.HostTrusted = (m.HostPath != "" || m.RepoNFS != nil) && ref.Kind == snapv1.KindClusterRepository
	var ann map[string]string
	if obj != nil {
		ann = obj.GetAnnotations()
	}
	return mover.Repository{Kind: string(ref.Kind), Name: ref.Name, Backend: b, Create: createOptions(spec), HasCA: m.CABundle != nil,
		NamespaceBound: identity.NamespaceBound(ref.Kind, ann), Throttle: throttleOf(spec.MoverDefaults)}, m, nil
}

// throttleOf is moverDefaults.throttle for the engine; nil when unset.
func throttleOf(d *snapv1.MoverDefaults) *kopia.Throttle {
	if d == nil || d.Throttle == nil {
		return nil
	}
	f := func(v *int64) float64 {
		if v == nil {
			return 0
		}
		return float64(*v)
	}
	t := d.Throttle
	return &kopia.Throttle{UploadBytesPerSecond: f(t.UploadBytesPerSecond), DownloadBytesPerSecond: f(t.DownloadBytesPerSecond),
		ReadsPerSecond: f(t.ReadOpsPerSecond), WritesPerSecond: f(t.WriteOpsPerSecond)}
}

// resolveIdentity is the kopia identity of policy p's source in repository r.
func resolveIdentity(p *snapv1.SnapshotPolicy, r *RepositoryObject, src snapv1.Source, pvc string) (kopia.Source, error) {
	id, err := identity.Resolve(p, r.Spec.IdentityDefaults)
	if err != nil {
		return kopia.Source{}, err
	}
	path := identity.PVCSourcePath(src, p.Namespace, pvc)
	switch {
	case src.NFS != nil:
		path = identity.NFSSourcePath(src)
	case src.Stream != nil:
		path = identity.StreamSourcePath(src)
	}
	return kopia.Source{Username: id.Username, Hostname: id.Hostname, Path: path}, nil
}

// collisionGate re-runs admission's identity-collision rule for the run's
// repository: two policies writing one kopia source would mix their
// lineages, and each one's retention would prune the other's history. The
// policy that came first keeps running.
func (f *Function) collisionGate(ctx context.Context, p *snapv1.SnapshotPolicy, ref snapv1.RepositoryRef) (*gate, error) {
	cs, err := validate.IdentityCollisions(ctx, lookup{f.Client}, p, ref)
	if err != nil {
		return nil, fmt.Errorf("check identity collisions: %w", err)
	}
	c := validate.Earlier(p, cs)
	if c == nil {
		return nil, nil
	}
	return &gate{cond: wellknown.ConditionReady, reason: ReasonIdentityCollision, fatal: true,
		message: fmt.Sprintf("SnapshotPolicy %s/%s, created before SnapshotPolicy %s, also writes kopia source %q in %s, so this run was stopped before it mixed the two lineages; give SnapshotPolicy %s a distinct spec.identity, or point it at another repository",
			c.Policy.Namespace, c.Policy.Name, p.Name, c.Address, validate.RepoKey(ref, p.Namespace), p.Name)}, nil
}

// tenancyProblem re-runs the webhook's tenancy rule (the webhook may have
// been bypassed, or the ClusterRepository changed since admission).
func (f *Function) tenancyProblem(ctx context.Context, ns string, ref snapv1.RepositoryRef) string {
	return TenancyProblem(ctx, f.Client, ns, ref)
}

// AccessProblem says why namespace ns may not read or delete data in ref
// (validate.DataAccess on the live objects), or "" when it may.
func AccessProblem(ctx context.Context, c client.Client, ns string, ref snapv1.RepositoryRef) string {
	res := validate.DataAccess(ctx, lookup{c}, ns, ref)
	if res.OK() {
		return ""
	}
	return res.Errs.Error()
}

// TenancyProblem says why namespace ns may not use ref, or "" when it may.
func TenancyProblem(ctx context.Context, c client.Client, ns string, ref snapv1.RepositoryRef) string {
	res := validate.Tenancy(ctx, lookup{c}, ns, &ref)
	if res.OK() {
		return ""
	}
	return res.Errs.Error()
}
