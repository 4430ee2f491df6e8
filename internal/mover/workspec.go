// Package mover is the program a mover Job runs (`snapflow mover`): it reads
// a resolved work spec, performs one kopia operation through the engine, and
// reports progress and the result on the target object's status.
//
// The contract with the function that writes the Job: the work spec (a
// ConfigMap mounted as a file) holds resolved values only, never a secret;
// credentials arrive as environment variables from Secrets; paths arrive as
// flags, so the same spec works wherever the volumes are mounted.
package mover

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/snapflow/snapflow/internal/kopia"
	"github.com/snapflow/snapflow/internal/restore"
)

// Operations a mover performs.
const (
	OpSnapshot  = "snapshot"
	OpBootstrap = "bootstrap"
	OpDelete    = "delete"
	OpRestore   = "restore"
	OpVerify    = "verify"
	OpPin       = "pin"
	// OpProbe opens a connected repository again, never creating one,
	// to find out whether it still opens and how big it is.
	OpProbe = "probe"
)

// Environment variables the mover reads its secrets from.
const (
	EnvPassword        = "KOPIA_PASSWORD"
	EnvAccessKeyID     = "AWS_ACCESS_KEY_ID"
	EnvSecretAccessKey = "AWS_SECRET_ACCESS_KEY"
	EnvSessionToken    = "AWS_SESSION_TOKEN"
	// The keys of a webDav or sftp backend's auth Secret, named as kopia's
	// own command line reads the WebDAV ones.
	EnvWebDAVUsername = "KOPIA_WEBDAV_USERNAME"
	EnvWebDAVPassword = "KOPIA_WEBDAV_PASSWORD"
	EnvSFTPPassword   = "KOPIA_SFTP_PASSWORD"
	EnvSFTPKeyData    = "KOPIA_SFTP_KEY_DATA"
	EnvSFTPKnownHosts = "KOPIA_SFTP_KNOWN_HOSTS_DATA"
	// EnvGCSCredentials is a gcs backend's auth Secret key: the service
	// account's JSON key file, whole.
	EnvGCSCredentials = "KOPIA_GCS_CREDENTIALS_JSON"
)

// CredentialKey is a key of a backend's auth Secret the mover reads, as
// an environment variable of the same name. A required one missing keeps
// the pod from starting, which names the Secret and the key.
type CredentialKey struct {
	Name     string
	Optional bool
}

// CredentialEnv lists the keys of a backend's auth Secret the mover reads.
// Only these are passed: any other key of a Secret a tenant writes would
// become a variable the cloud clients obey (an emulator or metadata
// endpoint, a proxy, a token file).
func CredentialEnv(b kopia.Backend) []CredentialKey {
	switch {
	case b.S3 != nil:
		return []CredentialKey{{EnvAccessKeyID, false}, {EnvSecretAccessKey, false}, {EnvSessionToken, true}}
	case b.SFTP != nil:
		// A password or a key: either may be missing, known_hosts never.
		return []CredentialKey{{EnvSFTPPassword, true}, {EnvSFTPKeyData, true}, {EnvSFTPKnownHosts, false}}
	case b.WebDAV != nil:
		return []CredentialKey{{EnvWebDAVUsername, true}, {EnvWebDAVPassword, true}}
	case b.GCS != nil:
		return []CredentialKey{{EnvGCSCredentials, false}}
	}
	return nil
}

// WorkSpecKey is the ConfigMap key (and file name) holding the work spec.
const WorkSpecKey = "work.json"

// Target names the object whose status the mover writes.
type Target struct {
	Kind      string `json:"kind"` // Snapshot, Repository or ClusterRepository
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
	// Generation is the repository generation a bootstrap connects with;
	// its result is not written onto a later one.
	Generation int64 `json:"generation,omitempty"`
}

// Repository is how to reach the repository. A filesystem backend's path is
// relative to the repository volume the Job mounts (--repository-root).
type Repository struct {
	Kind    string               `json:"kind"`
	Name    string               `json:"name"`
	Backend kopia.Backend        `json:"backend"`
	Create  *kopia.CreateOptions `json:"create,omitempty"`
	// CAFile is set when a CA bundle is mounted (--ca-file overrides it).
	HasCA bool `json:"hasCA,omitempty"`
	// NamespaceBound says the repository is shared by namespaces: the run
	// writes, reads and deletes only snapshots whose hostname belongs to
	// its target's namespace (each member's, in a delete batch), whatever
	// ids the spec names.
	NamespaceBound bool `json:"namespaceBound,omitempty"`
	// Throttle is the repository's moverDefaults.throttle.
	Throttle *kopia.Throttle `json:"throttle,omitempty"`
}

