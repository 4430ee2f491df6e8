// Package events is snapflow's CloudEvents catalog: every type snapflow
// consumes and emits, and decoders for what arrives from outside. Handlers
// refuse malformed or unknown events with ErrMalformed or ErrUnsupported
// (a 4xx: redelivery cannot fix them); anything else they return is a 5xx so
// the broker retries.
package events

import (
	"encoding/json"
	"errors"
	"fmt"
	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cloudevents/sdk-go/v2/event"
)

// Types snapflow consumes from Knative sources (or snapflow's own sources,
// which send the same shapes).
const (
	APIServerAdd       = "dev.knative.apiserver.resource.add"
	APIServerUpdate    = "dev.knative.apiserver.resource.update"
	APIServerDelete    = "dev.knative.apiserver.resource.delete"
	APIServerRefAdd    = "dev.knative.apiserver.ref.add"
	APIServerRefUpdate = "dev.knative.apiserver.ref.update"
	APIServerRefDelete = "dev.knative.apiserver.ref.delete"
	Ping               = "dev.knative.sources.ping"
)

// Types snapflow defines (reverse-DNS, ours).
const (
	// Resync asks a function to re-list what it owns and act on anything an
	// event missed. Sources send it periodically.
	Resync = "dev.snapflow.resync"

	// SnapshotRequested asks for a backup of a policy now (Argo Events,
	// Tekton, a Helm hook or curl send it); data is a SnapshotRequest.
	SnapshotRequested = "dev.snapflow.snapshot.requested"

	SnapshotSucceeded = "dev.snapflow.snapshot.succeeded"
	SnapshotFailed    = "dev.snapflow.snapshot.failed"
	SnapshotUnchanged = "dev.snapflow.snapshot.unchanged"

	// RetentionPruned reports the Snapshots GFS retention removed.
	RetentionPruned = "dev.snapflow.retention.pruned"

	// RestoreRequested asks for a restore; data is a RestoreRequest, and the
	// restore function creates the Restore it describes.
	RestoreRequested = "dev.snapflow.restore.requested"

	RestoreCompleted = "dev.snapflow.restore.completed"
	RestoreFailed    = "dev.snapflow.restore.failed"

	// Maintenance runs: data is a MaintenanceResult.
	MaintenanceSucceeded = "dev.snapflow.maintenance.succeeded"
	MaintenanceSkipped   = "dev.snapflow.maintenance.skipped"
	MaintenanceFailed    = "dev.snapflow.maintenance.failed"

	// DeletionHeld reports a Snapshot whose deletion keeps its data for
	// now (a repository missing, degraded or not allowed, the mass-deletion
	// breaker): once per hold and reason, data is a DeletionHeldData.
	DeletionHeld = "dev.snapflow.deletion.held"

	// VerificationFailed reports a verification run that failed: once
	// per run, data is a VerificationFailedData.
	VerificationFailed = "dev.snapflow.verification.failed"

	// BackupStale reports a schedule none of whose backups succeeded for
	// two slots: once per stale spell, data is a BackupStaleData.
	BackupStale = "dev.snapflow.backup.stale"

	// CoverageUnprotected reports a PVC nothing backs up and nothing
	// excludes, once it has been so for the grace period: once per spell,
	// data is a CoverageUnprotectedData.
	CoverageUnprotected = "dev.snapflow.coverage.unprotected"
)

