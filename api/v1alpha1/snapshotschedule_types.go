package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ConcurrencyPolicy says what a due slot does while the previous run is unfinished.
// +kubebuilder:validation:Enum=Forbid;Allow;Replace
type ConcurrencyPolicy string

const (
	ConcurrencyForbid  ConcurrencyPolicy = "Forbid"
	ConcurrencyAllow   ConcurrencyPolicy = "Allow"
	ConcurrencyReplace ConcurrencyPolicy = "Replace"
)

// Schedule is when a schedule fires.
type Schedule struct {
	// Cron is a 5-field expression; H picks a stable per-schedule value.
	// +kubebuilder:validation:MinLength=1
	Cron string `json:"cron"`
	// Jitter spreads firings over this window; inherits scheduleDefaults.jitter.
	// +optional
	Jitter string `json:"jitter,omitempty"`
	// Timezone is IANA; inherits scheduleDefaults.timezone, else UTC.
	// +optional
	Timezone string `json:"timezone,omitempty"`
	// +kubebuilder:default=false
	// +optional
	RunOnCreate bool `json:"runOnCreate"`
	// +optional
	Suspend bool `json:"suspend,omitempty"`
	// +kubebuilder:default=Forbid
	// +optional
	ConcurrencyPolicy ConcurrencyPolicy `json:"concurrencyPolicy,omitempty"`
	// StartingDeadlineSeconds skips a slot missed by more than this.
	// +optional
	StartingDeadlineSeconds *int64 `json:"startingDeadlineSeconds,omitempty"`
}

// ScheduleDeletion governs produced Snapshots when the schedule is deleted.
type ScheduleDeletion struct {
	// +kubebuilder:default=Retain
	// +optional
	OnScheduleDelete CascadePolicy `json:"onScheduleDelete,omitempty"`
}

// SnapshotScheduleSpec binds recipes to a cadence.
// +kubebuilder:validation:XValidation:rule="[has(self.policyRef), has(self.policySelector)].filter(x, x).size() == 1",message="exactly one of policyRef, policySelector"
type SnapshotScheduleSpec struct {
	// +optional
	PolicyRef *LocalObjectRef `json:"policyRef,omitempty"`
	// PolicySelector matches SnapshotPolicies in the schedule's namespace.
	// +optional
	PolicySelector *metav1.LabelSelector `json:"policySelector,omitempty"`
	Schedule       Schedule              `json:"schedule"`
	// FailedJobsHistoryLimit keeps this many Failed Snapshots; 0 keeps none.
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=0
	// +optional
	FailedJobsHistoryLimit *int32 `json:"failedJobsHistoryLimit,omitempty"`
	// +kubebuilder:default={onScheduleDelete: Retain}
	// +optional
	Deletion *ScheduleDeletion `json:"deletion,omitempty"`
}

// ScheduleRef records one slot of a schedule.
type ScheduleRef struct {
	// +optional
	At *metav1.Time `json:"at,omitempty"`
	// +optional
	SnapshotRef *LocalObjectRef `json:"snapshotRef,omitempty"`
	// +optional
	Timezone string `json:"timezone,omitempty"`
	// +optional
	Jitter string `json:"jitter,omitempty"`
}

// SnapshotScheduleStatus is written by the schedule function.
type SnapshotScheduleStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// +optional
	LastSchedule *ScheduleRef `json:"lastSchedule,omitempty"`
	// +optional
	NextSchedule *ScheduleRef `json:"nextSchedule,omitempty"`
	// +optional
	LastSuccessfulSchedule *ScheduleRef `json:"lastSuccessfulSchedule,omitempty"`
	// +optional
	ConsecutiveFailures int32 `json:"consecutiveFailures,omitempty"`
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// SnapshotSchedule creates Snapshots of one or more recipes on a cron.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=kopiasched,categories=kopiur
// +kubebuilder:printcolumn:name="Config",type=string,JSONPath=`.spec.policyRef.name`
// +kubebuilder:printcolumn:name="Schedule",type=string,JSONPath=`.spec.schedule.cron`
// +kubebuilder:printcolumn:name="Suspended",type=boolean,JSONPath=`.spec.schedule.suspend`
// +kubebuilder:printcolumn:name="Next",type=date,JSONPath=`.status.nextSchedule.at`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type SnapshotSchedule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec SnapshotScheduleSpec `json:"spec"`
	// +optional
	Status SnapshotScheduleStatus `json:"status,omitempty"`
}

// SnapshotScheduleList is a list of SnapshotSchedules.
//
// +kubebuilder:object:root=true
type SnapshotScheduleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SnapshotSchedule `json:"items"`
}

func init() {
	SchemeBuilder.Register(&SnapshotSchedule{}, &SnapshotScheduleList{})
}