// SnapshotWork is what to back up and how.
type SnapshotWork struct {
	Source      kopia.Source      `json:"source"`
	Policy      kopia.Policy      `json:"policy"`
	PolicyName  string            `json:"policyName,omitempty"`
	Tags        map[string]string `json:"tags,omitempty"`
	Description string            `json:"description,omitempty"`
	Pin         bool              `json:"pin,omitempty"`
	Meta        *kopia.Meta       `json:"meta,omitempty"`
	// CustomParameters come from a volume policy's custom action; the mover
	// logs them and records them on the snapshot as tags under "custom.".
	CustomParameters map[string]any `json:"customParameters,omitempty"`
	// Stream, for a stream source, is the command whose output is the
	// snapshot's one file; nothing is mounted.
	Stream *ExecWork `json:"stream,omitempty"`
}

// ExecWork is a command the mover runs in a workload's container through
// pods/exec. The function resolved the pod and granted the mover's
// ServiceAccount exec into that pod alone, for this run.
type ExecWork struct {
	Namespace string   `json:"namespace"`
	Pod       string   `json:"pod"`
	Container string   `json:"container"`
	Command   []string `json:"command"`
	// FileName is the stream's file in the snapshot.
	FileName string `json:"fileName"`
	// TimeoutSeconds bounds the command (0: no bound but the Job's).
	TimeoutSeconds int64 `json:"timeoutSeconds,omitempty"`
}

// ExecTimeoutSeconds is a workload command's timeout as the API spells it
// (a Go duration, "" for none) in whole seconds, rounded up so that a
// sub-second bound does not become none.
func ExecTimeoutSeconds(v string) (int64, error) {
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, err
	}
	if d < 0 {
		return 0, fmt.Errorf("a timeout cannot be negative")
	}
	return int64(math.Ceil(d.Seconds())), nil
}

func (e *ExecWork) check(field, ns string, file bool) error {
	if e.Namespace == "" || e.Pod == "" || e.Container == "" || len(e.Command) == 0 || (file && e.FileName == "") {
		return fmt.Errorf("work spec: %s needs namespace, pod, container, command and fileName", field)
	}
	if e.Namespace != ns {
		return fmt.Errorf("work spec: %s runs in namespace %s, not the target's %s", field, e.Namespace, ns)
	}
	return nil
}

// DeleteMember is one Snapshot whose kopia snapshot a delete run removes.
type DeleteMember struct {
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
	UID        string `json:"uid"`
	SnapshotID string `json:"snapshotID"`
}

// DeleteWork is a batch of kopia deletions in one repository session.
type DeleteWork struct {
	Members []DeleteMember `json:"members"`
}

// RestoreWork is what to restore and how. Either SnapshotID is pinned by
// the function, or the mover resolves Query against the repository (and
// pins what it found on the Restore's status).
type RestoreWork struct {
	SnapshotID string         `json:"snapshotID,omitempty"`
	Query      *restore.Query `json:"query,omitempty"`
	// OnMissing is Fail or Continue (Completed with nothing restored).
	OnMissing string `json:"onMissing"`
	// WaitTimeoutSeconds is how long to poll for a snapshot to appear.
	WaitTimeoutSeconds int64                `json:"waitTimeoutSeconds,omitempty"`
	Options            kopia.RestoreOptions `json:"options"`
	// Nothing says the function found nothing to restore (onMissingSnapshot:
	// Continue) and why; the mover only mounts the target, so a populated
	// volume gets provisioned empty.
	Nothing string `json:"nothing,omitempty"`
	// Stream, for a streamExec target, is the command the snapshot's one
	// file is piped into; nothing is mounted.
	Stream *ExecWork `json:"stream,omitempty"`
}

// VerifyWork is one verification of one snapshot in one repository.
type VerifyWork struct {
	// Tier is quick (kopia snapshot verify) or deep (restore into scratch).
	Tier       string `json:"tier"`
	SnapshotID string `json:"snapshotID"`
	// RepositoryKind, RepositoryName and RepositoryNamespace name the
	// repository in the policy's status.
	RepositoryKind      string              `json:"repositoryKind"`
	RepositoryName      string              `json:"repositoryName"`
	RepositoryNamespace string              `json:"repositoryNamespace,omitempty"`
	Slot                time.Time           `json:"slot"`
	Quick               kopia.VerifyOptions `json:"quick"`
	DeepParallel        int                 `json:"deepParallel,omitempty"`
	SuccessExpr         string              `json:"successExpr,omitempty"`
}

