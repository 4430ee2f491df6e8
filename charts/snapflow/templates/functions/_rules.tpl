{{- /*
Least-privilege rules of each function, derived from what its code does
(functions/<name>/*.go and the internal packages it calls). Cluster-wide,
because the functions act on snapflow objects in every namespace. Notes:
- "<kind>/finalizers: update" is needed where the function creates objects
  with an ownerReference that sets blockOwnerDeletion (mover Jobs, their
  ConfigMaps, staged PVCs), as the OwnerReferencesPermissionEnforcement
  admission plugin demands.
- status writes go through statuspatch: get the object itself, patch
  /status (which needs no get of its own).
- "events: create, patch" is the Kubernetes Event recorder.
*/ -}}

{{- define "snapflow.rules.events" -}}
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- end -}}

{{- define "snapflow.rules.snapshot" -}}
# Snapshots: reconcile, mint on snapshot.requested, status.
- apiGroups: ["kopiur.home-operations.com"]
  resources: ["snapshots"]
  verbs: ["get", "list", "create"]
- apiGroups: ["kopiur.home-operations.com"]
  resources: ["snapshots/status", "repositories/status", "clusterrepositories/status"]
  verbs: ["patch"]
- apiGroups: ["kopiur.home-operations.com"]
  resources: ["snapshots/finalizers"]
  verbs: ["update"]
# Repositories are bootstrapped (and listed by the tenancy check); policies
# read, and listed to check identity collisions again before each backup.
- apiGroups: ["kopiur.home-operations.com"]
  resources: ["repositories", "clusterrepositories"]
  verbs: ["get", "list"]
- apiGroups: ["kopiur.home-operations.com"]
  resources: ["snapshotpolicies"]
  verbs: ["get", "list"]
# Preflight checks read the repository's maintenance record.
- apiGroups: ["kopiur.home-operations.com"]
  resources: ["maintenances"]
  verbs: ["list"]
# Namespaces: tenancy and the privileged-movers annotation.
- apiGroups: [""]
  resources: ["namespaces"]
  verbs: ["get"]
# Mover, bootstrap, pin and hook Jobs; their pods for reports and failure
# messages, and the workload's for Direct placement and the identity a
# mover inherits.
- apiGroups: ["batch"]
  resources: ["jobs"]
  verbs: ["get", "list", "create", "delete"]
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list"]
{{- if .Values.functions.progress }}
# A running mover's log carries its progress (status.progress).
- apiGroups: [""]
  resources: ["pods/log"]
  verbs: ["get"]
{{- end }}
{{- if .Values.functions.snapshot.workloadExecHooks }}
# pods/exec for workloadExec hooks, opted in (get for the WebSocket
# upgrade, create for SPDY and for API servers that authorize upgrades as
# create).
- apiGroups: [""]
  resources: ["pods/exec"]
  verbs: ["get", "create"]
# Stream sources: each run gets its own ServiceAccount, and a Role and
# RoleBinding letting it exec into the one pod its command runs in; all
# three go when the run ends.
- apiGroups: [""]
  resources: ["serviceaccounts"]
  verbs: ["get", "create", "delete"]
- apiGroups: ["rbac.authorization.k8s.io"]
  resources: ["roles"]
  verbs: ["get", "create", "update", "delete"]
- apiGroups: ["rbac.authorization.k8s.io"]
  resources: ["rolebindings"]
  verbs: ["get", "create", "delete"]
{{- end }}
# Work-spec ConfigMaps (a bootstrap's is replaced, never updated), recipe and global volume policies.
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["get", "create", "delete"]
# Source PVCs (read, selected by pvcSelector; a group's members labelled
# for its VolumeGroupSnapshot), staged PVCs (created, deleted), PVs for volume policies.
- apiGroups: [""]
  resources: ["persistentvolumeclaims"]
  verbs: ["get", "list", "create", "patch", "delete"]
- apiGroups: [""]
  resources: ["persistentvolumes"]
  verbs: ["get"]
