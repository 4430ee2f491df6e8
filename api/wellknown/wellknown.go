// Package wellknown holds every name snapflow puts on the wire: labels,
// annotations, finalizers, condition types and reasons. Keeping them in one
// place keeps the webhook, the functions and the CLI in agreement.
package wellknown

// Prefix is the Kopiur API's prefix; snapflow-only extensions use SnapflowPrefix.
const (
	Prefix         = "kopiur.home-operations.com/"
	SnapflowPrefix = "snapflow.dev/"
)

// Labels.
const (
	// LabelConfig names the SnapshotPolicy a Snapshot belongs to; retention and
	// the policy cascade only ever touch Snapshots carrying it.
	LabelConfig = Prefix + "config"
	// LabelOrigin mirrors status.origin.
	LabelOrigin    = Prefix + "origin"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedByValue = "snapflow"
	// LabelSchedule and LabelScheduleUID name the SnapshotSchedule that
	// minted a Snapshot, so the schedule cascade can tell a deleted or
	// replaced schedule from a live one.
	LabelSchedule    = SnapflowPrefix + "schedule"
	LabelScheduleUID = SnapflowPrefix + "schedule-uid"
	// LabelSnapshot names the Snapshot a mover Job, hook Job, staged PVC or
	// VolumeSnapshot belongs to.
	LabelSnapshot = SnapflowPrefix + "snapshot"
	// LabelVolumeGroup names the VolumeGroupSnapshot the Snapshots of one
	// firing share, so the one that cuts it can find its siblings.
	LabelVolumeGroup = SnapflowPrefix + "volume-group"
	// MemberPrefix + a group's name is the label key that marks the PVCs
	// of that group: one key per group, so groups cut at once over the
	// same PVCs (two repositories, two policies) never take each
	// other's members. Its value is MemberValue.
	MemberPrefix = "vgs.snapflow.dev/"
	MemberValue  = "member"
	// AnnotationCutBy on a VolumeGroupSnapshot names the Snapshot that cut
	// it, whose hooks quiesced the workload for every member.
	AnnotationCutBy = SnapflowPrefix + "cut-by"
	// AnnotationVolumeGroupSnapshotClass on a SnapshotPolicy names the
	// VolumeGroupSnapshotClass its groups are cut with (the API's
	// volumeSnapshotClassName names a VolumeSnapshotClass); unset, the
	// driver's default class.
	AnnotationVolumeGroupSnapshotClass = SnapflowPrefix + "volume-group-snapshot-class"
	// LabelRepository, LabelRepositoryKind and LabelRepositoryNamespace name
	// the repository a bootstrap or deletion Job works on.
	LabelRepository          = SnapflowPrefix + "repository"
	LabelRepositoryKind      = SnapflowPrefix + "repository-kind"
	LabelRepositoryNamespace = SnapflowPrefix + "repository-namespace"
	// LabelOp says what a snapflow Job does (snapshot, bootstrap, hook, ...).
	LabelOp = SnapflowPrefix + "op"
	// OpDeleteBatch is the LabelOp of a repository's deletion batch Job.
	OpDeleteBatch = "snapshot-delete-batch"
	// LabelRepoPool marks Jobs that take a repository concurrency slot; its
	// value is a hash of the repository key.
	LabelRepoPool = SnapflowPrefix + "repo-pool"
	// LabelRestore and LabelRestoreUID name the Restore a mover Job or a
	// created target PVC belongs to; the UID proves a PVC is this Restore's
	// own and not a user's PVC of the same name.
	LabelRestore    = SnapflowPrefix + "restore"
	LabelRestoreUID = SnapflowPrefix + "restore-uid"
	// LabelVerify names the SnapshotPolicy a verification Job checks.
	LabelVerify = SnapflowPrefix + "verify"
	// LabelMaintenance names the Maintenance a maintenance Job runs.
	LabelMaintenance = SnapflowPrefix + "maintenance"
	// LabelMaintenanceDefault marks the Maintenance a repository projects
	// for itself: the function keeps it in line with spec.maintenance and
	// removes it when maintenance is disabled there.
	LabelMaintenanceDefault = SnapflowPrefix + "default-maintenance"
	// LabelReclaiming is on a maintenance Job that runs with safety none;
	// its value is the repository's pool key. Backups of that repository
	// wait while one is live: with no margins, kopia may delete content a
	// new backup would otherwise reuse.
	LabelReclaiming = SnapflowPrefix + "reclaiming"
	// LabelProjectedFor names the mover Job a projected credential Secret
	// or CA ConfigMap serves; its value is the Job's name.
	LabelProjectedFor = SnapflowPrefix + "projected-for"
	// LabelExecGrantFor names the mover Job a per-run ServiceAccount, Role
	// and RoleBinding serve (exec into a stream source's workload); its
	// value is the Job's name.
	LabelExecGrantFor = SnapflowPrefix + "exec-grant-for"
)