// PinWork pins or unpins one kopia snapshot to match spec.pin.
type PinWork struct {
	SnapshotID string `json:"snapshotID"`
	Pin        bool   `json:"pin"`
}

// WorkSpec is one mover run.
type WorkSpec struct {
	Operation  string        `json:"operation"`
	Target     Target        `json:"target"`
	Repository Repository    `json:"repository"`
	Snapshot   *SnapshotWork `json:"snapshot,omitempty"`
	Delete     *DeleteWork   `json:"delete,omitempty"`
	Restore    *RestoreWork  `json:"restore,omitempty"`
	Verify     *VerifyWork   `json:"verify,omitempty"`
	Pin        *PinWork      `json:"pin,omitempty"`
	// Maintenance is set for a maintenance run.
	Maintenance *MaintenanceWork `json:"maintenance,omitempty"`
	// Cache sizes in MiB; 0 takes kopia's defaults.
	ContentCacheMB  int64 `json:"contentCacheMb,omitempty"`
	MetadataCacheMB int64 `json:"metadataCacheMb,omitempty"`
}

// Digest is the digest of a rendered work spec the mover checks it
// against (--work-digest).
func Digest(b []byte) string {
	h := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(h[:])
}

// Parse decodes and checks a work spec.
func Parse(b []byte) (*WorkSpec, error) {
	var w WorkSpec
	if err := json.Unmarshal(b, &w); err != nil {
		return nil, fmt.Errorf("decode the work spec: %w", err)
	}
	if w.Target.Name == "" || w.Target.Kind == "" {
		return nil, fmt.Errorf("work spec: target.kind and target.name are required")
	}
	switch w.Operation {
	case OpSnapshot:
		if w.Snapshot == nil {
			return nil, fmt.Errorf("work spec: operation snapshot needs a snapshot section")
		}
		if st := w.Snapshot.Stream; st != nil {
			if err := st.check("snapshot.stream", w.Target.Namespace, true); err != nil {
				return nil, err
			}
		}
	case OpBootstrap:
	case OpProbe:
		// Refused here so that a function bug cannot turn a probe into a
		// create; a tenant who edits its own work spec gains nothing by it.
		if w.Repository.Create != nil {
			return nil, fmt.Errorf("work spec: a probe never creates a repository, but the spec has repository.create")
		}
	case OpDelete:
		if w.Delete == nil || len(w.Delete.Members) == 0 {
			return nil, fmt.Errorf("work spec: operation delete needs at least one member")
		}
	case OpRestore:
		if w.Restore == nil || (w.Restore.SnapshotID == "" && w.Restore.Query == nil && w.Restore.Nothing == "") {
			return nil, fmt.Errorf("work spec: operation restore needs a restore section with a snapshotID or a query")
		}
		if st := w.Restore.Stream; st != nil {
			if err := st.check("restore.stream", w.Target.Namespace, false); err != nil {
				return nil, err
			}
		}
	case OpVerify:
		if w.Verify == nil || w.Verify.SnapshotID == "" || (w.Verify.Tier != "quick" && w.Verify.Tier != "deep") {
			return nil, fmt.Errorf("work spec: operation verify needs a verify section with a snapshotID and tier quick or deep")
		}
	case OpPin:
		if w.Pin == nil || w.Pin.SnapshotID == "" {
			return nil, fmt.Errorf("work spec: operation pin needs a pin section with a snapshotID")
		}
	case OpMaintenance:
		if w.Maintenance == nil {
			return nil, fmt.Errorf("work spec: operation maintenance needs a maintenance section")
		}
		if err := w.Maintenance.check(); err != nil {
			return nil, err
		}
		// Like a probe: a maintenance run never creates a repository.
		if w.Repository.Create != nil {
			return nil, fmt.Errorf("work spec: a maintenance run never creates a repository, but the spec has repository.create")
		}
	default:
		return nil, fmt.Errorf("work spec: unknown operation %q (want %s, %s, %s, %s, %s, %s, %s or %s)", w.Operation, OpSnapshot, OpBootstrap, OpProbe, OpDelete, OpRestore, OpVerify, OpPin, OpMaintenance)
	}
	if w.Repository.Backend.Kind() == "" {
		return nil, fmt.Errorf("work spec: repository.backend names no supported backend")
	}
	return &w, nil
}

// Marshal renders a work spec for the ConfigMap.
func (w *WorkSpec) Marshal() (string, error) {
	b, err := json.MarshalIndent(w, "", "  ")
	return string(b), err
}
