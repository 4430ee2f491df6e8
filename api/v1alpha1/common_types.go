package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RepositoryKind names which repository kind a RepositoryRef points at.
// +kubebuilder:validation:Enum=Repository;ClusterRepository
type RepositoryKind string

const (
	KindRepository        RepositoryKind = "Repository"
	KindClusterRepository RepositoryKind = "ClusterRepository"
)

// RepositoryRef points at a Repository (namespaced) or a ClusterRepository.
type RepositoryRef struct {
	// Kind of the repository. Defaults to Repository in the referrer's namespace.
	// +kubebuilder:default=Repository
	// +optional
	Kind RepositoryKind `json:"kind,omitempty"`
	// Name of the repository.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Namespace of a Repository in another namespace. Must not be set for a ClusterRepository.
	// +optional
	Namespace string `json:"namespace,omitempty"`
}

// Qualified is the reference with its defaults made explicit, as written
// in namespace referrer: the kind defaults to Repository, a Repository
// without a namespace is the referrer's, a ClusterRepository has none.
func (r RepositoryRef) Qualified(referrer string) RepositoryRef {
	if r.Kind == "" {
		r.Kind = KindRepository
	}
	switch {
	case r.Kind == KindClusterRepository:
		r.Namespace = ""
	case r.Namespace == "":
		r.Namespace = referrer
	}
	return r
}