// AnnotationBatchJobUID is on a repository's deletion Lease: the UID of
// the batch Job its holder created. The holder names the Job, and whoever
// may create Jobs in that namespace could place one under the name first.
const AnnotationBatchJobUID = SnapflowPrefix + "batch-job-uid"

// AnnotationAllowCredentialProjection ("true") on a ClusterRepository is its
// owner's consent to copy its credentials into tenants' namespaces for runs
// whose policy or Restore enables spec.credentialProjection.
const AnnotationAllowCredentialProjection = SnapflowPrefix + "allow-credential-projection"

// AnnotationIdentityScope on a ClusterRepository says whose snapshots a
// namespace's runs may touch in it. Unset or IdentityScopeNamespace: only
// snapshots whose kopia hostname is the namespace's own (the namespace, or
// the namespace and a '.'-suffix), so no tenant writes, prunes, restores or
// deletes another's. IdentityScopeShared lifts that for repositories whose
// consumers trust one another.
const AnnotationIdentityScope = SnapflowPrefix + "identity-scope"

// Values of AnnotationIdentityScope.
const (
	IdentityScopeNamespace = "Namespace"
	IdentityScopeShared    = "Shared"
)

// AnnotationVerifyRequested on a SnapshotPolicy (an RFC3339 time) asks for
// every configured verification tier to run now, outside its schedule.
const AnnotationVerifyRequested = SnapflowPrefix + "verify-requested"

// Pruned-by values of snapflow's own deletions.
const (
	PrunedByRetention     = "retention"
	PrunedByFailedHistory = "failed-history"
	PrunedByPolicyCascade = "policy-cascade"
	PrunedByReplacedRun   = "replaced-run"
)

// Annotations.
const (
	AnnotationAllowIdentityChange = Prefix + "allow-identity-change"
	AnnotationAllowMassDeletion   = Prefix + "allow-mass-deletion"
	AnnotationSkipSnapshotCleanup = Prefix + "skip-snapshot-cleanup"
	AnnotationPrivilegedMovers    = Prefix + "privileged-movers"
	// AnnotationBackupNotRequired on a Namespace or a PVC says it needs no
	// backup; its value is the reason `snapflow coverage` shows.
	AnnotationBackupNotRequired = SnapflowPrefix + "backup-not-required"
	AnnotationPrunedBy          = Prefix + "pruned-by"
	// AnnotationCancelRequested on a Snapshot asks its run to stop: the
	// snapshot function deletes its mover Job, ends it Failed (class
	// Cancelled) and runs its afterSnapshot hooks, as for any failed run.
	// The value says why. A schedule's Replace sets it, beginning with
	// CancelReplaced.
	AnnotationCancelRequested = SnapflowPrefix + "cancel-requested"
	// CancelReplaced begins the cancel reason a schedule's Replace writes.
	CancelReplaced = "replaced by the slot due at "
	// AnnotationRequestedBy records who sent the request event a Snapshot
	// or Restore was made for (the authenticated user, or "unauthenticated").
	AnnotationRequestedBy = SnapflowPrefix + "requested-by"
	// AnnotationHooksAuthor records who last set a SnapshotPolicy's runJob
	// and workloadExec hooks (admission stamps it): those hooks run only
	// while that user may create Jobs and exec into pods themselves.
	AnnotationHooksAuthor = SnapflowPrefix + "hooks-author"
	// AnnotationExecAuthor records who wrote a Restore with a streamExec
	// target or a source in another namespace (admission stamps it): the
	// restore execs into the workload, or reads the other namespace's
	// Snapshots, only while that user may do so themselves.
	AnnotationExecAuthor = SnapflowPrefix + "exec-author"
	// AnnotationRequestEvent identifies that event (a Restore: its id; a
	// Snapshot: "<source> <id>"): a redelivery finds its object again.
	AnnotationRequestEvent = SnapflowPrefix + "requested-by-event"
	// AnnotationMaintenanceRunReq (an RFC3339 time) on a Maintenance asks
	// for a run now, of the mode AnnotationMaintenanceRunMode names (quick
	// or full, default quick).
	AnnotationMaintenanceRunReq  = Prefix + "run-requested"
	AnnotationMaintenanceRunMode = Prefix + "run-mode"
	// AnnotationMaintenanceSafety "none" on a Maintenance runs its
	// requested runs (never its scheduled ones) with no safety margins:
	// what deletions freed is reclaimed in one run instead of over about
	// two days. It is safe only while nothing else writes to the
	// repository, so such a run starts only when no other snapflow Job of
	// the repository runs, and backups wait for it.
	AnnotationMaintenanceSafety = SnapflowPrefix + "maintenance-safety"
	// AnnotationVolumePolicies holds the effective volume policies stamped at
	// admission (a volumepolicy.Stamp as JSON).
	AnnotationVolumePolicies = SnapflowPrefix + "volume-policies"
)

