// Package kubeinv reads the Kubernetes side of the orphan-pruning tool: the
// BackupRepo, its Backups and Restores (KubeBlocks CRDs, read as
// unstructured objects so no KubeBlocks Go module is needed), every PVC and
// PV, and the generated StorageClass. The repo and its credential Secret
// are read first, then the lists; a failure to read the repo, the Secret or
// the Backups is fatal, a failed read of the rest becomes an execution
// blocker. It also resolves the S3 settings and credentials.
package kubeinv

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/snapflow/snapflow/internal/prune"
)

// KubeBlocks data-protection kinds (dataprotection.kubeblocks.io/v1alpha1).
var (
	GVKBackupRepo = schema.GroupVersionKind{Group: "dataprotection.kubeblocks.io", Version: "v1alpha1", Kind: "BackupRepo"}
	GVKBackup     = schema.GroupVersionKind{Group: "dataprotection.kubeblocks.io", Version: "v1alpha1", Kind: "Backup"}
	GVKRestore    = schema.GroupVersionKind{Group: "dataprotection.kubeblocks.io", Version: "v1alpha1", Kind: "Restore"}
)

// pageSize bounds each LIST so that large clusters are read in pages.
const pageSize = 500

// SecretRef names a Secret.
type SecretRef struct{ Namespace, Name string }

// String renders "ns/name", or "<none>".
func (r *SecretRef) String() string {
	if r == nil || r.Name == "" {
		return "<none>"
	}
	return r.Namespace + "/" + r.Name
}

// Repo is the BackupRepo as read, with the references the credential
// resolution needs.
type Repo struct {
	prune.BackupRepo
	// GeneratedSecret is status.generatedCSIDriverSecret; Credential is
	// spec.credential. Either may be nil.
	GeneratedSecret *SecretRef
	Credential      *SecretRef
}

// Source reads the inventory of one BackupRepo. Namespace is --namespace.
type Source struct {
	Client    client.Reader
	Repo      string
	Namespace string
}

// GetRepo reads the BackupRepo; any failure is fatal.
func (s *Source) GetRepo(ctx context.Context) (*Repo, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(GVKBackupRepo)
	if err := s.Client.Get(ctx, client.ObjectKey{Name: s.Repo}, u); err != nil {
		return nil, fmt.Errorf("read BackupRepo %s (check --backup-repo and RBAC get on backuprepos): %w", s.Repo, err)
	}
	r := &Repo{BackupRepo: prune.BackupRepo{
		Name: u.GetName(), UID: string(u.GetUID()), Generation: u.GetGeneration(),
		Config:                    stringMap(u.Object, "spec", "config"),
		PathPrefix:                str(u.Object, "spec", "pathPrefix"),
		AccessMethod:              str(u.Object, "spec", "accessMethod"),
		GeneratedStorageClassName: str(u.Object, "status", "generatedStorageClassName"),
		BackupPVCName:             str(u.Object, "status", "backupPVCName"),
	}}
	r.GeneratedSecret = secretRef(u.Object, "status", "generatedCSIDriverSecret")
	r.Credential = secretRef(u.Object, "spec", "credential")
	return r, nil
}

// Input reads everything after the repo and its Secret:
// Backups (fatal), Restores (blocker), and, when the repo has a generated
// StorageClass, the StorageClass, PVCs and PVs (blockers).
func (s *Source) Input(ctx context.Context, repo *Repo) (prune.InventoryInput, error) {
	in := prune.InventoryInput{Repo: repo.BackupRepo, Namespace: s.Namespace}
	backups, err := s.backups(ctx)
	if err != nil {
		return in, fmt.Errorf("list KubeBlocks Backups (RBAC list on backups.dataprotection.kubeblocks.io): %w", err)
	}
	in.Backups = backups
	in.Restores, in.RestoresErr = s.restores(ctx)
	if repo.GeneratedStorageClassName == "" {
		return in, nil
	}
	var sc storagev1.StorageClass
	if err := s.Client.Get(ctx, client.ObjectKey{Name: repo.GeneratedStorageClassName}, &sc); err != nil {
		in.StorageClassErr = err
	} else {
		in.StorageClass = &prune.StorageClass{Name: sc.Name, Provisioner: sc.Provisioner, Parameters: sc.Parameters}
	}
	in.PVCs, in.PVCsErr = s.pvcs(ctx)
	in.PVs, in.PVsErr = s.pvs(ctx)
	return in, nil
}

// Inventory is the execution-time refresh: the repo and every list again,
// but never the Secret.
func (s *Source) Inventory(ctx context.Context) (prune.Inventory, error) {
	repo, err := s.GetRepo(ctx)
	if err != nil {
		return prune.Inventory{}, err
	}
	in, err := s.Input(ctx, repo)
	if err != nil {
		return prune.Inventory{}, err
	}
	return prune.BuildInventory(in), nil
}