// LocalObjectRef names an object in the referrer's namespace.
type LocalObjectRef struct {
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// NamespacedObjectRef names an object, optionally in another namespace.
type NamespacedObjectRef struct {
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// +optional
	Namespace string `json:"namespace,omitempty"`
}

// SecretKeyRef names one key of a Secret.
type SecretKeyRef struct {
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Namespace of the Secret; only meaningful for cluster-scoped referrers.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// Key inside the Secret. Each referrer documents its default key.
	// +optional
	Key string `json:"key,omitempty"`
}

// SecretRef names a whole Secret whose keys are read as environment variables.
type SecretRef struct {
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// +optional
	Namespace string `json:"namespace,omitempty"`
}

// ConfigMapKeyRef names one key of a ConfigMap.
type ConfigMapKeyRef struct {
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// +optional
	Key string `json:"key,omitempty"`
}

// CronSpec is a 5-field cron expression (Jenkins-style H allowed) with an
// optional jitter window and IANA timezone.
type CronSpec struct {
	// Cron is a 5-field cron expression; H picks a stable per-object value.
	// +kubebuilder:validation:MinLength=1
	Cron string `json:"cron"`
	// Jitter spreads each firing over this window (Go duration, at most 24h).
	// +optional
	Jitter string `json:"jitter,omitempty"`
	// Timezone is an IANA name the cron is evaluated in.
	// +optional
	Timezone string `json:"timezone,omitempty"`
}

// Identity is a kopia snapshot identity: username@hostname:sourcePath.
type Identity struct {
	// +optional
	Username string `json:"username,omitempty"`
	// +optional
	Hostname string `json:"hostname,omitempty"`
	// +optional
	SourcePath string `json:"sourcePath,omitempty"`
}

// FailurePolicy bounds a mover Job's retries and run time.
type FailurePolicy struct {
	// BackoffLimit is the Job's retry count before the run is failed (default 2).
	// +kubebuilder:validation:Minimum=0
	// +optional
	BackoffLimit *int32 `json:"backoffLimit,omitempty"`
	// ActiveDeadlineSeconds caps a running mover (default 48h).
	// +optional
	ActiveDeadlineSeconds *int64 `json:"activeDeadlineSeconds,omitempty"`
	// PodStartupDeadlineSeconds fails a mover pod that cannot start within this
	// long with reason MoverPodWedged (default 300).
	// +optional
	PodStartupDeadlineSeconds *int64 `json:"podStartupDeadlineSeconds,omitempty"`
}

// CredentialProjection copies repository Secrets into the mover's namespace.
type CredentialProjection struct {
	// +optional
	Enabled bool `json:"enabled,omitempty"`
}

// CacheMode selects whether a mover's kopia cache survives across runs.
// +kubebuilder:validation:Enum=Ephemeral;Persistent
type CacheMode string

const (
	CacheEphemeral  CacheMode = "Ephemeral"
	CachePersistent CacheMode = "Persistent"
)

// CacheOwnership sets who owns a persistent cache volume's contents.
type CacheOwnership struct {
	// +optional
	RunAsUser *int64 `json:"runAsUser,omitempty"`
	// +optional
	RunAsGroup *int64 `json:"runAsGroup,omitempty"`
}

// MoverCache configures the kopia cache volume of a mover.
type MoverCache struct {
	// Capacity sizes a cache volume instead of an emptyDir.
	// +optional
	Capacity *resource.Quantity `json:"capacity,omitempty"`
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty"`
	// +optional
	Mode CacheMode `json:"mode,omitempty"`
	// +kubebuilder:validation:Minimum=0
	// +optional
	ContentCacheSizeMb *int64 `json:"contentCacheSizeMb,omitempty"`
	// +kubebuilder:validation:Minimum=0
	// +optional
	MetadataCacheSizeMb *int64 `json:"metadataCacheSizeMb,omitempty"`
	// +optional
	Ownership *CacheOwnership `json:"ownership,omitempty"`
}

// WorkloadSelector picks a live pod (and container) to read settings from.
type WorkloadSelector struct {
	PodSelector metav1.LabelSelector `json:"podSelector"`
	// +optional
	Container string `json:"container,omitempty"`
}

// Empty marks a variant that carries no settings of its own.
type Empty struct{}

// InheritSecurityContextFrom copies security contexts from a live workload or,
// for restores, from what the snapshot recorded.
// +kubebuilder:validation:XValidation:rule="(has(self.pvcConsumer)?1:0)+(has(self.workloadSelector)?1:0)+(has(self.snapshot)?1:0)==1",message="exactly one of pvcConsumer, workloadSelector, snapshot"
type InheritSecurityContextFrom struct {
	// PvcConsumer reads the context of the pod that mounts the source PVC.
	// +optional
	PvcConsumer *Empty `json:"pvcConsumer,omitempty"`
	// +optional
	WorkloadSelector *WorkloadSelector `json:"workloadSelector,omitempty"`
	// Snapshot uses the identity recorded on the snapshot (restores only).
	// +optional
	Snapshot *Empty `json:"snapshot,omitempty"`
}

// MoverSpec tunes the mover Job that reads or writes the data.
type MoverSpec struct {
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
	// +optional
	SecurityContext *corev1.SecurityContext `json:"securityContext,omitempty"`
	// +optional
	PodSecurityContext *corev1.PodSecurityContext `json:"podSecurityContext,omitempty"`
	// +optional
	InheritSecurityContextFrom *InheritSecurityContextFrom `json:"inheritSecurityContextFrom,omitempty"`
	// +optional
	Cache *MoverCache `json:"cache,omitempty"`
	// PrivilegedMode runs the mover privileged and preserves ownership on
	// restore; needs the namespace's privileged-movers opt-in.
	// +optional
	PrivilegedMode bool `json:"privilegedMode,omitempty"`
	// +kubebuilder:validation:Minimum=0
	// +optional
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`
}

// Failure describes why a run failed, written by the mover.
type Failure struct {
	// Class is a machine-readable error class, e.g. WrongPassword or Unreachable.
	// +optional
	Class string `json:"class,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
	// +optional
	StderrTail string `json:"stderrTail,omitempty"`
	// Retryable says whether a new run may succeed without a change.
	// +optional
	Retryable bool `json:"retryable,omitempty"`
	// +optional
	RetryHint string `json:"retryHint,omitempty"`
}

// Timing records when a run started and ended.
type Timing struct {
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// +optional
	EndTime *metav1.Time `json:"endTime,omitempty"`
	// +optional
	DurationSeconds *int64 `json:"durationSeconds,omitempty"`
}

// RecordedIdentity is the mover identity a backup ran as (the kopiur-meta tag).
type RecordedIdentity struct {
	// +optional
	UID *int64 `json:"uid,omitempty"`
	// +optional
	GID *int64 `json:"gid,omitempty"`
	// +optional
	FSGroup *int64 `json:"fsGroup,omitempty"`
	// Src is where the identity came from: inherited, explicit or default.
	// +optional
	Src string `json:"src,omitempty"`
}

// ProgressRate is how fast a running mover goes and how far it has come,
// read from the newest progress line of its log.
type ProgressRate struct {
	// BytesPerSecond is the average rate since the mover started.
	// +optional
	BytesPerSecond int64 `json:"bytesPerSecond,omitempty"`
	// EstimatedBytes is what the run is expected to move: the previous
	// snapshot's size for a backup, the snapshot's size for a restore.
	// +optional
	EstimatedBytes *int64 `json:"estimatedBytes,omitempty"`
	// Percent of EstimatedBytes done; below 100 while the run goes (the
	// estimate is a guess), 100 once a restore completed.
	// +optional
	Percent *int32 `json:"percent,omitempty"`
	// ETASeconds is the estimated time left at the average rate.
	// +optional
	ETASeconds *int64 `json:"etaSeconds,omitempty"`
	// Summary is the above in one line, for kubectl's columns.
	// +optional
	Summary string `json:"summary,omitempty"`
	// ObservedAt is when the mover printed these figures.
	// +optional
	ObservedAt *metav1.Time `json:"observedAt,omitempty"`
}
