package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FromPolicy restores the newest (or offset-th newest) snapshot of a policy.
type FromPolicy struct {
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// AsOf is RFC3339: the newest snapshot at or before it is restored.
	// +optional
	AsOf string `json:"asOf,omitempty"`
	// Offset skips this many newer snapshots (0 is the newest).
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	// +optional
	Offset *int32 `json:"offset,omitempty"`
}

// IdentitySource restores by kopia identity (needs spec.repository).
type IdentitySource struct {
	// +kubebuilder:validation:MinLength=1
	Username string `json:"username"`
	// +kubebuilder:validation:MinLength=1
	Hostname string `json:"hostname"`
	// +optional
	SourcePath string `json:"sourcePath,omitempty"`
	// +optional
	SnapshotID string `json:"snapshotID,omitempty"`
	// +optional
	AsOf string `json:"asOf,omitempty"`
	// +kubebuilder:validation:Minimum=0
	// +optional
	Offset *int32 `json:"offset,omitempty"`
}

// RestoreSource is exactly one thing to restore from.
// +kubebuilder:validation:XValidation:rule="(has(self.snapshotRef)?1:0)+(has(self.fromPolicy)?1:0)+(has(self.identity)?1:0)==1",message="exactly one of snapshotRef, fromPolicy, identity"
type RestoreSource struct {
	// +optional
	SnapshotRef *NamespacedObjectRef `json:"snapshotRef,omitempty"`
	// +optional
	FromPolicy *FromPolicy `json:"fromPolicy,omitempty"`
	// +optional
	Identity *IdentitySource `json:"identity,omitempty"`
}

// NewPVCTarget creates a PVC and restores into it.
type NewPVCTarget struct {
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty"`
	// +optional
	Capacity *resource.Quantity `json:"capacity,omitempty"`
	// +optional
	AccessModes []string `json:"accessModes,omitempty"`
}

// StreamExecTarget pipes a stream snapshot into a workload command.
type StreamExecTarget struct {
	PodSelector metav1.LabelSelector `json:"podSelector"`
	// +optional
	Container string `json:"container,omitempty"`
	// +kubebuilder:validation:MinItems=1
	Command []string `json:"command"`
	// +optional
	Timeout string `json:"timeout,omitempty"`
}

// RestoreTarget is exactly one place to restore into.
// +kubebuilder:validation:XValidation:rule="(has(self.pvc)?1:0)+(has(self.pvcRef)?1:0)+(has(self.populator)?1:0)+(has(self.streamExec)?1:0)==1",message="exactly one of pvc, pvcRef, populator, streamExec"
type RestoreTarget struct {
	// +optional
	PVC *NewPVCTarget `json:"pvc,omitempty"`
	// +optional
	PVCRef *LocalObjectRef `json:"pvcRef,omitempty"`
	// Populator fills a PVC that names this Restore in its dataSourceRef.
	// +optional
	Populator *Empty `json:"populator,omitempty"`
	// +optional
	StreamExec *StreamExecTarget `json:"streamExec,omitempty"`
}

// RestoreOptions map onto kopia restore flags; unset leaves kopia's default.
type RestoreOptions struct {
	// +optional
	EnableFileDeletion *bool `json:"enableFileDeletion,omitempty"`
	// +optional
	IgnorePermissionErrors *bool `json:"ignorePermissionErrors,omitempty"`
	// +optional
	WriteFilesAtomically *bool `json:"writeFilesAtomically,omitempty"`
	// +optional
	Parallel *int32 `json:"parallel,omitempty"`
	// +optional
	WriteSparseFiles *bool `json:"writeSparseFiles,omitempty"`
	// +optional
	SkipOwners *bool `json:"skipOwners,omitempty"`
	// +optional
	SkipPermissions *bool `json:"skipPermissions,omitempty"`
	// +optional
	SkipTimes *bool `json:"skipTimes,omitempty"`
	// +optional
	OverwriteFiles *bool `json:"overwriteFiles,omitempty"`
	// +optional
	OverwriteDirectories *bool `json:"overwriteDirectories,omitempty"`
	// +optional
	OverwriteSymlinks *bool `json:"overwriteSymlinks,omitempty"`
	// +optional
	IgnoreErrors *bool `json:"ignoreErrors,omitempty"`
	// +optional
	SkipExisting *bool `json:"skipExisting,omitempty"`
}

// OnMissingSnapshot says what a restore does when there is nothing to restore.
// +kubebuilder:validation:Enum=Fail;Continue
type OnMissingSnapshot string

