package v1alpha1

import (
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CopyMethod says how a source volume is captured.
// +kubebuilder:validation:Enum=Snapshot;Clone;Direct
type CopyMethod string

const (
	CopySnapshot CopyMethod = "Snapshot"
	CopyClone    CopyMethod = "Clone"
	CopyDirect   CopyMethod = "Direct"
)

// GroupBy says whether selector-matched PVCs are captured as one consistent group.
// +kubebuilder:validation:Enum=VolumeGroupSnapshot;None
type GroupBy string

const (
	GroupByVolumeGroupSnapshot GroupBy = "VolumeGroupSnapshot"
	GroupByNone                GroupBy = "None"
)

// SourcePathStrategy says how a PVC's kopia source path is formed.
// +kubebuilder:validation:Enum=PvcName;PvcNamespacedName
type SourcePathStrategy string

const (
	SourcePathPvcName           SourcePathStrategy = "PvcName"
	SourcePathPvcNamespacedName SourcePathStrategy = "PvcNamespacedName"
)

// DeletionPolicy says what happens to the kopia snapshot when its Snapshot CR is deleted.
// +kubebuilder:validation:Enum=Delete;Retain;Orphan
type DeletionPolicy string

const (
	DeletionDelete DeletionPolicy = "Delete"
	DeletionRetain DeletionPolicy = "Retain"
	DeletionOrphan DeletionPolicy = "Orphan"
)

// CascadePolicy says what a parent's deletion does to its children's kopia data.
// +kubebuilder:validation:Enum=Retain;Delete
type CascadePolicy string

const (
	CascadeRetain CascadePolicy = "Retain"
	CascadeDelete CascadePolicy = "Delete"
)

// PolicyIdentity overrides the kopia username and hostname of a policy.
type PolicyIdentity struct {
	// Username overrides the kopia username; absent takes the default, an
	// empty string (a template value left unset) is refused.
	// +kubebuilder:validation:MinLength=1
	// +optional
	Username string `json:"username,omitempty"`
	// Hostname overrides the kopia hostname, as Username.
	// +kubebuilder:validation:MinLength=1
	// +optional
	Hostname string `json:"hostname,omitempty"`
}

// NamespaceSelector is accepted for shape compatibility and refused at admission:
// a mover can only mount PVCs of its own namespace.
type NamespaceSelector struct {
	// +optional
	MatchNames []string `json:"matchNames,omitempty"`
}

// PVCSelector matches PVCs in the policy's namespace.
type PVCSelector struct {
	// +optional
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`
	// +optional
	NamespaceSelector *NamespaceSelector `json:"namespaceSelector,omitempty"`
}

// StreamExec runs a command in a workload pod and snapshots its stdout.
type StreamExec struct {
	PodSelector metav1.LabelSelector `json:"podSelector"`
	// +optional
	Container string `json:"container,omitempty"`
	// +kubebuilder:validation:MinItems=1
	Command []string `json:"command"`
	// +optional
	Timeout string `json:"timeout,omitempty"`
}

// StreamSource snapshots a command's output as a single file.
type StreamSource struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	FileName     string     `json:"fileName"`
	WorkloadExec StreamExec `json:"workloadExec"`
}

// Source is exactly one thing to back up.
// +kubebuilder:validation:XValidation:rule="(has(self.pvc)?1:0)+(has(self.pvcSelector)?1:0)+(has(self.nfs)?1:0)+(has(self.stream)?1:0)==1",message="exactly one of pvc, pvcSelector, nfs, stream"
type Source struct {
	// +optional
	PVC *LocalObjectRef `json:"pvc,omitempty"`
	// +optional
	PVCSelector *PVCSelector `json:"pvcSelector,omitempty"`
	// +optional
	NFS *NFSExport `json:"nfs,omitempty"`
	// +optional
	Stream *StreamSource `json:"stream,omitempty"`
	// ReadOnly mounts the source read-only (the default).
	// +kubebuilder:default=true
	// +optional
	ReadOnly *bool `json:"readOnly,omitempty"`
	// AcknowledgeLiveMutation allows readOnly: false with copyMethod Direct.
	// +optional
	AcknowledgeLiveMutation *bool `json:"acknowledgeLiveMutation,omitempty"`
	// SourcePathOverride replaces the kopia source path.
	// +kubebuilder:validation:MaxLength=4096
	// +optional
	SourcePathOverride *string `json:"sourcePathOverride,omitempty"`
	// +kubebuilder:default=PvcName
	// +optional
	SourcePathStrategy SourcePathStrategy `json:"sourcePathStrategy,omitempty"`
}

// Staging tunes the staged PVC of copyMethod Snapshot and Clone.
type Staging struct {
	// Timeout waits this long for the staged volume; "0" waits forever (default 10m).
	// +optional
	Timeout string `json:"timeout,omitempty"`
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty"`
	// +optional
	AccessModes []string `json:"accessModes,omitempty"`
}

// Retention is GFS retention of successful Snapshots. Absent never prunes.
type Retention struct {
	// +kubebuilder:validation:Minimum=0
	// +optional
	KeepLatest *int32 `json:"keepLatest,omitempty"`
	// +kubebuilder:validation:Minimum=0
	// +optional
	KeepHourly *int32 `json:"keepHourly,omitempty"`
	// +kubebuilder:validation:Minimum=0
	// +optional
	KeepDaily *int32 `json:"keepDaily,omitempty"`
	// +kubebuilder:validation:Minimum=0
	// +optional
	KeepWeekly *int32 `json:"keepWeekly,omitempty"`
	// +kubebuilder:validation:Minimum=0
	// +optional
	KeepMonthly *int32 `json:"keepMonthly,omitempty"`
	// +kubebuilder:validation:Minimum=0
	// +optional
	KeepAnnual *int32 `json:"keepAnnual,omitempty"`
}

// Compression is kopia's compression policy.
type Compression struct {
	// +optional
	Compressor string `json:"compressor,omitempty"`
	// +optional
	NeverCompress []string `json:"neverCompress,omitempty"`
}

// Files is kopia's files policy.
type Files struct {
	// IgnoreRules are .gitignore-style globs. Any list replaces the five-entry
	// default; [] ignores nothing.
	// +kubebuilder:default={"/lost+found","System Volume Information","$RECYCLE.BIN","@eaDir",".snapshot"}
	// +optional
	IgnoreRules []string `json:"ignoreRules"`
	// +optional
	IgnoreCacheDirs *bool `json:"ignoreCacheDirs,omitempty"`
	// +optional
	IgnoreIdenticalSnapshots *bool `json:"ignoreIdenticalSnapshots,omitempty"`
}

// ErrorHandling is kopia's error-handling policy.
type ErrorHandling struct {
	// +optional
	IgnoreFileErrors *bool `json:"ignoreFileErrors,omitempty"`
	// +optional
	IgnoreDirErrors *bool `json:"ignoreDirErrors,omitempty"`
	// +optional
	IgnoreUnknownTypes *bool `json:"ignoreUnknownTypes,omitempty"`
	// +optional
	FailFast *bool `json:"failFast,omitempty"`
}

// Upload is kopia's upload policy.
type Upload struct {
	// +optional
	MaxParallelSnapshots *int32 `json:"maxParallelSnapshots,omitempty"`
	// +optional
	MaxParallelFileReads *int32 `json:"maxParallelFileReads,omitempty"`
	// LimitMb aborts the snapshot after this many MB uploaded, as kopia's
	// --upload-limit-mb does (unlimited when unset).
	// +optional
	LimitMb *int32 `json:"limitMb,omitempty"`
}

// QuickVerification is kopia snapshot verify on a cron.
type QuickVerification struct {
	// +optional
	Schedule *CronSpec `json:"schedule,omitempty"`
	// +optional
	Parallel *int32 `json:"parallel,omitempty"`
	// +optional
	FileParallelism *int32 `json:"fileParallelism,omitempty"`
	// +optional
	FileQueueLength *int32 `json:"fileQueueLength,omitempty"`
	// +optional
	MaxErrors *int32 `json:"maxErrors,omitempty"`
	// Cron is the old flat shape, kept so stored objects decode; new writes are refused.
	// +optional
	Cron string `json:"cron,omitempty"`
	// +optional
	Jitter string `json:"jitter,omitempty"`
	// +optional
	Timezone string `json:"timezone,omitempty"`
}

// DeepVerification restores the latest snapshot into scratch and checks it.
type DeepVerification struct {
	Schedule CronSpec `json:"schedule"`
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty"`
	// +optional
	Capacity *resource.Quantity `json:"capacity,omitempty"`
	// +optional
	Parallel *int32 `json:"parallel,omitempty"`
}

// Verification configures the verification tiers.
type Verification struct {
	// +optional
	Quick *QuickVerification `json:"quick,omitempty"`
	// +optional
	Deep *DeepVerification `json:"deep,omitempty"`
	// SuccessExpr is a CEL predicate over stats, snapshot, restored and tier.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	SuccessExpr string `json:"successExpr,omitempty"`
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	VerifyFilesPercent *int32 `json:"verifyFilesPercent,omitempty"`
}

// PreflightCheck is a CEL gate evaluated before a run starts.
type PreflightCheck struct {
	Name string `json:"name"`
	// +kubebuilder:validation:MaxLength=1024
	Expr string `json:"expr"`
	// +optional
	Message string `json:"message,omitempty"`
}

// Preflight holds a run until every check passes or the timeout expires.
type Preflight struct {
	// Checks run in order before each run; at most 32, each compiled and
	// evaluated per run, so the list is bounded.
	// +kubebuilder:validation:MaxItems=32
	// +optional
	Checks []PreflightCheck `json:"checks,omitempty"`
	// Timeout holds at most this long (default 10m, "0" holds forever).
	// +optional
	Timeout string `json:"timeout,omitempty"`
}

// WorkloadExecHook runs a command in a workload pod.
type WorkloadExecHook struct {
	PodSelector metav1.LabelSelector `json:"podSelector"`
	// +optional
	Container string   `json:"container,omitempty"`
	Command   []string `json:"command"`
	// +optional
	Timeout string `json:"timeout,omitempty"`
	// +optional
	ContinueOnFailure bool `json:"continueOnFailure,omitempty"`
}

// RunJobHook runs a one-shot Job owned by the Snapshot.
type RunJobHook struct {
	// JobSpec is a batch/v1 JobSpec. The CRD stores it without an inline
	// schema (a PodSpec schema per hook list would push the CRD past etcd's
	// object size limit); the admission webhook decodes it strictly instead.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	JobSpec batchv1.JobSpec `json:"jobSpec"`
	// +optional
	Timeout string `json:"timeout,omitempty"`
	// +optional
	ContinueOnFailure bool `json:"continueOnFailure,omitempty"`
}

// HTTPHeader is one request header.
type HTTPHeader struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// HTTPRequestHook calls a URL; user:pass@ in the URL becomes Basic auth.
type HTTPRequestHook struct {
	URL string `json:"url"`
	// +optional
	Method string `json:"method,omitempty"`
	// +optional
	Body string `json:"body,omitempty"`
	// +optional
	Headers []HTTPHeader `json:"headers,omitempty"`
	// +optional
	Timeout string `json:"timeout,omitempty"`
	// +optional
	ContinueOnFailure bool `json:"continueOnFailure,omitempty"`
}

// Hook is exactly one action run before or after a snapshot.
// +kubebuilder:validation:XValidation:rule="(has(self.workloadExec)?1:0)+(has(self.runJob)?1:0)+(has(self.httpRequest)?1:0)==1",message="exactly one of workloadExec, runJob, httpRequest"
type Hook struct {
	// +optional
	WorkloadExec *WorkloadExecHook `json:"workloadExec,omitempty"`
	// +optional
	RunJob *RunJobHook `json:"runJob,omitempty"`
	// +optional
	HTTPRequest *HTTPRequestHook `json:"httpRequest,omitempty"`
}

// Hooks run in the workload around the snapshot.
type Hooks struct {
	// +optional
	BeforeSnapshot []Hook `json:"beforeSnapshot,omitempty"`
	// +optional
	AfterSnapshot []Hook `json:"afterSnapshot,omitempty"`
}

// PolicyDeletion governs the Snapshots of a deleted policy.
type PolicyDeletion struct {
	// +kubebuilder:default=Retain
	// +optional
	OnPolicyDelete CascadePolicy `json:"onPolicyDelete,omitempty"`
}

// SnapshotPolicySpec is the backup recipe.
// +kubebuilder:validation:XValidation:rule="(has(self.repository)?1:0)+(has(self.repositories)?1:0)==1",message="exactly one of repository, repositories"
type SnapshotPolicySpec struct {
	// Repository is the single target repository.
	// +optional
	Repository *RepositoryRef `json:"repository,omitempty"`
	// Repositories fans every source out into each listed repository.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +optional
	Repositories []RepositoryRef `json:"repositories,omitempty"`
	// +optional
	Identity *PolicyIdentity `json:"identity,omitempty"`
	// +kubebuilder:validation:MaxItems=100
	Sources []Source `json:"sources"`
	// +kubebuilder:default=Snapshot
	// +optional
	CopyMethod CopyMethod `json:"copyMethod,omitempty"`
	// VolumeSnapshotClassName selects the snapshot class; empty uses the driver default.
	// +optional
	VolumeSnapshotClassName *string `json:"volumeSnapshotClassName,omitempty"`
	// +optional
	Staging *Staging `json:"staging,omitempty"`
	// +kubebuilder:default=VolumeGroupSnapshot
	// +optional
	GroupBy GroupBy `json:"groupBy,omitempty"`
	// +optional
	Retention *Retention `json:"retention,omitempty"`
	// +kubebuilder:default=Delete
	// +optional
	DefaultDeletionPolicy DeletionPolicy `json:"defaultDeletionPolicy,omitempty"`
	// +optional
	Compression *Compression `json:"compression,omitempty"`
	// +optional
	Files *Files `json:"files,omitempty"`
	// ExtraArgs are kopia `snapshot create` flags for what the typed fields
	// do not cover. Only the flags snapflow maps to kopia's library are
	// accepted (--parallel, --force-hash, --checkpoint-interval,
	// --fail-fast, --upload-limit-mb; see docs/extra-args.md); any other
	// flag is refused.
	// +optional
	ExtraArgs []string `json:"extraArgs,omitempty"`
	// +optional
	ErrorHandling *ErrorHandling `json:"errorHandling,omitempty"`
	// +optional
	Upload *Upload `json:"upload,omitempty"`
	// +optional
	Verification *Verification `json:"verification,omitempty"`
	// +optional
	Preflight *Preflight `json:"preflight,omitempty"`
	// +optional
	Suspend bool `json:"suspend,omitempty"`
	// +optional
	Hooks *Hooks `json:"hooks,omitempty"`
	// +optional
	Mover *MoverSpec `json:"mover,omitempty"`
	// +optional
	CredentialProjection *CredentialProjection `json:"credentialProjection,omitempty"`
	// +optional
	Deletion *PolicyDeletion `json:"deletion,omitempty"`
	// Adoption overrides the repository's catalog.adoption for this policy.
	// +optional
	Adoption Adoption `json:"adoption,omitempty"`
	// ResourcePolicy names a ConfigMap in this namespace holding Velero-format
	// volume policies for this recipe (a snapflow extension).
	// +optional
	ResourcePolicy *ResourcePolicyRef `json:"resourcePolicy,omitempty"`
}

// ResourcePolicyRef names a ConfigMap holding a ResourcePolicies document.
type ResourcePolicyRef struct {
	// +kubebuilder:validation:Enum=configmap
	// +optional
	Kind string `json:"kind,omitempty"`
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// ResolvedSource is one resolved source of a policy.
type ResolvedSource struct {
	// +optional
	PVC string `json:"pvc,omitempty"`
	// +optional
	SourcePath string `json:"sourcePath,omitempty"`
}

// ResolvedRepository is one repository of a policy with its identity there.
type ResolvedRepository struct {
	Repository RepositoryRef `json:"repository"`
	// +optional
	Identity *Identity `json:"identity,omitempty"`
}

// PolicyResolved mirrors the most recent resolution of a policy.
type PolicyResolved struct {
	// +optional
	Identity *Identity `json:"identity,omitempty"`
	// +optional
	Sources []ResolvedSource `json:"sources,omitempty"`
	// +optional
	Repositories []ResolvedRepository `json:"repositories,omitempty"`
}

// RetentionStatus reports the last GFS prune.
type RetentionStatus struct {
	// +optional
	ActiveSnapshotCount *int32 `json:"activeSnapshotCount,omitempty"`
	// +optional
	LastPruneAt *metav1.Time `json:"lastPruneAt,omitempty"`
	// +optional
	LastPruneDeleted *int32 `json:"lastPruneDeleted,omitempty"`
	// Breaker is the restore-point loss budget of the current window
	// (a snapflow extension): retention never drops more restore points
	// than the repository's deletionProtection.threshold in one window
	// without an acknowledgement.
	// +optional
	Breaker *RetentionBreakerStatus `json:"breaker,omitempty"`
}

// RetentionBreakerStatus is the retention budget's state.
type RetentionBreakerStatus struct {
	// WindowStart is when the current 24h window began.
	WindowStart metav1.Time `json:"windowStart"`
	// Peak is the most restore points the policy held in this window.
	Peak int32 `json:"peak"`
	// Threshold is the budget applied on the last pass.
	// +optional
	Threshold int32 `json:"threshold,omitempty"`
	// HeldSince is when prunes were first held back; annotate the policy
	// with allow-mass-deletion at or after it to release them.
	// +optional
	HeldSince *metav1.Time `json:"heldSince,omitempty"`
	// Held lists the Snapshots retention would prune but holds.
	// +optional
	Held []string `json:"held,omitempty"`
}

// AdoptionStatus reports adoption of discovered snapshots.
type AdoptionStatus struct {
	// +optional
	LastAdoptionAt *metav1.Time `json:"lastAdoptionAt,omitempty"`
	// +optional
	LastAdoptedCount *int32 `json:"lastAdoptedCount,omitempty"`
	// +optional
	TotalAdopted *int32 `json:"totalAdopted,omitempty"`
	// +optional
	SkippedByRetention *int32 `json:"skippedByRetention,omitempty"`
	// +optional
	LastScanMatched *int32 `json:"lastScanMatched,omitempty"`
	// +optional
	LastScanUnmatched *int32 `json:"lastScanUnmatched,omitempty"`
	// +optional
	ScanRequestedAt *metav1.Time `json:"scanRequestedAt,omitempty"`
	// +optional
	ScanRequestedIdentity string `json:"scanRequestedIdentity,omitempty"`
}

// RepositoryVerification is the verification result in one repository.
type RepositoryVerification struct {
	Repository RepositoryRef `json:"repository"`
	// +optional
	LastVerified *metav1.Time `json:"lastVerified,omitempty"`
}

// VerificationRun is the last verification of one tier in one repository
// (a snapflow extension: it records failures and the slot served, which
// lastVerified alone cannot).
type VerificationRun struct {
	// Tier is quick or deep.
	Tier       string        `json:"tier"`
	Repository RepositoryRef `json:"repository"`
	// Slot is the schedule slot (or request time) this run served.
	Slot metav1.Time `json:"slot"`
	// Phase is Running, Passed or Failed.
	Phase string `json:"phase"`
	// +optional
	Job string `json:"job,omitempty"`
	// +optional
	KopiaSnapshotID string `json:"kopiaSnapshotID,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
	// +optional
	Files *int64 `json:"files,omitempty"`
	// +optional
	Bytes *int64 `json:"bytes,omitempty"`
	// +optional
	Errors *int64 `json:"errors,omitempty"`
}

// SnapshotPolicyStatus is written by snapflow.
type SnapshotPolicyStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// +optional
	Resolved *PolicyResolved `json:"resolved,omitempty"`
	// +optional
	Retention *RetentionStatus `json:"retention,omitempty"`
	// +optional
	Adoption *AdoptionStatus `json:"adoption,omitempty"`
	// LastSuccessfulSnapshot is when this policy last produced a Succeeded Snapshot.
	// +optional
	LastSuccessfulSnapshot *metav1.Time `json:"lastSuccessfulSnapshot,omitempty"`
	// LastVerified is the oldest verification time across the policy's repositories.
	// +optional
	LastVerified *metav1.Time `json:"lastVerified,omitempty"`
	// +optional
	Verification []RepositoryVerification `json:"verification,omitempty"`
	// VerificationStamps maps a repository key to its RFC3339 verification time.
	// +optional
	VerificationStamps map[string]string `json:"verificationStamps,omitempty"`
	// VerificationRuns is the last run per tier and repository.
	// +optional
	VerificationRuns []VerificationRun `json:"verificationRuns,omitempty"`
	// RepositorySummary lists the repositories for the printer column.
	// +optional
	RepositorySummary string `json:"repositorySummary,omitempty"`
	// LastRequest is the last request event (dev.snapflow.snapshot.requested)
	// that fired this policy; it is claimed with an optimistic lock, so two
	// requests racing within the request interval cannot both fire.
	// +optional
	LastRequest *RequestStamp `json:"lastRequest,omitempty"`
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// RequestStamp names a request event (its source and id) and when it fired.
type RequestStamp struct {
	Event string      `json:"event"`
	At    metav1.Time `json:"at"`
}

// SnapshotPolicy is the recipe: what to back up, where, and how long to keep it.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=kopiasp,categories=kopiur
// +kubebuilder:printcolumn:name="Repository",type=string,JSONPath=`.spec.repository.name`
// +kubebuilder:printcolumn:name="Repositories",type=string,JSONPath=`.status.repositorySummary`
// +kubebuilder:printcolumn:name="Last-Snapshot",type=date,JSONPath=`.status.lastSuccessfulSnapshot`
// +kubebuilder:printcolumn:name="Last-Verified",type=date,JSONPath=`.status.lastVerified`
// +kubebuilder:printcolumn:name="Suspended",type=boolean,JSONPath=`.spec.suspend`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type SnapshotPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec SnapshotPolicySpec `json:"spec"`
	// +optional
	Status SnapshotPolicyStatus `json:"status,omitempty"`
}

// SnapshotPolicyList is a list of SnapshotPolicies.
//
// +kubebuilder:object:root=true
type SnapshotPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SnapshotPolicy `json:"items"`
}

func init() {
	SchemeBuilder.Register(&SnapshotPolicy{}, &SnapshotPolicyList{})
}
