package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RepositoryEncryption names the repository password.
type RepositoryEncryption struct {
	// PasswordSecretRef names the Secret key holding the kopia password (key defaults to KOPIA_PASSWORD).
	PasswordSecretRef SecretKeyRef `json:"passwordSecretRef"`
}

// ECC configures kopia's error-correction codes.
type ECC struct {
	// +optional
	Algorithm string `json:"algorithm,omitempty"`
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	OverheadPercent *int32 `json:"overheadPercent,omitempty"`
}

// RepositoryCreate creates the kopia repository when it does not exist.
// The algorithms are fixed in the repository format once it exists.
type RepositoryCreate struct {
	// +optional
	Enabled bool `json:"enabled,omitempty"`
	// Encryption algorithm, e.g. AES256-GCM-HMAC-SHA256.
	// +optional
	Encryption string `json:"encryption,omitempty"`
	// Splitter, e.g. DYNAMIC-4M-BUZHASH.
	// +optional
	Splitter string `json:"splitter,omitempty"`
	// Hash, e.g. BLAKE2B-256-128.
	// +optional
	Hash string `json:"hash,omitempty"`
	// +optional
	ECC *ECC `json:"ecc,omitempty"`
}

// RepositoryBootstrap tunes the Job that connects to or creates the repository.
type RepositoryBootstrap struct {
	// +optional
	FailurePolicy *FailurePolicy `json:"failurePolicy,omitempty"`
}

// ForeignSnapshots says what the catalog does with snapshots of other clusters.
// +kubebuilder:validation:Enum=Ignore;Fallback
type ForeignSnapshots string

// Adoption says whether discovered snapshots are attached to matching policies.
// +kubebuilder:validation:Enum=Adopt;Ignore
type Adoption string

const (
	AdoptionAdopt  Adoption = "Adopt"
	AdoptionIgnore Adoption = "Ignore"
)

// CatalogRetain bounds how many discovered snapshots are materialised.
type CatalogRetain struct {
	// +optional
	PerIdentity *int32 `json:"perIdentity,omitempty"`
	// +optional
	MaxAgeDays *int32 `json:"maxAgeDays,omitempty"`
}

// Catalog discovers snapshots in the repository that this cluster did not create.
type Catalog struct {
	// +optional
	PeriodicRefresh bool `json:"periodicRefresh,omitempty"`
	// RefreshInterval is a Go duration, at least 30s (default 1h).
	// +optional
	RefreshInterval string `json:"refreshInterval,omitempty"`
	// +optional
	Retain *CatalogRetain `json:"retain,omitempty"`
	// FallbackNamespace receives snapshots whose namespace does not exist (ClusterRepository only).
	// +optional
	FallbackNamespace string `json:"fallbackNamespace,omitempty"`
	// +optional
	ForeignSnapshots ForeignSnapshots `json:"foreignSnapshots,omitempty"`
	// +optional
	Adoption Adoption `json:"adoption,omitempty"`
}

// DeletionProtection is the mass-deletion breaker.
type DeletionProtection struct {
	// Threshold of pending external deletions at which every deletion is held; 0 disables.
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=0
	// +optional
	Threshold *int32 `json:"threshold,omitempty"`
}

// Concurrency caps concurrent mover Jobs against the repository.
type Concurrency struct {
	// MaxConcurrentJobs bounds backups and restores at once; absent or 0 is unlimited.
	// +kubebuilder:validation:Minimum=0
	// +optional
	MaxConcurrentJobs *int32 `json:"maxConcurrentJobs,omitempty"`
}

// HealthProbe periodically checks the backend.
type HealthProbe struct {
	// +kubebuilder:default=true
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// Interval is a Go duration, at least 30s (default 30m).
	// +optional
	Interval string `json:"interval,omitempty"`
	// +optional
	FailureThreshold *int32 `json:"failureThreshold,omitempty"`
	// +kubebuilder:validation:Enum=Degrade
	// +optional
	OnFailure string `json:"onFailure,omitempty"`
}

// Health tunes repository health reporting.
type Health struct {
	// IndexBlobWarnThreshold warns when index blobs exceed it (default 1000, 0 disables).
	// +optional
	IndexBlobWarnThreshold *int32 `json:"indexBlobWarnThreshold,omitempty"`
	// +optional
	Probe *HealthProbe `json:"probe,omitempty"`
}