// RestorePolicy tunes waiting for the source snapshot.
type RestorePolicy struct {
	// Defaults to Fail for snapshotRef and identity, Continue for fromPolicy.
	// +optional
	OnMissingSnapshot OnMissingSnapshot `json:"onMissingSnapshot,omitempty"`
	// +optional
	WaitTimeout string `json:"waitTimeout,omitempty"`
}

// RestoreSpec is one restore.
type RestoreSpec struct {
	// Repository is required for identity sources and multi-repository policies.
	// +optional
	Repository *RepositoryRef `json:"repository,omitempty"`
	Source     RestoreSource  `json:"source"`
	Target     RestoreTarget  `json:"target"`
	// +optional
	Options *RestoreOptions `json:"options,omitempty"`
	// +optional
	Policy *RestorePolicy `json:"policy,omitempty"`
	// +optional
	CredentialProjection *CredentialProjection `json:"credentialProjection,omitempty"`
	// +optional
	Mover *MoverSpec `json:"mover,omitempty"`
	// +optional
	FailurePolicy *FailurePolicy `json:"failurePolicy,omitempty"`
}

// RestorePhase is the lifecycle phase of a Restore.
// +kubebuilder:validation:Enum=Pending;Resolving;Restoring;Completed;Failed
type RestorePhase string

const (
	RestorePending   RestorePhase = "Pending"
	RestoreResolving RestorePhase = "Resolving"
	RestoreRestoring RestorePhase = "Restoring"
	RestoreCompleted RestorePhase = "Completed"
	RestoreFailed    RestorePhase = "Failed"
)

// Resolution says whether a restore found a snapshot.
// +kubebuilder:validation:Enum=Snapshot;NoSnapshot
type Resolution string

// RestoreResolved is pinned once and never re-resolved.
type RestoreResolved struct {
	// +optional
	Resolution Resolution `json:"resolution,omitempty"`
	// +optional
	KopiaSnapshotID string `json:"kopiaSnapshotID,omitempty"`
	// +optional
	SnapshotRef *NamespacedObjectRef `json:"snapshotRef,omitempty"`
	// +optional
	Repository *RepositoryRef `json:"repository,omitempty"`
	// +optional
	PinnedAt *metav1.Time `json:"pinnedAt,omitempty"`
	// +optional
	Identity *Identity `json:"identity,omitempty"`
}

// RestoreTargetStatus names the PVCs a restore wrote.
type RestoreTargetStatus struct {
	// PVCPrime is the intermediate PVC of a populator restore.
	// +optional
	PVCPrime string `json:"pvcPrime,omitempty"`
	// +optional
	PVCRef string `json:"pvcRef,omitempty"`
}

// RestoreProgress counts what has been restored so far.
type RestoreProgress struct {
	// +optional
	BytesRestored *int64 `json:"bytesRestored,omitempty"`
	// +optional
	FilesRestored *int64 `json:"filesRestored,omitempty"`

	// Rate, share and time left while the run goes (a snapflow extension).
	ProgressRate `json:",inline"`
}

// RestoreStatus is written by the restore function and its mover.
type RestoreStatus struct {
	// +optional
	Phase RestorePhase `json:"phase,omitempty"`
	// SourceKind is snapshotRef, fromPolicy or identity.
	// +optional
	SourceKind string `json:"sourceKind,omitempty"`
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// +optional
	Resolved *RestoreResolved `json:"resolved,omitempty"`
	// +optional
	Target *RestoreTargetStatus `json:"target,omitempty"`
	// +optional
	Timing *Timing `json:"timing,omitempty"`
	// +optional
	Progress *RestoreProgress `json:"progress,omitempty"`
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// +optional
	LogTail string `json:"logTail,omitempty"`
	// +optional
	Failure *Failure `json:"failure,omitempty"`
}

// Restore brings a snapshot's data back into a PVC.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=kopiarestore,categories=kopiur
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Source",type=string,JSONPath=`.status.sourceKind`
// +kubebuilder:printcolumn:name="Snapshot",type=string,JSONPath=`.status.resolved.kopiaSnapshotID`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Progress",type=string,JSONPath=`.status.progress.summary`,priority=1
type Restore struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec RestoreSpec `json:"spec"`
	// +optional
	Status RestoreStatus `json:"status,omitempty"`
}

// RestoreList is a list of Restores.
//
// +kubebuilder:object:root=true
type RestoreList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Restore `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Restore{}, &RestoreList{})
}
