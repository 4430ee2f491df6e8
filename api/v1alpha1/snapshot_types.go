package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PolicyRef names a SnapshotPolicy.
type PolicyRef struct {
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// +optional
	Namespace string `json:"namespace,omitempty"`
}

// PVCTarget names the PVC a fan-out child covers.
type PVCTarget struct {
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// SnapshotTarget is what a fan-out child backs up.
type SnapshotTarget struct {
	PVC PVCTarget `json:"pvc"`
}

// SnapshotGroup names the VolumeGroupSnapshot a child was captured with.
type SnapshotGroup struct {
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// +kubebuilder:validation:MinLength=1
	VolumeGroupSnapshotName string `json:"volumeGroupSnapshotName"`
}

// SnapshotSource pins one source of a selector policy to a Snapshot.
type SnapshotSource struct {
	// SourceIndex is the index into the policy's spec.sources.
	// +kubebuilder:validation:Minimum=0
	SourceIndex int32          `json:"sourceIndex"`
	Target      SnapshotTarget `json:"target"`
	// +optional
	Group *SnapshotGroup `json:"group,omitempty"`
}

// SnapshotSpec is one invocation of a recipe.
type SnapshotSpec struct {
	// PolicyRef names the recipe; absent for discovered and replicated snapshots.
	// +optional
	PolicyRef *PolicyRef `json:"policyRef,omitempty"`
	// Repository pins the repository at mint time (multi-repository children).
	// +optional
	Repository *RepositoryRef `json:"repository,omitempty"`
	// Source pins the PVC a selector fan-out child covers.
	// +optional
	Source *SnapshotSource `json:"source,omitempty"`
	// Tags are stored on the kopia snapshot manifest.
	// +optional
	Tags map[string]string `json:"tags,omitempty"`
	// +optional
	FailurePolicy *FailurePolicy `json:"failurePolicy,omitempty"`
	// DeletionPolicy defaults by origin: Retain for discovered, Delete otherwise.
	// +optional
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`
	// +optional
	OnScheduleDelete CascadePolicy `json:"onScheduleDelete,omitempty"`
	// Pin keeps the kopia snapshot out of every retention.
	// +optional
	Pin bool `json:"pin,omitempty"`
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Description string `json:"description,omitempty"`
}

// SnapshotPhase is the lifecycle phase of a Snapshot.
// +kubebuilder:validation:Enum=Pending;Running;Succeeded;Failed;Deleting;Discovered;Unchanged
type SnapshotPhase string

const (
	SnapshotPending    SnapshotPhase = "Pending"
	SnapshotRunning    SnapshotPhase = "Running"
	SnapshotSucceeded  SnapshotPhase = "Succeeded"
	SnapshotFailed     SnapshotPhase = "Failed"
	SnapshotDeleting   SnapshotPhase = "Deleting"
	SnapshotDiscovered SnapshotPhase = "Discovered"
	SnapshotUnchanged  SnapshotPhase = "Unchanged"
)

// Origin says where a Snapshot came from.
// +kubebuilder:validation:Enum=scheduled;manual;discovered;adopted;replicated
type Origin string

const (
	OriginScheduled  Origin = "scheduled"
	OriginManual     Origin = "manual"
	OriginDiscovered Origin = "discovered"
	OriginAdopted    Origin = "adopted"
	OriginReplicated Origin = "replicated"
)

// SnapshotRecord identifies the kopia snapshot a run produced.
type SnapshotRecord struct {
	// +optional
	KopiaSnapshotID string `json:"kopiaSnapshotID,omitempty"`
	// +optional
	Identity *Identity `json:"identity,omitempty"`
	// Pinned says whether the kopia snapshot carries snapflow's pin, so
	// spec.pin and kopia agree (a snapflow extension).
	// +optional
	Pinned *bool `json:"pinned,omitempty"`
}

// SnapshotStats are kopia's upload statistics.
type SnapshotStats struct {
	// +optional
	SizeBytes *int64 `json:"sizeBytes,omitempty"`
	// +optional
	BytesNew *int64 `json:"bytesNew,omitempty"`
	// +optional
	FilesNew *int64 `json:"filesNew,omitempty"`
	// +optional
	FilesModified *int64 `json:"filesModified,omitempty"`
	// +optional
	FilesUnchanged *int64 `json:"filesUnchanged,omitempty"`
	// +optional
	FilesFailed *int64 `json:"filesFailed,omitempty"`
}

// JobRef names the mover Job of a run.
type JobRef struct {
	// +optional
	Name string `json:"name,omitempty"`
	// +optional
	Attempts int32 `json:"attempts,omitempty"`
}

// SnapshotResolved pins what a run resolved, so deletion works after the policy is gone.
type SnapshotResolved struct {
	// +optional
	Repository *RepositoryRef `json:"repository,omitempty"`
	// +optional
	Sources []ResolvedSource `json:"sources,omitempty"`
	// +optional
	CredentialProjection *CredentialProjection `json:"credentialProjection,omitempty"`
}

// HookStamps record when each hook list completed, so hooks run once.
type HookStamps struct {
	// +optional
	PreCompletedAt *metav1.Time `json:"preCompletedAt,omitempty"`
	// +optional
	PostCompletedAt *metav1.Time `json:"postCompletedAt,omitempty"`
	// QuiescedFor is how long the workload was quiesced: from the end of
	// the beforeSnapshot hooks to the end of the afterSnapshot hooks, which
	// run as soon as the copy the run reads exists (copyMethod Snapshot or
	// Clone), else when the run ends (a snapflow extension).
	// +optional
	QuiescedFor *metav1.Duration `json:"quiescedFor,omitempty"`
	// GroupMember names the Snapshot whose hooks quiesced the workload for
	// the VolumeGroupSnapshot this run shares: the hooks run once per
	// group, in the member that cuts it, so this run ran none (a snapflow
	// extension).
	// +optional
	GroupMember string `json:"groupMember,omitempty"`
	// Results records each hook as it finishes, so none runs twice
	// (a snapflow extension).
	// +optional
	Results []HookResult `json:"results,omitempty"`
}

// HookResult is the outcome of one hook.
type HookResult struct {
	// List is beforeSnapshot or afterSnapshot; Index the hook's position in it.
	List  string `json:"list"`
	Index int32  `json:"index"`
	// Kind is workloadExec, runJob or httpRequest.
	Kind      string `json:"kind"`
	Succeeded bool   `json:"succeeded"`
	// Running marks a hook a function has claimed and not yet finished.
	// +optional
	Running bool        `json:"running,omitempty"`
	Message string      `json:"message,omitempty"`
	At      metav1.Time `json:"at"`
}

// Staged records the staged copy of the source.
type Staged struct {
	// +optional
	VolumeGroupSnapshotName string `json:"volumeGroupSnapshotName,omitempty"`
	// +optional
	CopyMethod CopyMethod `json:"copyMethod,omitempty"`
	// +optional
	VolumeSnapshotName string `json:"volumeSnapshotName,omitempty"`
	// +optional
	PVCName string `json:"pvcName,omitempty"`
	// +optional
	Ready bool `json:"ready,omitempty"`
	// +optional
	StorageClassName string `json:"storageClassName,omitempty"`
	// +optional
	StagingTimeoutSeconds *int64 `json:"stagingTimeoutSeconds,omitempty"`
}

// CleanupStatus records finalizer progress.
type CleanupStatus struct {
	// +optional
	CredsReapedAt *metav1.Time `json:"credsReapedAt,omitempty"`
	// Batch names the deletion Job that handled (or is handling) this Snapshot.
	// +optional
	Batch string `json:"batch,omitempty"`
	// Message says why the kopia deletion failed, when it did.
	// +optional
	Message string `json:"message,omitempty"`
	// Attempts counts deletion batches that included this Snapshot.
	// +optional
	Attempts int32 `json:"attempts,omitempty"`
}

// CopiedFrom records the lineage of a replicated snapshot.
type CopiedFrom struct {
	// +optional
	Repository *RepositoryRef `json:"repository,omitempty"`
	// +optional
	KopiaSnapshotID string `json:"kopiaSnapshotID,omitempty"`
	// +optional
	SnapshotRef *NamespacedObjectRef `json:"snapshotRef,omitempty"`
}

// VolumePolicyDecision records what the effective volume policies decided
// for one source volume of a run (a snapflow extension).
type VolumePolicyDecision struct {
	// PVC is the source volume's claim.
	PVC string `json:"pvc"`
	// Action is skip, snapshot, fs-backup or custom; empty when no rule
	// matched and the recipe's copyMethod applied.
	// +optional
	Action string `json:"action,omitempty"`
	// Source says where the matching rule came from: recipe or global.
	// +optional
	Source string `json:"source,omitempty"`
	// RuleIndex is the matching rule's position in its document.
	// +optional
	RuleIndex *int32 `json:"ruleIndex,omitempty"`
	// ConfigMap and ResourceVersion name the document the rule was read from.
	// +optional
	ConfigMap string `json:"configMap,omitempty"`
	// +optional
	ResourceVersion string `json:"resourceVersion,omitempty"`
	// CopyMethod is how the volume was captured as a result.
	// +optional
	CopyMethod CopyMethod `json:"copyMethod,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
}

// SnapshotStatus is written by snapflow.
type SnapshotStatus struct {
	// +optional
	Phase SnapshotPhase `json:"phase,omitempty"`
	// +optional
	Origin Origin `json:"origin,omitempty"`
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// +optional
	Snapshot *SnapshotRecord `json:"snapshot,omitempty"`
	// +optional
	Timing *Timing `json:"timing,omitempty"`
	// +optional
	Stats *SnapshotStats `json:"stats,omitempty"`
	// +optional
	Job *JobRef `json:"job,omitempty"`
	// +optional
	Resolved *SnapshotResolved `json:"resolved,omitempty"`
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// +optional
	LogTail string `json:"logTail,omitempty"`
	// +optional
	Failure *Failure `json:"failure,omitempty"`
	// +optional
	Pinned bool `json:"pinned,omitempty"`
	// +optional
	Hooks *HookStamps `json:"hooks,omitempty"`
	// +optional
	Staged *Staged `json:"staged,omitempty"`
	// +optional
	PreflightSince *metav1.Time `json:"preflightSince,omitempty"`
	// +optional
	Cleanup *CleanupStatus `json:"cleanup,omitempty"`
	// +optional
	Recorded *RecordedIdentity `json:"recorded,omitempty"`
	// +optional
	CopiedFrom *CopiedFrom `json:"copiedFrom,omitempty"`
	// VolumePolicies records, per source volume, what the effective volume
	// policies decided and which rule decided it (a snapflow extension).
	// +optional
	VolumePolicies []VolumePolicyDecision `json:"volumePolicies,omitempty"`
	// Progress is what the running mover has read so far, refreshed from
	// its log while it runs (a snapflow extension).
	// +optional
	Progress *SnapshotProgress `json:"progress,omitempty"`
}

// SnapshotProgress counts what a running backup has read and sent.
type SnapshotProgress struct {
	// FilesRead counts the files read, unchanged ones included.
	FilesRead int64 `json:"filesRead"`
	// BytesRead counts the bytes of those files.
	BytesRead int64 `json:"bytesRead"`
	// FilesUnchanged were found in kopia's cache and not read again.
	// +optional
	FilesUnchanged int64 `json:"filesUnchanged,omitempty"`
	// BytesUploaded were sent to the repository.
	// +optional
	BytesUploaded int64 `json:"bytesUploaded,omitempty"`
	// Errors counts entries that could not be read.
	// +optional
	Errors int64 `json:"errors,omitempty"`

	ProgressRate `json:",inline"`
}

// Snapshot is one kopia snapshot as a Kubernetes object, and the universal trigger.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=kopiasnap,categories=kopiur
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Origin",type=string,JSONPath=`.status.origin`
// +kubebuilder:printcolumn:name="Snapshot",type=string,JSONPath=`.status.snapshot.kopiaSnapshotID`
// +kubebuilder:printcolumn:name="Source",type=string,JSONPath=`.spec.source.target.pvc.name`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Skipped",type=string,JSONPath=`.status.volumePolicies[?(@.action=="skip")].message`,priority=1
// +kubebuilder:printcolumn:name="Progress",type=string,JSONPath=`.status.progress.summary`,priority=1
type Snapshot struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec SnapshotSpec `json:"spec,omitempty"`
	// +optional
	Status SnapshotStatus `json:"status,omitempty"`
}

// SnapshotList is a list of Snapshots.
//
// +kubebuilder:object:root=true
type SnapshotList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Snapshot `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Snapshot{}, &SnapshotList{})
}
