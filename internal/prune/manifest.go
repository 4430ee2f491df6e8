package prune

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// MaxManifestSize is the largest manifest accepted (4 MiB).
const MaxManifestSize = 4 << 20

// Manifest API identity and label keys of the KubeBlocks Backup CR.
const (
	ManifestAPIVersion   = "dataprotection.kubeblocks.io/v1alpha1"
	ManifestKind         = "Backup"
	LabelBackupRepoName  = "dataprotection.kubeblocks.io/backup-repo-name"
	LabelClusterUID      = "dataprotection.kubeblocks.io/cluster-uid"
	DeletionPolicyDelete = "Delete"
	DeletionPolicyRetain = "Retain"
)

// Manifest is the subset of the Backup CR JSON (kubeblocks-backup.json) the
// tool reads.
type Manifest struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name              string            `json:"name"`
		Namespace         string            `json:"namespace"`
		UID               string            `json:"uid"`
		CreationTimestamp *time.Time        `json:"creationTimestamp"`
		Labels            map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		DeletionPolicy   string `json:"deletionPolicy"`
		ParentBackupName string `json:"parentBackupName"`
	} `json:"spec"`
	Status struct {
		BackupRepoName   string `json:"backupRepoName"`
		Path             string `json:"path"`
		KopiaRepoPath    string `json:"kopiaRepoPath"`
		ParentBackupName string `json:"parentBackupName"`
		BaseBackupName   string `json:"baseBackupName"`
	} `json:"status"`
}

// Parent returns status.parentBackupName, falling back to the spec field.
func (m Manifest) Parent() string {
	if m.Status.ParentBackupName != "" {
		return m.Status.ParentBackupName
	}
	return m.Spec.ParentBackupName
}

// RepoName returns status.backupRepoName, falling back to the repo label.
func (m Manifest) RepoName() string {
	if m.Status.BackupRepoName != "" {
		return m.Status.BackupRepoName
	}
	return m.Metadata.Labels[LabelBackupRepoName]
}

// Key returns the manifest's namespace/name.
func (m Manifest) Key() BackupKey {
	return BackupKey{Namespace: m.Metadata.Namespace, Name: m.Metadata.Name}
}

// ParseManifest decodes a manifest body. It rejects bodies over 4 MiB and
// anything that is not exactly one JSON document, so trailing data cannot
// smuggle in a second, different identity.
func ParseManifest(data []byte) (Manifest, error) {
	var m Manifest
	if len(data) > MaxManifestSize {
		return m, fmt.Errorf("manifest is %d bytes, over the %d byte limit", len(data), MaxManifestSize)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&m); err != nil {
		return m, fmt.Errorf("decode manifest: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return m, errors.New("trailing data after the manifest JSON document")
	}
	return m, nil
}

// checkManifestSelf applies the rules that need no location: API identity,
// deletion policy, complete identity and a creation timestamp.
func checkManifestSelf(m Manifest) error {
	switch {
	case m.APIVersion != ManifestAPIVersion || m.Kind != ManifestKind:
		return fmt.Errorf("not a %s %s (apiVersion %q, kind %q)", ManifestAPIVersion, ManifestKind, m.APIVersion, m.Kind)
	case m.Spec.DeletionPolicy != DeletionPolicyDelete && m.Spec.DeletionPolicy != DeletionPolicyRetain:
		return fmt.Errorf("unknown deletionPolicy %q", m.Spec.DeletionPolicy)
	case m.Metadata.Namespace == "" || m.Metadata.Name == "" || m.Metadata.UID == "":
		return errors.New("incomplete identity (namespace, name and uid are required)")
	case m.Metadata.CreationTimestamp == nil || m.Metadata.CreationTimestamp.IsZero():
		return errors.New("missing creationTimestamp")
	}
	return nil
}

// manifestPlace is where a manifest must fit: its backup directory, the
// object root its status.path is relative to, and the cluster UUID of the
// enclosing cluster directory ("" when unknown).
type manifestPlace struct {
	dir, root, clusterUID, repo string
	// nsSegment is the namespace segment of the layout ("" in fallback mode).
	nsSegment string
}

// validateManifest applies every manifest validity rule to one manifest:
// the manifest must describe a Backup of this repo that fits the directory
// it was found in. A failure makes the candidate invalid-manifest.
func validateManifest(m Manifest, at manifestPlace) error {
	if err := checkManifestSelf(m); err != nil {
		return err
	}
	if baseName(at.dir) != m.Metadata.Name {
		return fmt.Errorf("directory %q is not named after the Backup %q", baseName(at.dir), m.Metadata.Name)
	}
	if at.nsSegment != "" && at.nsSegment != m.Metadata.Namespace {
		return fmt.Errorf("namespace %q differs from the directory's namespace %q", m.Metadata.Namespace, at.nsSegment)
	}
	if m.Status.Path == "" {
		return errors.New("status.path is empty")
	}
	if got, ok := resolveUnder(at.root, m.Status.Path); !ok || got != at.dir {
		return fmt.Errorf("status.path %q does not resolve to %q", m.Status.Path, at.dir)
	}
	if uid, ok := m.Metadata.Labels[LabelClusterUID]; ok && at.clusterUID != "" && uid != at.clusterUID {
		return fmt.Errorf("cluster-uid label %q differs from the cluster directory %q", uid, at.clusterUID)
	}
	if m.RepoName() != at.repo {
		return fmt.Errorf("backup repo %q is not %q", m.RepoName(), at.repo)
	}
	return nil
}

// resolveUnder places a Backup path in the bucket: a path whose first segment
// is a canonical pvc root is already absolute, anything else is relative to
// root. A path that is set but normalises to nothing, or cannot be
// normalised, resolves to root itself so that it protects rather than
// vanishes: what the tool cannot tell is kept. ok is false only for an empty
// path.
func resolveUnder(root, raw string) (string, bool) {
	if raw == "" {
		return "", false
	}
	k, ok := NormalizeKey(raw)
	if !ok || k == "" {
		return root, true
	}
	if IsCanonicalRoot(firstSegment(k)) {
		return k, true
	}
	return JoinKey(root, k), true
}