# copyMethod Snapshot stages through a VolumeSnapshot; the members of a
# VolumeGroupSnapshot are listed and read through their bound contents.
- apiGroups: ["snapshot.storage.k8s.io"]
  resources: ["volumesnapshots"]
  verbs: ["get", "list", "create", "delete"]
- apiGroups: ["snapshot.storage.k8s.io"]
  resources: ["volumesnapshotcontents"]
  verbs: ["get"]
# groupBy VolumeGroupSnapshot: one group per firing, released by its last member.
- apiGroups: ["groupsnapshot.storage.k8s.io"]
  resources: ["volumegroupsnapshots"]
  verbs: ["get", "create", "update", "delete"]
- apiGroups: ["groupsnapshot.storage.k8s.io"]
  resources: ["volumegroupsnapshotcontents"]
  verbs: ["get"]
# A firing refused over the fan-out cap is recorded on the policy.
- apiGroups: ["kopiur.home-operations.com"]
  resources: ["snapshotpolicies/status"]
  verbs: ["patch"]
# httpRequest hooks may not reach the cluster's own networks: Service
# ranges, node pod ranges and node addresses.
- apiGroups: ["networking.k8s.io"]
  resources: ["servicecidrs"]
  verbs: ["list"]
- apiGroups: [""]
  resources: ["nodes"]
  verbs: ["list"]
{{ include "snapflow.rules.events" . }}
{{- end -}}

{{- define "snapflow.rules.cleanup" -}}
# Snapshots: cleanup finalizer removal (update), policy cascade (patch + delete), status.
- apiGroups: ["kopiur.home-operations.com"]
  resources: ["snapshots"]
  verbs: ["get", "list", "update", "patch", "delete"]
- apiGroups: ["kopiur.home-operations.com"]
  resources: ["snapshots/status", "repositories/status", "clusterrepositories/status"]
  verbs: ["patch"]
# Policies carry the cascade finalizer.
- apiGroups: ["kopiur.home-operations.com"]
  resources: ["snapshotpolicies"]
  verbs: ["get", "list", "update"]
- apiGroups: ["kopiur.home-operations.com"]
  resources: ["repositories", "clusterrepositories", "snapshotschedules"]
  verbs: ["get"]
# A namespace being deleted keeps its backups (onNamespaceDelete).
- apiGroups: [""]
  resources: ["namespaces"]
  verbs: ["get"]
# One deletion Job per repository at a time, guarded by a Lease in
# snapflow's namespace (rbac.yaml); what it deleted is read from its pod's
# termination message and its work spec.
- apiGroups: ["batch"]
  resources: ["jobs"]
  verbs: ["get", "create", "delete"]
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list"]
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["get", "create", "delete"]
{{ include "snapflow.rules.events" . }}
{{- end -}}

{{- define "snapflow.rules.retention" -}}
# GFS retention: read a policy's Snapshots, prune (patch the pruned-by mark, delete).
- apiGroups: ["kopiur.home-operations.com"]
  resources: ["snapshots"]
  verbs: ["get", "list", "patch", "delete"]
- apiGroups: ["kopiur.home-operations.com"]
  resources: ["snapshotpolicies"]
  verbs: ["get", "list"]
- apiGroups: ["kopiur.home-operations.com"]
  resources: ["snapshotpolicies/status"]
  verbs: ["patch"]
# The retention budget reads the repositories' deletionProtection.threshold,
# and every pass checks that the repositories a policy names exist.
- apiGroups: ["kopiur.home-operations.com"]
  resources: ["repositories", "clusterrepositories"]
  verbs: ["get"]
{{ include "snapflow.rules.events" . }}
{{- end -}}

