package repository

import (
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/internal/identity"
	"github.com/snapflow/snapflow/internal/kopia"
	"github.com/snapflow/snapflow/internal/mover"
)

// backend resolves a repository spec into the engine's backend (no
// secrets: the mover reads those from its environment) and what the Job must
// mount or inject.
func backend(spec *snapv1.RepositorySpec) (kopia.Backend, Mounts, error) {
	b := spec.Backend
	var m Mounts
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

// Mounts is what a mover Job mounts or injects to reach a repository.
type Mounts struct {
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

// Work is the repository section of a work spec, and what the
// mover Job must mount or inject to reach it. obj is the live repository
// (its annotations say whether it is namespace-bound; nil counts as bound
// for a ClusterRepository).
func Work(ref snapv1.RepositoryRef, obj client.Object, spec *snapv1.RepositorySpec) (mover.Repository, Mounts, error) {
	b, m, err := backend(spec)
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

// ClaimProblem says why a mover (what, e.g. "verify job") in namespace ns
// cannot mount repository r's PVC, or "" when it can: a ClusterRepository's
// claim lives in snapflow's namespace, and a pod mounts claims of its own
// namespace only. The caller adds the fix that fits its kind.
func (r *Object) ClaimProblem(m Mounts, what, ns string) string {
	if r.Ref.Kind != snapv1.KindClusterRepository || m.RepoClaim == "" || ns == r.Namespace {
		return ""
	}
	return fmt.Sprintf("ClusterRepository %s keeps its repository on a PVC of namespace %s, which a %s in namespace %s cannot mount", r.Ref.Name, r.Namespace, what, ns)
}