// IdentityDefaults shapes the kopia identity of every consumer policy.
type IdentityDefaults struct {
	// Cluster suffixes hostnames as <namespace>.<cluster>.
	// +optional
	Cluster string `json:"cluster,omitempty"`
	// HostnameExpr is a CEL expression returning the hostname.
	// +optional
	HostnameExpr string `json:"hostnameExpr,omitempty"`
	// UsernameExpr is a CEL expression returning the username.
	// +optional
	UsernameExpr string `json:"usernameExpr,omitempty"`
}

// MaintenanceSchedule holds the quick and full maintenance crons.
type MaintenanceSchedule struct {
	// +optional
	Quick *CronSpec `json:"quick,omitempty"`
	// +optional
	Full *CronSpec `json:"full,omitempty"`
}

// RepositoryMaintenance configures the repository's default Maintenance.
type RepositoryMaintenance struct {
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// +optional
	Schedule *MaintenanceSchedule `json:"schedule,omitempty"`
	// Namespace the maintenance Job runs in (ClusterRepository only).
	// +optional
	Namespace string `json:"namespace,omitempty"`
}

// RepositoryMode says whether snapflow may write to the repository.
// +kubebuilder:validation:Enum=ReadWrite;ReadOnly
type RepositoryMode string

const (
	ModeReadWrite RepositoryMode = "ReadWrite"
	ModeReadOnly  RepositoryMode = "ReadOnly"
)

// Scratch sizes the scratch volume used by deep verification.
type Scratch struct {
	// +optional
	Capacity *resource.Quantity `json:"capacity,omitempty"`
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty"`
}

// SourceColocation places the mover next to the source workload.
type SourceColocation struct {
	// +kubebuilder:validation:Enum=Auto;Disabled
	// +optional
	Mode string `json:"mode,omitempty"`
}

// Throttle limits mover IO against the backend.
type Throttle struct {
	// +optional
	UploadBytesPerSecond *int64 `json:"uploadBytesPerSecond,omitempty"`
	// +optional
	DownloadBytesPerSecond *int64 `json:"downloadBytesPerSecond,omitempty"`
	// +optional
	ReadOpsPerSecond *int64 `json:"readOpsPerSecond,omitempty"`
	// +optional
	WriteOpsPerSecond *int64 `json:"writeOpsPerSecond,omitempty"`
}

// MoverDefaults applies to every mover that uses the repository.
type MoverDefaults struct {
	// +optional
	SecurityContext *corev1.SecurityContext `json:"securityContext,omitempty"`
	// +optional
	PodSecurityContext *corev1.PodSecurityContext `json:"podSecurityContext,omitempty"`
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
	// +optional
	Cache *MoverCache `json:"cache,omitempty"`
	// +optional
	Scratch *Scratch `json:"scratch,omitempty"`
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`
	// +optional
	SourceColocation *SourceColocation `json:"sourceColocation,omitempty"`
	// +kubebuilder:validation:Minimum=0
	// +optional
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`
	// +optional
	Throttle *Throttle `json:"throttle,omitempty"`
	// +optional
	PodLabels map[string]string `json:"podLabels,omitempty"`
	// +optional
	PodAnnotations map[string]string `json:"podAnnotations,omitempty"`
}

// NamespaceDeletePolicy says what happens to snapshots when their namespace goes.
// +kubebuilder:validation:Enum=Orphan;Delete
type NamespaceDeletePolicy string

const (
	// NamespaceDeleteOrphan keeps the kopia snapshots of a deleted
	// namespace in the repository (the CRs go, the data stays restorable).
	NamespaceDeleteOrphan NamespaceDeletePolicy = "Orphan"
	// NamespaceDeleteDelete lets each Snapshot's deletionPolicy decide, as
	// for any other deletion.
	NamespaceDeleteDelete NamespaceDeletePolicy = "Delete"
)

// EpochParameters are kopia's epoch-manager parameters.
type EpochParameters struct {
	// +optional
	MinDuration string `json:"minDuration,omitempty"`
	// +optional
	RefreshFrequency string `json:"refreshFrequency,omitempty"`
	// +optional
	AdvanceOnCount *int32 `json:"advanceOnCount,omitempty"`
	// +optional
	AdvanceOnSizeMiB *int64 `json:"advanceOnSizeMiB,omitempty"`
	// +optional
	CheckpointFrequency *int32 `json:"checkpointFrequency,omitempty"`
	// +optional
	DeleteParallelism *int32 `json:"deleteParallelism,omitempty"`
}

// BlobRetention is object-lock retention for blobs (S3, Azure, GCS).
type BlobRetention struct {
	// +kubebuilder:validation:Enum=GOVERNANCE;COMPLIANCE
	Mode string `json:"mode"`
	// Period is a Go duration of at least 24h (write 30 days as 720h).
	Period string `json:"period"`
}