// Finalizers.
const (
	FinalizerSnapshotCleanup = Prefix + "snapshot-cleanup"
	FinalizerPolicyCleanup   = Prefix + "policy-cleanup"
)

// Condition types (kstatus plus snapflow's own).
const (
	ConditionReady                    = "Ready"
	ConditionReconciling              = "Reconciling"
	ConditionStalled                  = "Stalled"
	ConditionRepositorySlotAvailable  = "RepositorySlotAvailable"
	ConditionMoverPermitted           = "MoverPermitted"
	ConditionHooksSucceeded           = "HooksSucceeded"
	ConditionDeletionHeld             = "DeletionHeld"
	ConditionMassDeletionHeld         = "MassDeletionHeld"
	ConditionBackendReachable         = "BackendReachable"
	ConditionTimezoneDefaultAmbiguous = "TimezoneDefaultAmbiguous"
	// ConditionJitterDefaultAmbiguous is snapflow's twin of the above for
	// scheduleDefaults.jitter.
	ConditionJitterDefaultAmbiguous = "JitterDefaultAmbiguous"
	ConditionFanoutCapped           = "FanoutCapped"
	// ConditionSourcesOverlap is on a SnapshotPolicy: True while its
	// firings are refused because two sources cover one PVC.
	ConditionSourcesOverlap = "SourcesOverlap"
	// ConditionRepositoriesFound is on a SnapshotPolicy: whether every
	// repository it writes to exists.
	ConditionRepositoriesFound = "RepositoriesFound"
	ConditionReplacementHeld   = "ReplacementHeld"
	// ConditionKopiaPinned is False on a Snapshot whose kopia pin could not be
	// brought in line with spec.pin.
	ConditionKopiaPinned = "KopiaPinned"
	// ConditionSecurityContextInherited says whether a mover asked to
	// inherit its workload's security context found one to copy.
	ConditionSecurityContextInherited = "SecurityContextInherited"
	// ConditionVerified on a SnapshotPolicy tells the last verification's outcome.
	ConditionVerified = "Verified"
	// ConditionBackupStale on a SnapshotSchedule is True while no backup of
	// its has succeeded for schedule.StaleAfter slots.
	ConditionBackupStale = "BackupStale"
	// ConditionMaintenanceOwned on a Maintenance is False while another
	// kopia user owns the repository's maintenance and takeover is Never.
	ConditionMaintenanceOwned = "MaintenanceOwned"
)

// Reasons a Snapshot waits at a gate before its mover may start: Pending,
// with Ready (or MoverPermitted) False for one of them. The exporter serves
// kopiur_snapshot_gated from them, so they are wire values.
const (
	ReasonWaitingForRepository = "WaitingForRepository"
	ReasonRepositorySuspended  = "RepositorySuspended"
	// ReasonRepositoryReclaiming: a maintenance run without kopia's safety
	// margins is deleting content a backup could reuse.
	ReasonRepositoryReclaiming = "RepositoryReclaiming"
	// ReasonPrivilegedMoverNotPermitted: the privilege gate refuses the
	// mover the run would need.
	ReasonPrivilegedMoverNotPermitted = "PrivilegedMoverNotPermitted"
)

// DeletionHeld=False reasons the exporter reads a deletion's outcome from:
// a batch is deleting the Snapshot's kopia snapshot, or has deleted it.
const (
	ReasonDeletionInProgress   = "Deleting"
	ReasonKopiaSnapshotDeleted = "KopiaSnapshotDeleted"
)

// Failure classes of a run refused before its mover started, counted as
// refusals: its spec cannot run, or another run writes its kopia identity.
const (
	ReasonFailedValidation  = "FailedValidation"
	ReasonIdentityCollision = "IdentityCollision"
)

// Reserved kopia tag prefix: user tags may not start with it.
const ReservedTagPrefix = "kopiur"

// DefaultIgnoreRules is what files.ignoreRules means when files is omitted:
// filesystem artefacts that are never intentional user data.
var DefaultIgnoreRules = []string{"/lost+found", "System Volume Information", "$RECYCLE.BIN", "@eaDir", ".snapshot"}