{{- define "snapflow.rules.schedule" -}}
# Schedules fire by minting Snapshots; replaced runs are asked to stop
# (an annotation), then pruned with failed runs beyond the history limit.
# Schedules are watched: a tick lists them from the function's informer.
- apiGroups: ["kopiur.home-operations.com"]
  resources: ["snapshotschedules"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["kopiur.home-operations.com"]
  resources: ["snapshotschedules/status", "snapshotpolicies/status"]
  verbs: ["patch"]
- apiGroups: ["kopiur.home-operations.com"]
  resources: ["snapshots"]
  verbs: ["list", "create", "patch", "delete"]
- apiGroups: ["kopiur.home-operations.com"]
  resources: ["snapshotpolicies"]
  verbs: ["get", "list"]
- apiGroups: ["kopiur.home-operations.com"]
  resources: ["repositories", "clusterrepositories"]
  verbs: ["get"]
# pvcSelector sources expand to one Snapshot per PVC; coverage passes
# judge every PVC (its volume, its namespace's annotation) to tell the
# unprotected ones. Their record and the global volume policies are read
# through the schedule-coverage Role in the release namespace.
- apiGroups: [""]
  resources: ["persistentvolumeclaims"]
  verbs: ["list"]
- apiGroups: [""]
  resources: ["persistentvolumes", "namespaces"]
  verbs: ["list"]
# Replace reads whether a starting run's mover Job exists yet (the
# snapshot function deletes the Job of a run it is asked to cancel).
- apiGroups: ["batch"]
  resources: ["jobs"]
  verbs: ["get"]
{{ include "snapflow.rules.events" . }}
{{- end -}}

{{- define "snapflow.rules.restore" -}}
# Restores: reconcile, create on restore.requested, status.
- apiGroups: ["kopiur.home-operations.com"]
  resources: ["restores"]
  verbs: ["get", "list", "create"]
- apiGroups: ["kopiur.home-operations.com"]
  resources: ["restores/status"]
  verbs: ["patch"]
- apiGroups: ["kopiur.home-operations.com"]
  resources: ["restores/finalizers"]
  verbs: ["update"]
- apiGroups: ["kopiur.home-operations.com"]
  resources: ["snapshots"]
  verbs: ["get", "list"]
- apiGroups: ["kopiur.home-operations.com"]
  resources: ["snapshotpolicies"]
  verbs: ["get"]
- apiGroups: ["kopiur.home-operations.com"]
  resources: ["repositories", "clusterrepositories"]
  verbs: ["get"]
- apiGroups: [""]
  resources: ["namespaces"]
  verbs: ["get"]
# Target and prime PVCs; the prime's PV is handed to the user's PVC (claimRef).
- apiGroups: [""]
  resources: ["persistentvolumeclaims"]
  verbs: ["get", "list", "create", "delete"]
- apiGroups: [""]
  resources: ["persistentvolumes"]
  verbs: ["get", "update"]
- apiGroups: ["batch"]
  resources: ["jobs"]
  verbs: ["get", "create", "delete"]
# The mover's pod carries its report, read with the work spec it ran; a
# workload's pods give the identity a mover inherits (workloadSelector).
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list"]
{{- if .Values.functions.progress }}
# A running mover's log carries its progress (status.progress).
- apiGroups: [""]
  resources: ["pods/log"]
  verbs: ["get"]
{{- end }}
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["get", "create", "delete"]
{{- if .Values.functions.snapshot.workloadExecHooks }}
# streamExec restores, opted in with workloadExec hooks: each run gets its
# own ServiceAccount, and a Role and RoleBinding letting it exec into the
# one pod its command runs in; all three go when the run ends. The function
# never execs itself: it holds pods/exec because RBAC lets it grant only
# what it holds.
- apiGroups: [""]
  resources: ["pods/exec"]
  verbs: ["get", "create"]
- apiGroups: [""]
  resources: ["serviceaccounts"]
  verbs: ["get", "create", "delete"]
- apiGroups: ["rbac.authorization.k8s.io"]
  resources: ["roles"]
  verbs: ["get", "create", "update", "delete"]
- apiGroups: ["rbac.authorization.k8s.io"]
  resources: ["rolebindings"]
  verbs: ["get", "create", "delete"]
{{- end }}
{{ include "snapflow.rules.events" . }}
{{- end -}}

{{- define "snapflow.rules.verify" -}}
# Verification tiers of SnapshotPolicies: run Jobs, record runs in status.
- apiGroups: ["kopiur.home-operations.com"]
  resources: ["snapshotpolicies"]
  verbs: ["get", "list"]
- apiGroups: ["kopiur.home-operations.com"]
  resources: ["snapshotpolicies/status"]
  verbs: ["patch"]
- apiGroups: ["kopiur.home-operations.com"]
  resources: ["snapshotpolicies/finalizers"]
  verbs: ["update"]
- apiGroups: ["kopiur.home-operations.com"]
  resources: ["snapshots"]
  verbs: ["get", "list"]
- apiGroups: ["kopiur.home-operations.com"]
  resources: ["repositories", "clusterrepositories"]
  verbs: ["get"]
- apiGroups: ["batch"]
  resources: ["jobs"]
  verbs: ["get", "create", "delete"]
# The mover's pod carries its report, read with the work spec it ran.
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list"]
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["get", "create", "delete"]
{{ include "snapflow.rules.events" . }}
{{- end -}}

{{- define "snapflow.rules.maintenance" -}}
# Maintenances: a default one per repository (created, kept in line with
# spec.maintenance, deleted when disabled); runs recorded in status.
- apiGroups: ["kopiur.home-operations.com"]
  resources: ["maintenances"]
  verbs: ["get", "list", "create", "update", "delete"]
- apiGroups: ["kopiur.home-operations.com"]
  resources: ["maintenances/status"]
  verbs: ["patch"]
# A counted full run's storage (storedBytes, blobCount) onto the
# repository's status.
- apiGroups: ["kopiur.home-operations.com"]
  resources: ["repositories/status", "clusterrepositories/status"]
  verbs: ["patch"]
# Its Jobs and work specs carry blockOwnerDeletion owner references.
- apiGroups: ["kopiur.home-operations.com"]
  resources: ["maintenances/finalizers"]
  verbs: ["update"]
- apiGroups: ["kopiur.home-operations.com"]
  resources: ["repositories", "clusterrepositories"]
  verbs: ["get", "list"]
# kube-system's UID names this cluster's default maintenance owner.
- apiGroups: [""]
  resources: ["namespaces"]
  resourceNames: ["kube-system"]
  verbs: ["get"]
# Maintenance Jobs; with safety none, the repository's other Jobs are
# listed so such a run starts only when nothing else writes.
- apiGroups: ["batch"]
  resources: ["jobs"]
  verbs: ["get", "list", "create", "delete"]
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list"]
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["get", "create", "delete"]
{{ include "snapflow.rules.events" . }}
{{- end -}}

{{- define "snapflow.rules.prune" -}}
# Read-only inventory of `snapflow prune` (internal/prune/kubeinv): the
# BackupRepo, every Backup and Restore, and the PVCs, PVs and StorageClass
# that own pvc-<uuid> roots. The credential Secret is read through the
# resource-scoped secretReader Roles only.
- apiGroups: ["dataprotection.kubeblocks.io"]
  resources: ["backuprepos", "backups", "restores"]
  verbs: ["get", "list"]
- apiGroups: [""]
  resources: ["persistentvolumeclaims", "persistentvolumes"]
  verbs: ["get", "list"]
- apiGroups: ["storage.k8s.io"]
  resources: ["storageclasses"]
  verbs: ["get", "list"]
{{- end -}}

{{- /* Sender checks (runtime.Authenticator): every token is reviewed; the
snapshot and restore functions also check a request's sender may create
what it asks for. The snapshot function checks, whatever the sender
settings, that whoever set a policy's runJob and workloadExec hooks may
create Jobs and exec into pods themselves; with workloadExec on, the
restore function checks the same of a streamExec Restore's author. */ -}}
{{- define "snapflow.rules.senders" -}}
{{- $senders := include "snapflow.senderAuth" .root }}
{{- if $senders }}
- apiGroups: ["authentication.k8s.io"]
  resources: ["tokenreviews"]
  verbs: ["create"]
{{- end }}
{{- if or (eq .name "snapshot") (and (eq .name "restore") (or $senders .root.Values.functions.snapshot.workloadExecHooks)) }}
- apiGroups: ["authorization.k8s.io"]
  resources: ["subjectaccessreviews"]
  verbs: ["create"]
{{- end }}
{{- end -}}
