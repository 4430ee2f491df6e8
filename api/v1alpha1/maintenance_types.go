package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TakeoverPolicy says whether this Maintenance may take kopia's maintenance
// ownership from another owner.
// +kubebuilder:validation:Enum=Never;Always
type TakeoverPolicy string

const (
	// TakeoverNever runs only when the repository is unowned, owned by
	// this Maintenance's owner or by one of its aliases.
	TakeoverNever TakeoverPolicy = "Never"
	// TakeoverAlways makes this Maintenance the owner whoever owned it.
	TakeoverAlways TakeoverPolicy = "Always"
)

// MaintenanceOwnership is who runs kopia maintenance on the repository.
// kopia lets one user@host own it, so two clusters sharing a repository
// never collect garbage at the same time.
type MaintenanceOwnership struct {
	// Owner is the kopia user@host this Maintenance runs as. Defaults to
	// snapflow@<cluster>: the repository's identityDefaults.cluster, or the
	// kube-system namespace's UID.
	// +optional
	Owner string `json:"owner,omitempty"`
	// OwnerAliases are earlier owners that are this one under another
	// name (a renamed cluster): ownership is taken from them silently.
	// +optional
	OwnerAliases []string `json:"ownerAliases,omitempty"`
	// TakeoverPolicy decides what happens when another owner holds the
	// repository's maintenance (default Never: the run is skipped and says
	// who owns it).
	// +kubebuilder:default=Never
	// +optional
	TakeoverPolicy TakeoverPolicy `json:"takeoverPolicy,omitempty"`
}

// MaintenanceSpec is when and as whom kopia maintenance runs on one
// repository.
type MaintenanceSpec struct {
	// Repository is the Repository (in this namespace) or ClusterRepository
	// to maintain.
	Repository RepositoryRef `json:"repository"`
	// Schedule holds the quick and full maintenance crons (default hourly
	// quick, daily full, each at a stable per-object minute).
	// +optional
	Schedule *MaintenanceSchedule `json:"schedule,omitempty"`
	// +optional
	Ownership *MaintenanceOwnership `json:"ownership,omitempty"`
	// Mover tunes the maintenance Job.
	// +optional
	Mover *MoverSpec `json:"mover,omitempty"`
	// +optional
	FailurePolicy *FailurePolicy `json:"failurePolicy,omitempty"`
}

// MaintenanceRun is the latest run of one mode (quick or full).
type MaintenanceRun struct {
	// Mode is quick or full.
	Mode string `json:"mode"`
	// Slot is the scheduled (or requested) time the run is for.
	Slot metav1.Time `json:"slot"`
	// Phase is Running, Succeeded, Skipped or Failed.
	Phase string `json:"phase"`
	// +optional
	Job string `json:"job,omitempty"`
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
	// DurationSeconds is how long kopia's maintenance ran.
	// +optional
	DurationSeconds *int64 `json:"durationSeconds,omitempty"`
	// BlobsBefore and BytesBefore are what storage held before the run,
	// BlobsAfter and BytesAfter after it (full runs only: counting lists
	// every blob).
	// +optional
	BlobsBefore *int64 `json:"blobsBefore,omitempty"`
	// +optional
	BytesBefore *int64 `json:"bytesBefore,omitempty"`
	// +optional
	BlobsAfter *int64 `json:"blobsAfter,omitempty"`
	// +optional
	BytesAfter *int64 `json:"bytesAfter,omitempty"`
	// ReclaimedBytes is BytesBefore - BytesAfter, never below zero.
	// +optional
	ReclaimedBytes *int64 `json:"reclaimedBytes,omitempty"`
	// ReclaimableBytes is, at most, what later full runs can free (full
	// runs only): the content no snapshot referenced when this run
	// collected garbage, bounded by what storage still held beyond the
	// referenced content afterwards.
	// +optional
	ReclaimableBytes *int64 `json:"reclaimableBytes,omitempty"`
	// Safety is the kopia safety level the run used (full or none).
	// +optional
	Safety string `json:"safety,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
}

// MaintenanceStatus is what the maintenance function observed.
type MaintenanceStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Owner is the kopia user@host this Maintenance runs as.
	// +optional
	Owner string `json:"owner,omitempty"`
	// RepositoryOwner is the maintenance owner the repository named at
	// the last run.
	// +optional
	RepositoryOwner string `json:"repositoryOwner,omitempty"`
	// Runs holds the latest run of each mode.
	// +optional
	// +listType=map
	// +listMapKey=mode
	Runs []MaintenanceRun `json:"runs,omitempty"`
	// LastFullSucceeded is when a full run last succeeded.
	// +optional
	LastFullSucceeded *metav1.Time `json:"lastFullSucceeded,omitempty"`
	// LastReclaimedBytes is what the last successful full run freed.
	// +optional
	LastReclaimedBytes *int64 `json:"lastReclaimedBytes,omitempty"`
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Maintenance runs kopia's quick and full maintenance on one repository:
// index compaction, snapshot garbage collection and deletion of the blobs
// nothing references any more, so storage shrinks after deletions.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=kopiamaintenance,categories=kopiur
// +kubebuilder:printcolumn:name="Repository",type=string,JSONPath=`.spec.repository.name`
// +kubebuilder:printcolumn:name="Owner",type=string,JSONPath=`.status.owner`
// +kubebuilder:printcolumn:name="Last Full",type=date,JSONPath=`.status.lastFullSucceeded`
// +kubebuilder:printcolumn:name="Reclaimed",type=integer,JSONPath=`.status.lastReclaimedBytes`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Maintenance struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec MaintenanceSpec `json:"spec"`
	// +optional
	Status MaintenanceStatus `json:"status,omitempty"`
}

// MaintenanceList is a list of Maintenances.
//
// +kubebuilder:object:root=true
type MaintenanceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Maintenance `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Maintenance{}, &MaintenanceList{})
}