// RepositoryParameters are repository-wide kopia parameters.
type RepositoryParameters struct {
	// +optional
	Epoch *EpochParameters `json:"epoch,omitempty"`
	// +optional
	BlobRetention *BlobRetention `json:"blobRetention,omitempty"`
}

// ScheduleDefaults are inherited by schedules and verification crons.
type ScheduleDefaults struct {
	// +optional
	Timezone string `json:"timezone,omitempty"`
	// +optional
	Jitter string `json:"jitter,omitempty"`
}

// SeedFrom is where a seeded repository copies its content from.
// +kubebuilder:validation:XValidation:rule="(has(self.backend)?1:0)+(has(self.repository)?1:0)==1",message="exactly one of backend, repository"
type SeedFrom struct {
	// Backend copies blobs from raw storage (kopia repository sync-to).
	// +optional
	Backend *Backend `json:"backend,omitempty"`
	// Repository copies snapshots from another repository (kopia snapshot migrate).
	// +optional
	Repository *RepositoryRef `json:"repository,omitempty"`
}

// SeedSync tunes a blob-level seed.
type SeedSync struct {
	// +optional
	Parallel *int32 `json:"parallel,omitempty"`
}

// SeedMigrate tunes a snapshot-level seed.
type SeedMigrate struct {
	// +optional
	Parallel *int32 `json:"parallel,omitempty"`
	// Policies copies kopia policies along with snapshots.
	// +optional
	Policies bool `json:"policies,omitempty"`
}

// Seed fills a new repository from an existing one (disaster recovery).
type Seed struct {
	From SeedFrom `json:"from"`
	// +optional
	Sync *SeedSync `json:"sync,omitempty"`
	// +optional
	Migrate *SeedMigrate `json:"migrate,omitempty"`
	// +optional
	AllowEmptySource bool `json:"allowEmptySource,omitempty"`
	// +optional
	FailurePolicy *FailurePolicy `json:"failurePolicy,omitempty"`
	// +optional
	CredentialProjection *CredentialProjection `json:"credentialProjection,omitempty"`
}

// ServerAuth protects the kopia web UI.
type ServerAuth struct {
	// SecretRef names a Secret with the server username and password.
	// +optional
	SecretRef *SecretRef `json:"secretRef,omitempty"`
	// Insecure serves without authentication; needs AcknowledgeInsecure.
	// +optional
	Insecure bool `json:"insecure,omitempty"`
	// +optional
	AcknowledgeInsecure bool `json:"acknowledgeInsecure,omitempty"`
}

// RepositoryServer runs the kopia web UI against the repository.
type RepositoryServer struct {
	// +optional
	Enabled bool `json:"enabled,omitempty"`
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=65535
	// +optional
	Port *int32 `json:"port,omitempty"`
	// +optional
	ReadOnly *bool `json:"readOnly,omitempty"`
	// +optional
	Auth *ServerAuth `json:"auth,omitempty"`
	// Namespace the server runs in (ClusterRepository only).
	// +optional
	Namespace string `json:"namespace,omitempty"`
}

// RepositorySpec is shared by Repository and ClusterRepository.
type RepositorySpec struct {
	Backend    Backend              `json:"backend"`
	Encryption RepositoryEncryption `json:"encryption"`
	// +optional
	Create *RepositoryCreate `json:"create,omitempty"`
	// +optional
	Bootstrap *RepositoryBootstrap `json:"bootstrap,omitempty"`
	// +optional
	Catalog *Catalog `json:"catalog,omitempty"`
	// +optional
	DeletionProtection *DeletionProtection `json:"deletionProtection,omitempty"`
	// +optional
	Concurrency *Concurrency `json:"concurrency,omitempty"`
	// +optional
	Health *Health `json:"health,omitempty"`
	// +optional
	IdentityDefaults *IdentityDefaults `json:"identityDefaults,omitempty"`
	// +optional
	Maintenance *RepositoryMaintenance `json:"maintenance,omitempty"`
	// +kubebuilder:default=ReadWrite
	// +optional
	Mode RepositoryMode `json:"mode,omitempty"`
	// +optional
	MoverDefaults *MoverDefaults `json:"moverDefaults,omitempty"`
	// +kubebuilder:default=Orphan
	// +optional
	OnNamespaceDelete NamespaceDeletePolicy `json:"onNamespaceDelete,omitempty"`
	// +optional
	Parameters *RepositoryParameters `json:"parameters,omitempty"`
	// +optional
	ScheduleDefaults *ScheduleDefaults `json:"scheduleDefaults,omitempty"`
	// +optional
	Seed *Seed `json:"seed,omitempty"`
	// +optional
	Server *RepositoryServer `json:"server,omitempty"`
	// +optional
	Suspend bool `json:"suspend,omitempty"`
}