func (s *Source) listUnstructured(ctx context.Context, gvk schema.GroupVersionKind, each func(u *unstructured.Unstructured)) error {
	cont := ""
	for {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := s.Client.List(ctx, l, client.Limit(pageSize), client.Continue(cont)); err != nil {
			return err
		}
		for i := range l.Items {
			each(&l.Items[i])
		}
		if cont = l.GetContinue(); cont == "" {
			return nil
		}
	}
}

func (s *Source) backups(ctx context.Context) ([]prune.Backup, error) {
	var out []prune.Backup
	err := s.listUnstructured(ctx, GVKBackup, func(u *unstructured.Unstructured) {
		out = append(out, prune.Backup{
			Namespace: u.GetNamespace(), Name: u.GetName(), UID: string(u.GetUID()), Labels: u.GetLabels(),
			SpecParentBackupName: str(u.Object, "spec", "parentBackupName"),
			BackupRepoName:       str(u.Object, "status", "backupRepoName"),
			Path:                 str(u.Object, "status", "path"),
			KopiaRepoPath:        str(u.Object, "status", "kopiaRepoPath"),
			ParentBackupName:     str(u.Object, "status", "parentBackupName"),
			BaseBackupName:       str(u.Object, "status", "baseBackupName"),
		})
	})
	return out, err
}

func (s *Source) restores(ctx context.Context) ([]prune.Restore, error) {
	var out []prune.Restore
	err := s.listUnstructured(ctx, GVKRestore, func(u *unstructured.Unstructured) {
		out = append(out, prune.Restore{
			Namespace: u.GetNamespace(), Name: u.GetName(), Phase: str(u.Object, "status", "phase"),
			BackupNamespace: str(u.Object, "spec", "backup", "namespace"),
			BackupName:      str(u.Object, "spec", "backup", "name"),
		})
	})
	return out, err
}

func (s *Source) pvcs(ctx context.Context) ([]prune.PVC, error) {
	var out []prune.PVC
	cont := ""
	for {
		var l corev1.PersistentVolumeClaimList
		if err := s.Client.List(ctx, &l, client.Limit(pageSize), client.Continue(cont)); err != nil {
			return nil, err
		}
		for _, p := range l.Items {
			out = append(out, prune.PVC{Namespace: p.Namespace, Name: p.Name, UID: string(p.UID),
				StorageClassName: deref(p.Spec.StorageClassName), VolumeName: p.Spec.VolumeName,
				Phase: string(p.Status.Phase), Labels: p.Labels})
		}
		if cont = l.Continue; cont == "" {
			return out, nil
		}
	}
}

func (s *Source) pvs(ctx context.Context) ([]prune.PV, error) {
	var out []prune.PV
	cont := ""
	for {
		var l corev1.PersistentVolumeList
		if err := s.Client.List(ctx, &l, client.Limit(pageSize), client.Continue(cont)); err != nil {
			return nil, err
		}
		for _, v := range l.Items {
			pv := prune.PV{Name: v.Name, StorageClassName: v.Spec.StorageClassName, Phase: string(v.Status.Phase),
				MountOptions: v.Spec.MountOptions}
			if v.Spec.ClaimRef != nil {
				pv.ClaimNamespace, pv.ClaimName = v.Spec.ClaimRef.Namespace, v.Spec.ClaimRef.Name
			}
			if v.Spec.CSI != nil {
				pv.CSIDriver, pv.VolumeHandle, pv.VolumeAttributes = v.Spec.CSI.Driver, v.Spec.CSI.VolumeHandle, v.Spec.CSI.VolumeAttributes
			}
			out = append(out, pv)
		}
		if cont = l.Continue; cont == "" {
			return out, nil
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func str(obj map[string]any, path ...string) string {
	v, _, _ := unstructured.NestedFieldNoCopy(obj, path...)
	s, _ := v.(string)
	return s
}

// stringMap reads a map[string]string field, rendering non-string values
// (a YAML true for "insecure") as text.
func stringMap(obj map[string]any, path ...string) map[string]string {
	v, _, _ := unstructured.NestedFieldNoCopy(obj, path...)
	m, _ := v.(map[string]any)
	out := make(map[string]string, len(m))
	for k, x := range m {
		out[k] = fmt.Sprint(x)
	}
	return out
}

func secretRef(obj map[string]any, path ...string) *SecretRef {
	name := str(obj, append(path, "name")...)
	if name == "" {
		return nil
	}
	return &SecretRef{Namespace: str(obj, append(path, "namespace")...), Name: name}
}
