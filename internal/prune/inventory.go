package prune

import (
	"fmt"
	"sort"
	"strings"
)

// CSIDriverS3 is the only CSI driver whose object layout the tool knows.
const CSIDriverS3 = "ru.yandex.s3.csi"

// BackupRepo mirrors the BackupRepo fields the tool uses.
type BackupRepo struct {
	Name       string
	UID        string
	Generation int64
	// Config is spec.config; "bucket" (alias "root") names the bucket.
	Config     map[string]string
	PathPrefix string
	// AccessMethod is spec.accessMethod; "" means Mount.
	AccessMethod              string
	GeneratedStorageClassName string
	BackupPVCName             string
}

// ConfigBucket returns spec.config bucket, or its alias root.
func (r BackupRepo) ConfigBucket() string {
	if b := strings.TrimSpace(r.Config["bucket"]); b != "" {
		return b
	}
	return strings.TrimSpace(r.Config["root"])
}

// Backup mirrors the Backup CR fields the tool records.
type Backup struct {
	Namespace, Name, UID string
	Labels               map[string]string
	SpecParentBackupName string
	// Status fields.
	BackupRepoName   string
	Path             string
	KopiaRepoPath    string
	ParentBackupName string
	BaseBackupName   string
}

// Restore mirrors the Restore fields the tool uses.
type Restore struct {
	Namespace, Name string
	Phase           string
	BackupNamespace string
	BackupName      string
}

// PVC mirrors a PersistentVolumeClaim.
type PVC struct {
	Namespace, Name, UID string
	StorageClassName     string
	VolumeName           string
	Phase                string
	Labels               map[string]string
}

// PV mirrors a PersistentVolume.
type PV struct {
	Name             string
	StorageClassName string
	Phase            string
	ClaimNamespace   string
	ClaimName        string
	// CSIDriver is empty for a non-CSI volume.
	CSIDriver        string
	VolumeHandle     string
	VolumeAttributes map[string]string
	MountOptions     []string
}

// StorageClass mirrors the generated StorageClass.
type StorageClass struct {
	Name        string
	Provisioner string
	Parameters  map[string]string
}

// InventoryInput is what the Kubernetes adapter read. A non-nil error
// field records a failed read; it becomes an execution blocker.
type InventoryInput struct {
	Repo BackupRepo
	// Namespace is --namespace ("" for all).
	Namespace       string
	Backups         []Backup
	Restores        []Restore
	RestoresErr     error
	StorageClass    *StorageClass
	StorageClassErr error
	PVCs            []PVC
	PVCsErr         error
	PVs             []PV
	PVsErr          error
}

// OwnerKind says who owns a canonical pvc root.
type OwnerKind string

// Owner kinds. The zero value is OwnerUnknown so that an unset owner is
// always protected: what the tool cannot tell is kept.
const (
	OwnerUnknown    OwnerKind = ""
	OwnerRepository OwnerKind = "repository"
	OwnerUser       OwnerKind = "user"
)

// VolumeOwner is one entry of the ownership index: who owns a pvc root.
type VolumeOwner struct {
	Kind      OwnerKind
	Namespace string
	Current   bool
	Resource  string
}

// LiveBackup is a Backup CR of the repo as recorded in the inventory.
type LiveBackup struct {
	Key        BackupKey
	UID        string
	ClusterUID string
	Parent     string
	Base       string
	// Raw paths as stored, and qualified under the namespace's current root
	// ("" when no current root is known).
	Path, PathQualified           string
	KopiaPath, KopiaPathQualified string
}

// Repo is the part of the BackupRepo the planner needs.
type Repo struct {
	Name          string
	UID           string
	Generation    int64
	Bucket        string
	PathPrefix    string
	Mount         bool
	BackupPVCName string
	StorageClass  string
}

// Inventory is the Kubernetes snapshot the planner works from.
type Inventory struct {
	Repo    Repo
	Backups map[BackupKey]LiveBackup
	// RestoreProtected holds the keys named by active Restores.
	RestoreProtected   map[BackupKey]bool
	StorageProtections []Protection
	// Owners is the ownership index by root prefix.
	Owners map[string]VolumeOwner
	// Mapping is the namespace mapping: namespace → current object root.
	Mapping map[string]string
	// OwnershipIncomplete is set when PVCs or PVs could not be read; every
	// root without a known owner is then treated as of unknown ownership.
	OwnershipIncomplete bool
	Blockers            []string
}

// PreCheckPVCName returns the name of a repo's pre-check PVC
// ("pre-check-<uid[:8]>-<repo>", cut to 63 characters); ok is false when the
// UID is shorter than 8 characters.
func PreCheckPVCName(repoName, repoUID string) (string, bool) {
	if len(repoUID) < 8 {
		return "", false
	}
	n := "pre-check-" + repoUID[:8] + "-" + repoName
	if len(n) > 63 {
		n = n[:63]
	}
	return strings.TrimRight(n, "-"), true
}