// RepositoryPhase is the lifecycle phase of a repository.
// +kubebuilder:validation:Enum=Pending;Initializing;Ready;Degraded;Failed
type RepositoryPhase string

const (
	RepositoryPending      RepositoryPhase = "Pending"
	RepositoryInitializing RepositoryPhase = "Initializing"
	RepositoryReady        RepositoryPhase = "Ready"
	RepositoryDegraded     RepositoryPhase = "Degraded"
	RepositoryFailed       RepositoryPhase = "Failed"
)

// StorageStats summarises repository content.
type StorageStats struct {
	// +optional
	SnapshotCount *int64 `json:"snapshotCount,omitempty"`
	// +optional
	TotalSize *int64 `json:"totalSize,omitempty"`
	// +optional
	LastObservedAt *metav1.Time `json:"lastObservedAt,omitempty"`
	// +optional
	IndexBlobCount *int64 `json:"indexBlobCount,omitempty"`
	// StoredBytes and BlobCount are what the repository's storage holds,
	// counted blob by blob by the last full maintenance run (at
	// StoredObservedAt), after it reclaimed what it could; TotalSize is
	// the snapshots' logical size. A snapflow extension. The mover of the
	// Maintenance that may maintain the repository reports them, so a
	// namespace that runs its Repository's maintenance vouches for them.
	// +optional
	StoredBytes *int64 `json:"storedBytes,omitempty"`
	// +optional
	BlobCount *int64 `json:"blobCount,omitempty"`
	// ReclaimableBytes is, at most, the part of StoredBytes later full
	// maintenance runs free once kopia's safety margins have passed: the
	// content no snapshot referenced at the last full run.
	// +optional
	ReclaimableBytes *int64 `json:"reclaimableBytes,omitempty"`
	// +optional
	StoredObservedAt *metav1.Time `json:"storedObservedAt,omitempty"`
}

// CatalogStatus reports the last catalog scan.
type CatalogStatus struct {
	// +optional
	DiscoveredBackupCount *int64 `json:"discoveredBackupCount,omitempty"`
	// +optional
	LastRefreshAt *metav1.Time `json:"lastRefreshAt,omitempty"`
}

// ServerStatus reports the kopia web UI.
type ServerStatus struct {
	// +optional
	URL string `json:"url,omitempty"`
	// +optional
	Ready bool `json:"ready,omitempty"`
}

// SeedStatus reports a seed run.
type SeedStatus struct {
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// +optional
	SeededAt *metav1.Time `json:"seededAt,omitempty"`
	// +optional
	Mode string `json:"mode,omitempty"`
	// +optional
	Source string `json:"source,omitempty"`
	// +optional
	SnapshotCount *int64 `json:"snapshotCount,omitempty"`
	// +optional
	SnapshotsCopied *int64 `json:"snapshotsCopied,omitempty"`
}

// ConnectStatus is the retry state of a repository that failed to connect.
// Attempts back off: each waits as long as the repository has been failing,
// between the function's base retry interval and its ceiling. Deleting the
// bootstrap Job, or editing the spec, starts an attempt at once.
type ConnectStatus struct {
	// Generation is the spec generation the attempts are for.
	Generation int64 `json:"generation"`
	// Attempts counts the failed attempts at this generation.
	Attempts int32 `json:"attempts"`
	// FailingSince is when the first attempt at this generation ended.
	FailingSince metav1.Time `json:"failingSince"`
	// LastAttemptAt is when the last attempt ended.
	LastAttemptAt metav1.Time `json:"lastAttemptAt"`
	// NextAttemptAt is the earliest time of the next attempt.
	NextAttemptAt metav1.Time `json:"nextAttemptAt"`
}

// ProbeStatus records the periodic re-checks of a connected repository
// (spec.health.probe; a snapflow extension).
type ProbeStatus struct {
	// LastProbeAt is when the last probe ended.
	// +optional
	LastProbeAt *metav1.Time `json:"lastProbeAt,omitempty"`
	// ConsecutiveFailures counts the probes that failed since the last
	// one that succeeded; at failureThreshold the repository is Degraded.
	// +optional
	ConsecutiveFailures int32 `json:"consecutiveFailures,omitempty"`
	// Message is what the last probe found.
	// +optional
	Message string `json:"message,omitempty"`
	// Job is the last probe Job recorded: its result counts once however
	// often its events are delivered.
	// +optional
	Job string `json:"job,omitempty"`
}

