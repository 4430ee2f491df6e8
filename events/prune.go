package events

import "strings"

// Types of the orphan-prune function (functions/prune).
const (
	// PruneRequested asks for one plan or prune of a KubeBlocks BackupRepo's
	// bucket, with the parameters `snapflow prune` takes; data is a
	// PruneRequest.
	PruneRequested = "dev.snapflow.prune.requested"

	// PrunePlanned reports a plan (data: PrunePlan); PruneExecuted the outcome
	// of a dry run or a real prune (data: PruneExecution).
	PrunePlanned  = "dev.snapflow.prune.planned"
	PruneExecuted = "dev.snapflow.prune.executed"
)

// Types of S3 bucket notifications as they arrive.
const (
	// S3ObjectNotification is what `snapflow source s3` sends: one object
	// event per CloudEvent, data an S3Record.
	S3ObjectNotification = "dev.snapflow.s3.notification"

	// S3TypePrefix starts the types of the CloudEvents AWS S3 adapter
	// ("com.amazonaws.s3.ObjectCreated:Put"); data is the S3 message or one
	// record of it.
	S3TypePrefix = "com.amazonaws.s3."

	// S3LegacyTypePrefix starts the types TriggerMesh's S3 source sends
	// ("com.amazon.s3.objectcreated"); data is one record.
	S3LegacyTypePrefix = "com.amazon.s3."
)

// IsS3Notification says whether t carries an S3 bucket notification.
func IsS3Notification(t string) bool {
	return t == S3ObjectNotification || strings.HasPrefix(t, S3TypePrefix) || strings.HasPrefix(t, S3LegacyTypePrefix)
}

// PruneRequest is the data of a prune requested event: the flags of
// `snapflow prune prune`. An omitted field takes the function's configured
// default; dryRun defaults to true, and a real prune (dryRun false) needs
// the confirmation word of the flags in confirm, as on the command line.
type PruneRequest struct {
	// BackupRepo must be empty or name the function's configured repo; a
	// function configured without one serves the repo named here.
	BackupRepo string `json:"backupRepo,omitempty"`
	Namespace  string `json:"namespace,omitempty"`
	Prefix     string `json:"prefix,omitempty"`
	// MinAge is a Go duration ("168h"); "0" disables the age gate except
	// for undated or future objects.
	MinAge                string `json:"minAge,omitempty"`
	IncludeRetained       *bool  `json:"includeRetained,omitempty"`
	DeleteRepositoryStray *bool  `json:"deleteRepositoryStray,omitempty"`
	// BucketVersioning is auto, disabled, enabled or suspended.
	BucketVersioning string `json:"bucketVersioning,omitempty"`
	PurgeVersions    *bool  `json:"purgeVersions,omitempty"`
	DryRun           *bool  `json:"dryRun,omitempty"`
	Confirm          string `json:"confirm,omitempty"`
}

// Triggers of a prune run, as reported in PrunePlan.Trigger.
const (
	PruneTriggerTick    = "tick"
	PruneTriggerRequest = "request"
	PruneTriggerS3      = "s3"
)

// PruneCandidate is one candidate of a plan as reported in events: what
// `snapflow prune plan -o json` shows, without snapshots.
type PruneCandidate struct {
	Type        string `json:"type"`
	State       string `json:"state"`
	Prefix      string `json:"prefix"`
	Backup      string `json:"backup,omitempty"`
	ObjectCount int    `json:"objectCount"`
	Bytes       int64  `json:"bytes"`
	Deferred    bool   `json:"deferred,omitempty"`
	Reason      string `json:"reason,omitempty"`
}

// PrunePlan is the data of a prune planned event.
type PrunePlan struct {
	BackupRepo string `json:"backupRepo"`
	Bucket     string `json:"bucket"`
	// Trigger is tick, request or s3; Cause the id of the event that
	// caused the run.
	Trigger string `json:"trigger"`
	Cause   string `json:"cause,omitempty"`
	// Mode is plan, dry-run or delete, as `snapflow prune` prints it.
	Mode string `json:"mode"`
	// Namespace and Prefix are the scope of the plan; an S3 notification
	// narrows Prefix to the pvc-<uuid> root it touched.
	Namespace        string `json:"namespace,omitempty"`
	Prefix           string `json:"prefix,omitempty"`
	Versioning       string `json:"versioning"`
	VersioningSource string `json:"versioningSource"`
	ScannedObjects   int64  `json:"scannedObjects"`
	ScannedBytes     int64  `json:"scannedBytes"`
	EligibleObjects  int64  `json:"eligibleObjects"`
	EligibleBytes    int64  `json:"eligibleBytes"`
	// StateCounts counts every candidate by state, shown or not.
	StateCounts map[string]int `json:"stateCounts"`
	// Candidates are those `snapflow prune plan` shows by default, at most
	// MaxReportedCandidates of them; Truncated says some were left out.
	Candidates []PruneCandidate `json:"candidates"`
	Truncated  bool             `json:"truncated,omitempty"`
	// Blockers forbid real deletion until resolved.
	Blockers []string `json:"blockers"`
}

// MaxReportedCandidates bounds the candidate lists of prune events, so an
// event stays far below a broker's size limit on a large bucket.
const MaxReportedCandidates = 100

// PruneCandidateResult is one candidate's outcome in PruneExecution.
type PruneCandidateResult struct {
	Prefix         string `json:"prefix"`
	Type           string `json:"type"`
	Backup         string `json:"backup,omitempty"`
	ObjectsDeleted int    `json:"objectsDeleted"`
	BytesDeleted   int64  `json:"bytesDeleted"`
	Deferred       bool   `json:"deferred,omitempty"`
	Error          string `json:"error,omitempty"`
}

// PruneExecution is the data of a prune executed event. A run that stopped
// part-way (a failed candidate, a lost connection) reports what it deleted
// before that and the failures; running again converges.
type PruneExecution struct {
	BackupRepo string `json:"backupRepo"`
	Bucket     string `json:"bucket"`
	Trigger    string `json:"trigger"`
	Cause      string `json:"cause,omitempty"`
	Namespace  string `json:"namespace,omitempty"`
	Prefix     string `json:"prefix,omitempty"`
	DryRun     bool   `json:"dryRun"`
	// Deleted counts the candidates that finished (would finish, in a dry
	// run), Failed those that did not; the object and byte totals include
	// what failed candidates deleted before failing.
	DeletedCandidates int                    `json:"deletedCandidates"`
	DeletedObjects    int                    `json:"deletedObjects"`
	DeletedBytes      int64                  `json:"deletedBytes"`
	FailedCandidates  int                    `json:"failedCandidates"`
	Results           []PruneCandidateResult `json:"results"`
	Truncated         bool                   `json:"truncated,omitempty"`
	Blockers          []string               `json:"blockers"`
	// Error is why the run stopped: blockers, a stale plan, failed
	// candidates or a lost connection ("" on success).
	Error string `json:"error,omitempty"`
}