// NormalizeVolumeHandle maps a CSI volumeHandle ("s3://bucket/path",
// "bucket/path" or a bare path) to a bucket key prefix. ok is false when the
// handle names another bucket or an unknown scheme.
func NormalizeVolumeHandle(handle, bucket string) (prefix string, ok bool) {
	h := strings.TrimSpace(handle)
	if i := strings.Index(h, "://"); i >= 0 {
		if h[:i] != "s3" {
			return "", false
		}
		rest := h[i+3:]
		host, p, _ := strings.Cut(rest, "/")
		if host != bucket || bucket == "" {
			return "", false
		}
		return NormalizeKey(p)
	}
	if bucket != "" && h == bucket {
		return "", true
	}
	if bucket != "" && strings.HasPrefix(h, bucket+"/") {
		h = h[len(bucket)+1:]
	}
	return NormalizeKey(h)
}

// BuildInventory turns the adapter's reads into the planner's inventory,
// raising execution blockers for everything it could not read or verify.
func BuildInventory(in InventoryInput) Inventory {
	b := &invBuilder{in: in, inv: Inventory{
		Backups: map[BackupKey]LiveBackup{}, RestoreProtected: map[BackupKey]bool{},
		Owners: map[string]VolumeOwner{}, Mapping: map[string]string{},
	}}
	r := in.Repo
	b.inv.Repo = Repo{
		Name: r.Name, UID: r.UID, Generation: r.Generation, Bucket: r.ConfigBucket(),
		PathPrefix: r.PathPrefix, Mount: r.AccessMethod == "" || strings.EqualFold(r.AccessMethod, "Mount"),
		BackupPVCName: r.BackupPVCName, StorageClass: r.GeneratedStorageClassName,
	}
	b.restores()
	if r.GeneratedStorageClassName != "" {
		b.volumes()
	}
	b.backups()
	sort.Strings(b.inv.Blockers)
	b.inv.Blockers = dedupe(b.inv.Blockers)
	return b.inv
}

type invBuilder struct {
	in  InventoryInput
	inv Inventory
}

func (b *invBuilder) block(format string, args ...any) {
	b.inv.Blockers = append(b.inv.Blockers, fmt.Sprintf(format, args...))
}

func (b *invBuilder) restores() {
	if b.in.RestoresErr != nil {
		b.block("restores cannot be listed: %v", b.in.RestoresErr)
		return
	}
	for _, rs := range b.in.Restores {
		if rs.Phase == "Completed" || rs.Phase == "Failed" {
			continue
		}
		// An empty phase is still Pending, hence active.
		if rs.BackupNamespace == "" || rs.BackupName == "" {
			b.block("active restore %s/%s has an incomplete spec.backup reference", rs.Namespace, rs.Name)
			continue
		}
		b.inv.RestoreProtected[BackupKey{rs.BackupNamespace, rs.BackupName}] = true
	}
}

func (b *invBuilder) backups() {
	repo := b.inv.Repo.Name
	for _, bk := range b.in.Backups {
		owner := bk.BackupRepoName
		if owner == "" {
			owner = bk.Labels[LabelBackupRepoName]
		}
		if owner != repo {
			continue
		}
		parent := bk.ParentBackupName
		if parent == "" {
			parent = bk.SpecParentBackupName
		}
		root := b.inv.Mapping[bk.Namespace]
		lb := LiveBackup{
			Key: BackupKey{bk.Namespace, bk.Name}, UID: bk.UID, ClusterUID: bk.Labels[LabelClusterUID],
			Parent: parent, Base: bk.BaseBackupName,
			Path: bk.Path, KopiaPath: bk.KopiaRepoPath,
			PathQualified: qualify(root, bk.Path), KopiaPathQualified: qualify(root, bk.KopiaRepoPath),
		}
		b.inv.Backups[lb.Key] = lb
	}
}

// qualify joins a raw path under the namespace's current root. A path that
// already starts with a canonical pvc root is kept as is: joining it would
// move it away from the root it names.
func qualify(root, raw string) string {
	if root == "" {
		return ""
	}
	k, _ := resolveUnder(root, raw)
	return k
}

// addOwner records an owner of root when several claim it: a user volume
// beats a repository, a current owner beats a historical one, and a tie
// keeps the first owner (unless only the new one names a namespace).
func (b *invBuilder) addOwner(root string, o VolumeOwner) {
	old, ok := b.inv.Owners[root]
	switch {
	case !ok:
	case old.Kind == OwnerUser && o.Kind != OwnerUser:
		return
	case o.Kind == OwnerUser && old.Kind != OwnerUser:
	case old.Current && !o.Current:
		return
	case old.Current == o.Current && (old.Namespace != "" || o.Namespace == ""):
		// A tie keeps the first owner so the result is order-independent
		// for the kind and currentness that matter.
		return
	}
	b.inv.Owners[root] = o
}

func dedupe(s []string) []string {
	var out []string
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}