// CoverageUnprotectedData is the data of a coverage unprotected event.
type CoverageUnprotectedData struct {
	Namespace string `json:"namespace"`
	PVC       string `json:"pvc"`
	UID       string `json:"uid"`
	// Since is when a pass first found it Unprotected.
	Since string `json:"since"`
	// Reason is the coverage verdict's reason; Message says how to act.
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// BackupStaleData is the data of a backup stale event.
type BackupStaleData struct {
	Namespace string `json:"namespace"`
	Schedule  string `json:"schedule"`
	UID       string `json:"uid"`
	// Policies are the SnapshotPolicies the schedule fires.
	Policies []string `json:"policies"`
	// LastSuccess is when its last backup succeeded ("" for never); Since
	// is that or, for never, when the schedule was made.
	LastSuccess string `json:"lastSuccess,omitempty"`
	Since       string `json:"since"`
	// StaleSince is the slot that made it stale.
	StaleSince string `json:"staleSince"`
	Message    string `json:"message"`
}

// VerificationFailedData is the data of a verification failed event.
type VerificationFailedData struct {
	Namespace string `json:"namespace"`
	Policy    string `json:"policy"`
	UID       string `json:"uid"`
	// Tier is quick or deep; Repository is Kind/namespace/name.
	Tier       string `json:"tier"`
	Repository string `json:"repository"`
	// Slot is the schedule slot or request time the run served.
	Slot            string `json:"slot"`
	KopiaSnapshotID string `json:"kopiaSnapshotID,omitempty"`
	Job             string `json:"job,omitempty"`
	Message         string `json:"message"`
}

// DeletionHeldData is the data of a deletion held event.
type DeletionHeldData struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
	Policy    string `json:"policy,omitempty"`
	// Reason is the DeletionHeld condition's reason, Message says how to
	// resolve it.
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// Source is the CloudEvents source attribute of events snapflow emits.
const Source = "snapflow.dev/functions"

// ErrMalformed marks an event whose shape is wrong; ErrUnsupported one whose
// type the receiving function does not handle. Both map to HTTP 400.
var (
	ErrMalformed   = errors.New("malformed event")
	ErrUnsupported = errors.New("unsupported event type")
)

// Malformed wraps a reason as ErrMalformed.
func Malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// IsClientError says whether err is the sender's fault (4xx, no retry):
// ErrMalformed, ErrUnsupported or ErrSNSSignature.
func IsClientError(err error) bool {
	return errors.Is(err, ErrMalformed) || errors.Is(err, ErrUnsupported) || errors.Is(err, ErrSNSSignature)
}

// SnapshotResult is the data of the snapshot succeeded/failed/unchanged events.
type SnapshotResult struct {
	Namespace       string `json:"namespace"`
	Name            string `json:"name"`
	UID             string `json:"uid"`
	Policy          string `json:"policy,omitempty"`
	Phase           string `json:"phase"`
	KopiaSnapshotID string `json:"kopiaSnapshotID,omitempty"`
	Repository      string `json:"repository,omitempty"`
	BytesNew        int64  `json:"bytesNew,omitempty"`
	SizeBytes       int64  `json:"sizeBytes,omitempty"`
	FailureClass    string `json:"failureClass,omitempty"`
	Message         string `json:"message,omitempty"`
}

// SnapshotRequest is the data of a snapshot requested event.
type SnapshotRequest struct {
	Namespace string            `json:"namespace"`
	Policy    string            `json:"policy"`
	Tags      map[string]string `json:"tags,omitempty"`
}

// RestoreRequest is the data of a restore requested event: the Restore to
// create. Name is optional; without it the event id names the Restore, so
// a redelivered event creates nothing new.
type RestoreRequest struct {
	Namespace string          `json:"namespace"`
	Name      string          `json:"name,omitempty"`
	Spec      json.RawMessage `json:"spec"`
}

// RestoreResult is the data of the restore completed/failed events.
type RestoreResult struct {
	Namespace       string `json:"namespace"`
	Name            string `json:"name"`
	UID             string `json:"uid"`
	Phase           string `json:"phase"`
	Source          string `json:"source,omitempty"`
	KopiaSnapshotID string `json:"kopiaSnapshotID,omitempty"`
	Repository      string `json:"repository,omitempty"`
	TargetPVC       string `json:"targetPVC,omitempty"`
	FilesRestored   int64  `json:"filesRestored,omitempty"`
	BytesRestored   int64  `json:"bytesRestored,omitempty"`
	FailureClass    string `json:"failureClass,omitempty"`
	Message         string `json:"message,omitempty"`
}

// MaintenanceResult is the data of the maintenance events.
type MaintenanceResult struct {
	Namespace       string `json:"namespace"`
	Name            string `json:"name"`
	UID             string `json:"uid"`
	Mode            string `json:"mode"`
	Phase           string `json:"phase"`
	Repository      string `json:"repository"`
	Owner           string `json:"owner,omitempty"`
	DurationSeconds int64  `json:"durationSeconds,omitempty"`
	BytesBefore     int64  `json:"bytesBefore,omitempty"`
	BytesAfter      int64  `json:"bytesAfter,omitempty"`
	ReclaimedBytes  int64  `json:"reclaimedBytes,omitempty"`
	Message         string `json:"message,omitempty"`
}

// New builds an event snapflow emits: its id is stable per outcome (so a
// redelivery is recognisable), its source is Source, and data goes out as
// JSON.
func New(id, typ, subject string, data any) (event.Event, error) {
	e := cloudevents.NewEvent()
	e.SetID(id)
	e.SetType(typ)
	e.SetSource(Source)
	e.SetSubject(subject)
	return e, e.SetData(cloudevents.ApplicationJSON, data)
}

// known lists every event type snapflow consumes or emits.
var known = map[string]bool{
	APIServerAdd: true, APIServerUpdate: true, APIServerDelete: true,
	APIServerRefAdd: true, APIServerRefUpdate: true, APIServerRefDelete: true,
	Ping: true, Resync: true,
	SnapshotRequested: true, SnapshotSucceeded: true, SnapshotFailed: true, SnapshotUnchanged: true,
	RetentionPruned: true, RestoreRequested: true, RestoreCompleted: true, RestoreFailed: true,
	PruneRequested: true, PrunePlanned: true, PruneExecuted: true, S3ObjectNotification: true,
	MaintenanceSucceeded: true, MaintenanceSkipped: true, MaintenanceFailed: true, DeletionHeld: true,
}

// Known reports whether t is one of snapflow's event types; metrics label
// only those, so a sender cannot mint series.
func Known(t string) bool { return known[t] }