// RepositoryStatus is written by snapflow's repository handling.
type RepositoryStatus struct {
	// +optional
	Phase RepositoryPhase `json:"phase,omitempty"`
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// +optional
	ResolvedCredentialVersion string `json:"resolvedCredentialVersion,omitempty"`
	// UniqueID is kopia's repository unique id.
	// +optional
	UniqueID string `json:"uniqueId,omitempty"`
	// Backend is the backend kind in use, e.g. s3 or filesystem.
	// +optional
	Backend string `json:"backend,omitempty"`
	// +optional
	StorageStats *StorageStats `json:"storageStats,omitempty"`
	// +optional
	Catalog *CatalogStatus `json:"catalog,omitempty"`
	// +optional
	Server *ServerStatus `json:"server,omitempty"`
	// +optional
	Seed *SeedStatus `json:"seed,omitempty"`
	// +optional
	Parameters *RepositoryParameters `json:"parameters,omitempty"`
	// +optional
	LastReverifyAt *metav1.Time `json:"lastReverifyAt,omitempty"`
	// Connect tracks the attempts to connect while the repository cannot be
	// reached at its generation (a snapflow extension); gone once Ready.
	// +optional
	Connect *ConnectStatus `json:"connect,omitempty"`
	// Probe tracks the periodic re-checks of a connected repository.
	// +optional
	Probe *ProbeStatus `json:"probe,omitempty"`
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Repository is a kopia repository usable from its own namespace.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=kopiarepo,categories=kopiur
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Backend",type=string,JSONPath=`.status.backend`
// +kubebuilder:printcolumn:name="Server",type=string,JSONPath=`.status.server.url`,priority=1
// +kubebuilder:printcolumn:name="IndexBlobs",type=integer,JSONPath=`.status.storageStats.indexBlobCount`,priority=1
// +kubebuilder:printcolumn:name="Stored",type=integer,JSONPath=`.status.storageStats.storedBytes`,priority=1
// +kubebuilder:printcolumn:name="Reclaimable",type=integer,JSONPath=`.status.storageStats.reclaimableBytes`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Repository struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec RepositorySpec `json:"spec"`
	// +optional
	Status RepositoryStatus `json:"status,omitempty"`
}

// RepositoryList is a list of Repositories.
//
// +kubebuilder:object:root=true
type RepositoryList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Repository `json:"items"`
}

// AllowedNamespaces gates which namespaces may use a ClusterRepository.
// +kubebuilder:validation:XValidation:rule="(has(self.list)?1:0)+(has(self.selector)?1:0)+(has(self.all)?1:0)==1",message="exactly one of list, selector, all"
type AllowedNamespaces struct {
	// +optional
	List []string `json:"list,omitempty"`
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
	// +optional
	All *bool `json:"all,omitempty"`
}

// ClusterRepositorySpec is a RepositorySpec plus tenancy.
type ClusterRepositorySpec struct {
	RepositorySpec `json:",inline"`
	// AllowedNamespaces lists who may use this repository; absent allows nobody.
	// +optional
	AllowedNamespaces *AllowedNamespaces `json:"allowedNamespaces,omitempty"`
}

// ClusterRepository is a kopia repository shared by the namespaces it allows.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=kopiaclusterrepo,categories=kopiur
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Backend",type=string,JSONPath=`.status.backend`
// +kubebuilder:printcolumn:name="Server",type=string,JSONPath=`.status.server.url`,priority=1
// +kubebuilder:printcolumn:name="IndexBlobs",type=integer,JSONPath=`.status.storageStats.indexBlobCount`,priority=1
// +kubebuilder:printcolumn:name="Stored",type=integer,JSONPath=`.status.storageStats.storedBytes`,priority=1
// +kubebuilder:printcolumn:name="Reclaimable",type=integer,JSONPath=`.status.storageStats.reclaimableBytes`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ClusterRepository struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ClusterRepositorySpec `json:"spec"`
	// +optional
	Status RepositoryStatus `json:"status,omitempty"`
}

// ClusterRepositoryList is a list of ClusterRepositories.
//
// +kubebuilder:object:root=true
type ClusterRepositoryList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterRepository `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Repository{}, &RepositoryList{}, &ClusterRepository{}, &ClusterRepositoryList{})
}
