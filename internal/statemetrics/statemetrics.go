// Package statemetrics derives snapflow's Prometheus gauges from the
// objects' status, as kube-state-metrics does for built-in kinds: the
// functions scale to zero and keep nothing in memory, so what a backup
// owner graphs and alerts on must come from the API server. A series
// exists while its object does and vanishes with it.
//
// The names, types and meanings are Kopiur's (kopiur_*), so dashboards and
// alerts written for Kopiur work unchanged; what is snapflow's own is
// snapflow_*. Samples is pure: the caller lists the objects.
package statemetrics

import (
	"slices"
	"sort"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/cleanup"
	"github.com/snapflow/snapflow/internal/coverage"
	"github.com/snapflow/snapflow/internal/maintenance"
	"github.com/snapflow/snapflow/internal/prune/ledger"
)

// State is everything the gauges are derived from.
type State struct {
	Snapshots           []snapv1.Snapshot
	Policies            []snapv1.SnapshotPolicy
	Schedules           []snapv1.SnapshotSchedule
	Repositories        []snapv1.Repository
	ClusterRepositories []snapv1.ClusterRepository
	Restores            []snapv1.Restore
	Maintenances        []snapv1.Maintenance
	// Coverage is every PVC's verdict; nil when the exporter does not
	// judge coverage. CoverageKnown is 1 when it judged it, 0 when it
	// could not, nil when it does not judge it.
	Coverage      []coverage.Verdict
	CoverageKnown *float64
	// Prunes is each BackupRepo's last orphan-prune runs; nil when the
	// exporter does not read the prune record. PruneRecordKnown is 1 when
	// it read it, 0 when it could not, nil when it does not read it.
	Prunes           ledger.Ledger
	PruneRecordKnown *float64
}

// Desc describes one metric family.
type Desc struct {
	Name, Help string
	Labels     []string
}

// Sample is one series' value.
type Sample struct {
	Desc   *Desc
	Labels []string // values, in Desc.Labels order
	Value  float64
}

// The families, every one a gauge.
var (
	ResourcePhase = &Desc{"kopiur_resource_phase", "1 for the phase each object is in (only that phase is emitted).",
		[]string{"kind", "namespace", "name", "phase"}}
	SnapshotLastSuccess = &Desc{"kopiur_snapshot_last_success_timestamp_seconds", "When the policy's newest successful Snapshot ended (Unix seconds).",
		[]string{"namespace", "policy"}}
	SnapshotConsecutiveFailures = &Desc{"kopiur_snapshot_consecutive_failures", "Failed Snapshots of the policy since its newest successful one (of those kept: a schedule keeps failedJobsHistoryLimit).",
		[]string{"namespace", "policy"}}
	SnapshotSize = &Desc{"kopiur_snapshot_size_bytes", "Size of a successful Snapshot's data.",
		[]string{"namespace", "name", "policy"}}
	SnapshotFiles = &Desc{"kopiur_snapshot_files", "Files in a successful Snapshot (new, modified and unchanged).",
		[]string{"namespace", "name", "policy"}}
	SnapshotDuration = &Desc{"kopiur_snapshot_duration_seconds", "How long a finished Snapshot ran.",
		[]string{"namespace", "name", "policy"}}
	PolicyLastSuccess = &Desc{"kopiur_policy_last_backup_success_timestamp_seconds", "The policy's status.lastSuccessfulSnapshot (Unix seconds).",
		[]string{"namespace", "policy"}}
	PolicyLastDuration = &Desc{"kopiur_policy_last_backup_duration_seconds", "How long the policy's newest successful Snapshot ran.",
		[]string{"namespace", "policy"}}
	PolicyLastSize = &Desc{"kopiur_policy_last_backup_size_bytes", "Size of the policy's newest successful Snapshot.",
		[]string{"namespace", "policy"}}
	PolicyLastFiles = &Desc{"kopiur_policy_last_backup_files", "Files in the policy's newest successful Snapshot.",
		[]string{"namespace", "policy"}}
	PolicyLastBackupSuccess = &Desc{"kopiur_snapshotpolicy_last_backup_success", "1 when the policy's newest finished Snapshot succeeded, 0 when it failed.",
		[]string{"namespace", "policy"}}
	SnapshotVerified = &Desc{"kopiur_snapshot_verified_timestamp_seconds", "The policy's status.lastVerified (Unix seconds).",
		[]string{"namespace", "policy"}}
	SnapshotsLive = &Desc{"kopiur_snapshots_live", "Snapshot objects, by namespace.",
		[]string{"namespace"}}
	WaitingForSlot = &Desc{"kopiur_snapshot_waiting_for_slot", "1 for each Snapshot parked for a slot of its repository's pool.",
		[]string{"repository_kind", "repository", "namespace", "name"}}
	DeletionsHeld = &Desc{"kopiur_snapshot_deletions_held", "Snapshots whose deletion is held (their data is kept until the hold is resolved), by repository.",
		[]string{"repo_kind", "repo_name"}}
	RepoSize = &Desc{"kopiur_repo_size_bytes", "The sum of the repository's snapshots' source sizes (logical bytes, not what its storage holds), as last observed.",
		[]string{"repository_kind", "namespace", "repository"}}
	RepoSnapshotCount = &Desc{"kopiur_repo_snapshot_count", "Snapshots in the repository, as last observed.",
		[]string{"repository_kind", "namespace", "repository"}}
	RepoStoredBytes = &Desc{"snapflow_repository_stored_bytes", "Bytes the repository's storage holds, counted blob by blob by its last full maintenance run, after what it reclaimed.",
		[]string{"repository_kind", "namespace", "repository"}}
	RepoReclaimable = &Desc{"snapflow_repository_reclaimable_bytes", "At most the bytes later full maintenance runs free: the content no snapshot referenced when the last full run collected garbage.",
		[]string{"repository_kind", "namespace", "repository"}}
	RepoBlobs = &Desc{"snapflow_repository_blobs", "Blobs the repository's storage holds, counted by its last full maintenance run.",
		[]string{"repository_kind", "namespace", "repository"}}
	MaintenanceConfigured = &Desc{"kopiur_repository_maintenance_configured", "1 when a Maintenance maintains the repository, else 0.",
		[]string{"repository_kind", "namespace", "repository"}}
	MaintenanceWanted = &Desc{"snapflow_repository_maintenance_wanted", "1 when the repository should be maintained (not ReadOnly, spec.maintenance.enabled not false), else 0.",
		[]string{"repository_kind", "namespace", "repository"}}
	MaintenanceReclaimed = &Desc{"kopiur_maintenance_last_reclaimed_bytes", "Bytes the Maintenance's last successful full run reclaimed.",
		[]string{"namespace", "name", "repository_kind", "repository"}}
	RestoreDuration = &Desc{"kopiur_restore_duration_seconds", "How long a finished Restore ran.",
		[]string{"namespace", "name"}}
	DeletionWaiting = &Desc{"snapflow_snapshot_deletion_waiting", "1 for each Snapshot being deleted whose kopia data cannot be deleted yet, by why (RepositoryMissing, RepositoryDegraded, RepositoryNotAllowed).",
		[]string{"namespace", "name", "reason"}}
	PolicyInfo = &Desc{"snapflow_policy_info", "1 for each SnapshotPolicy, labelled with whether it is suspended, whether an active schedule fires it and whether a verification tier runs on a schedule, so alerts can skip paused and on-demand policies.",
		[]string{"namespace", "policy", "suspended", "scheduled", "verification"}}
	PolicyCreated = &Desc{"snapflow_policy_created_timestamp_seconds", "When the SnapshotPolicy was created (Unix seconds): a policy that never succeeded is stale from then.",
		[]string{"namespace", "policy"}}
	SnapshotFailureClass = &Desc{"snapflow_snapshot_failed", "1 for each failed Snapshot, by its failure class.",
		[]string{"namespace", "name", "policy", "class"}}

	PolicyVerificationFailed = &Desc{"snapflow_policy_verification_failed", "1 when the policy's last finished verification of this tier and repository failed, 0 when it passed; absent before the first one ends.",
		[]string{"namespace", "policy", "tier", "repository_kind", "repository"}}
	RepositoryBreakerOpen = &Desc{"kopiur_repository_breaker_open", "1 for each repository its health probe found Degraded: runs that need it wait until a probe finds it reachable again.",
		[]string{"repository_kind", "namespace", "repository"}}
	SnapshotGated = &Desc{"kopiur_snapshot_gated", "1 for each Pending Snapshot held at a gate before its mover starts, by gate (WaitingForRepository, RepositorySuspended, RepositoryReclaiming, PrivilegedMoverNotPermitted).",
		[]string{"namespace", "name", "gate"}}
	DeletionsPendingExternal = &Desc{"kopiur_snapshot_deletions_pending_external", "Snapshots deleted from outside snapflow whose kopia snapshot is not deleted yet (what the mass-deletion breaker counts), by repository.",
		[]string{"repo_kind", "repo_name"}}

	PruneBlocked = &Desc{"snapflow_prune_blocked", "1 when the BackupRepo's last whole-scope orphan-prune run of this kind (plan, or prune for dry runs and live prunes) found a state unsafe to prune (blockers, or the deletion guards refused), else 0.",
		[]string{"backuprepo", "kind"}}
	PruneLastRun = &Desc{"snapflow_prune_last_run_timestamp_seconds", "When that run ended (Unix seconds), labelled with its outcome (Planned, Blocked, DryRun, Pruned, Failed).",
		[]string{"backuprepo", "kind", "outcome"}}
	PruneRecordKnown = &Desc{"snapflow_prune_record_known", "1 when the exporter read the prune function's record at this scrape, 0 when it could not (the prune series are then absent).",
		nil}

	CoverageKnown = &Desc{"snapflow_coverage_known", "1 when the exporter judged every PVC's coverage at this scrape, 0 when it could not (its log says why, and snapflow_pvc_protected is absent until it can).",
		nil}
	PVCProtected = &Desc{"snapflow_pvc_protected", "1 for each PVC, labelled with its coverage state as snapflow coverage shows it: Protected, Excluded, Failing, Unscheduled, Suspended or Unprotected.",
		[]string{"namespace", "persistentvolumeclaim", "state"}}
)

// Families lists every family, for registration.
var Families = []*Desc{ResourcePhase, SnapshotLastSuccess, SnapshotConsecutiveFailures, SnapshotSize, SnapshotFiles, SnapshotDuration,
	PolicyLastSuccess, PolicyLastDuration, PolicyLastSize, PolicyLastFiles, PolicyLastBackupSuccess, SnapshotVerified, SnapshotsLive,
	WaitingForSlot, DeletionsHeld, RepoSize, RepoSnapshotCount, RepoStoredBytes, RepoReclaimable, RepoBlobs, MaintenanceConfigured, MaintenanceWanted, MaintenanceReclaimed, RestoreDuration, SnapshotFailureClass, DeletionWaiting, PolicyInfo, PolicyCreated, PolicyVerificationFailed, RepositoryBreakerOpen, SnapshotGated, DeletionsPendingExternal, PruneBlocked, PruneLastRun, PruneRecordKnown, PVCProtected, CoverageKnown}

// Samples derives every series from s.
func Samples(s State) []Sample {
	var out []Sample
	add := func(d *Desc, v float64, labels ...string) {
		out = append(out, Sample{Desc: d, Labels: labels, Value: v})
	}
	ts := func(t *metav1.Time) float64 { return float64(t.Unix()) + float64(t.Nanosecond())/1e9 }

	type policyKey struct{ ns, name string }
	runs := map[policyKey][]snapv1.Snapshot{}
	live := map[string]int{}
	held := map[[2]string]int{}
	external := map[[2]string]int{}
	for _, sn := range s.Snapshots {
		pol := policyOf(sn)
		live[sn.Namespace]++
		if sn.Status.Phase != "" {
			add(ResourcePhase, 1, "Snapshot", sn.Namespace, sn.Name, string(sn.Status.Phase))
		}
		if succeeded(sn) {
			if st := sn.Status.Stats; st != nil {
				if st.SizeBytes != nil {
					add(SnapshotSize, float64(*st.SizeBytes), sn.Namespace, sn.Name, pol)
				}
				add(SnapshotFiles, float64(files(st)), sn.Namespace, sn.Name, pol)
			}
		}
		if d, ok := duration(sn.Status.Timing); ok && finished(sn) {
			add(SnapshotDuration, d, sn.Namespace, sn.Name, pol)
		}
		if sn.Status.Phase == snapv1.SnapshotFailed {
			class := "Unknown"
			if sn.Status.Failure != nil && sn.Status.Failure.Class != "" {
				class = sn.Status.Failure.Class
			}
			add(SnapshotFailureClass, 1, sn.Namespace, sn.Name, pol, class)
		}
		repoKind, repoName := repositoryOf(sn)
		if c := meta.FindStatusCondition(sn.Status.Conditions, wellknown.ConditionRepositorySlotAvailable); c != nil &&
			c.Status == metav1.ConditionFalse && sn.Status.Phase == snapv1.SnapshotPending {
			add(WaitingForSlot, 1, repoKind, repoName, sn.Namespace, sn.Name)
		}
		if c := meta.FindStatusCondition(sn.Status.Conditions, wellknown.ConditionDeletionHeld); c != nil {
			switch {
			case c.Status == metav1.ConditionTrue && repoName != "":
				// Kopiur's labels: same-named repositories of two namespaces add up.
				held[[2]string{repoKind, repoName}]++
			case sn.Status.Phase == snapv1.SnapshotDeleting && sn.DeletionTimestamp != nil && c.Reason != "":
				add(DeletionWaiting, 1, sn.Namespace, sn.Name, c.Reason)
			}
		}
		if g := gate(sn); g != "" {
			add(SnapshotGated, 1, sn.Namespace, sn.Name, g)
		}
		if pendingExternal(sn) && repoName != "" {
			external[[2]string{repoKind, repoName}]++
		}
		if pol != "" && finished(sn) {
			k := policyKey{sn.Namespace, pol}
			runs[k] = append(runs[k], sn)
		}
	}
	for ns, n := range live {
		add(SnapshotsLive, float64(n), ns)
	}
	for k, n := range held {
		add(DeletionsHeld, float64(n), k[0], k[1])
	}
	for k, n := range external {
		add(DeletionsPendingExternal, float64(n), k[0], k[1])
	}
	for k, list := range runs {
		// Newest end first.
		sort.Slice(list, func(i, j int) bool { return ended(list[i]).After(ended(list[j])) })
		fails := 0
		for _, sn := range list {
			if succeeded(sn) {
				break
			}
			fails++
		}
		add(SnapshotConsecutiveFailures, float64(fails), k.ns, k.name)
		last := 0.0
		if succeeded(list[0]) {
			last = 1
		}
		add(PolicyLastBackupSuccess, last, k.ns, k.name)
		for _, sn := range list {
			if !succeeded(sn) {
				continue
			}
			end := ended(sn)
			add(SnapshotLastSuccess, float64(end.Unix())+float64(end.Nanosecond())/1e9, k.ns, k.name)
			if d, ok := duration(sn.Status.Timing); ok {
				add(PolicyLastDuration, d, k.ns, k.name)
			}
			if st := sn.Status.Stats; st != nil {
				if st.SizeBytes != nil {
					add(PolicyLastSize, float64(*st.SizeBytes), k.ns, k.name)
				}
				add(PolicyLastFiles, float64(files(st)), k.ns, k.name)
			}
			break
		}
	}
	schedules := map[string][]snapv1.SnapshotSchedule{}
	for _, sch := range s.Schedules {
		schedules[sch.Namespace] = append(schedules[sch.Namespace], sch)
	}
	for _, p := range s.Policies {
		if t := p.Status.LastSuccessfulSnapshot; t != nil {
			add(PolicyLastSuccess, ts(t), p.Namespace, p.Name)
		}
		if t := p.Status.LastVerified; t != nil {
			add(SnapshotVerified, ts(t), p.Namespace, p.Name)
		}
		// Per tier and repository: the one Verified condition is the last
		// run's, so a daily quick pass would hide a weekly deep failure.
		for _, r := range p.Status.VerificationRuns {
			if r.Phase != "Failed" && r.Phase != "Passed" {
				continue // running: the last finished verdict is unknown here
			}
			v := 0.0
			if r.Phase == "Failed" {
				v = 1
			}
			kind := string(r.Repository.Kind)
			if kind == "" {
				kind = string(snapv1.KindRepository)
			}
			add(PolicyVerificationFailed, v, p.Namespace, p.Name, r.Tier, kind, r.Repository.Name)
		}
		scheduled := scheduledBy(schedules[p.Namespace], &p)
		add(PolicyInfo, 1, p.Namespace, p.Name, strconv.FormatBool(p.Spec.Suspend), strconv.FormatBool(scheduled), strconv.FormatBool(verifies(&p)))
		if !p.CreationTimestamp.IsZero() {
			add(PolicyCreated, ts(&p.CreationTimestamp), p.Namespace, p.Name)
		}
	}

	maintained := map[[3]string]bool{}
	for _, m := range s.Maintenances {
		kind, ns := string(m.Spec.Repository.Kind), m.Namespace
		if kind == "" {
			kind = string(snapv1.KindRepository)
		}
		if kind == string(snapv1.KindClusterRepository) {
			ns = ""
		}
		maintained[[3]string{kind, ns, m.Spec.Repository.Name}] = true
		if b := m.Status.LastReclaimedBytes; b != nil {
			add(MaintenanceReclaimed, float64(*b), m.Namespace, m.Name, kind, m.Spec.Repository.Name)
		}
	}
	repo := func(kind snapv1.RepositoryKind, ns, name string, spec *snapv1.RepositorySpec, st snapv1.RepositoryStatus) {
		if st.Phase != "" {
			add(ResourcePhase, 1, string(kind), ns, name, string(st.Phase))
		}
		if st.Phase == snapv1.RepositoryDegraded {
			add(RepositoryBreakerOpen, 1, string(kind), ns, name)
		}
		if ss := st.StorageStats; ss != nil {
			if ss.TotalSize != nil {
				add(RepoSize, float64(*ss.TotalSize), string(kind), ns, name)
			}
			if ss.SnapshotCount != nil {
				add(RepoSnapshotCount, float64(*ss.SnapshotCount), string(kind), ns, name)
			}
			if ss.StoredBytes != nil {
				add(RepoStoredBytes, float64(*ss.StoredBytes), string(kind), ns, name)
			}
			if ss.BlobCount != nil {
				add(RepoBlobs, float64(*ss.BlobCount), string(kind), ns, name)
			}
			if ss.ReclaimableBytes != nil {
				add(RepoReclaimable, float64(*ss.ReclaimableBytes), string(kind), ns, name)
			}
		}
		v := 0.0
		if maintained[[3]string{string(kind), ns, name}] {
			v = 1
		}
		add(MaintenanceConfigured, v, string(kind), ns, name)
		wanted := 0.0
		if maintenance.Wanted(spec) {
			wanted = 1
		}
		add(MaintenanceWanted, wanted, string(kind), ns, name)
	}
	for _, r := range s.Repositories {
		repo(snapv1.KindRepository, r.Namespace, r.Name, &r.Spec, r.Status)
	}
	for _, r := range s.ClusterRepositories {
		repo(snapv1.KindClusterRepository, "", r.Name, &r.Spec.RepositorySpec, r.Status)
	}
	for _, r := range s.Restores {
		if r.Status.Phase != "" {
			add(ResourcePhase, 1, "Restore", r.Namespace, r.Name, string(r.Status.Phase))
		}
		if d, ok := duration(r.Status.Timing); ok && (r.Status.Phase == snapv1.RestoreCompleted || r.Status.Phase == snapv1.RestoreFailed) {
			add(RestoreDuration, d, r.Namespace, r.Name)
		}
	}
	for _, v := range s.Coverage {
		add(PVCProtected, 1, v.Namespace, v.PVC, string(v.State))
	}
	if s.CoverageKnown != nil {
		add(CoverageKnown, *s.CoverageKnown)
	}
	for _, k := range s.Prunes.Keys() {
		r := s.Prunes[k]
		blocked := 0.0
		if r.Outcome == ledger.Blocked {
			blocked = 1
		}
		add(PruneBlocked, blocked, r.Repo, r.Kind)
		add(PruneLastRun, float64(r.At.Unix()), r.Repo, r.Kind, string(r.Outcome))
	}
	if s.PruneRecordKnown != nil {
		add(PruneRecordKnown, *s.PruneRecordKnown)
	}
	return out
}

// scheduledBy says whether an unsuspended schedule of p's namespace names
// p. A stalled one counts: its policy is meant to run, and the stale alert
// is what notices that it does not.
func scheduledBy(schedules []snapv1.SnapshotSchedule, p *snapv1.SnapshotPolicy) bool {
	for i := range schedules {
		if schedules[i].Spec.Schedule.Suspend {
			continue
		}
		if _, _, named := coverage.Firing(schedules[i:i+1], p); named {
			return true
		}
	}
	return false
}

// verifies says whether a verification tier of p runs on a schedule (a
// quick tier without one runs only on request).
func verifies(p *snapv1.SnapshotPolicy) bool {
	v := p.Spec.Verification
	if v == nil {
		return false
	}
	return v.Deep != nil || (v.Quick != nil && (v.Quick.Schedule != nil || v.Quick.Cron != ""))
}

// gates are the reasons a Pending run waits before its mover may start.
var gates = map[string]bool{wellknown.ReasonWaitingForRepository: true, wellknown.ReasonRepositorySuspended: true,
	wellknown.ReasonRepositoryReclaiming: true, wellknown.ReasonPrivilegedMoverNotPermitted: true}

// gate is the gate a Pending Snapshot waits at, if any.
func gate(s snapv1.Snapshot) string {
	if s.Status.Phase != snapv1.SnapshotPending || s.DeletionTimestamp != nil {
		return ""
	}
	// hold() puts every gate's reason on Ready; MoverPermitted keeps its
	// False until the mover starts, so it could name a gate passed since.
	if c := meta.FindStatusCondition(s.Status.Conditions, wellknown.ConditionReady); c != nil && c.Status == metav1.ConditionFalse && gates[c.Reason] {
		return c.Reason
	}
	return ""
}

// pendingExternal: deleted from outside snapflow, with a kopia snapshot
// its deletion policy says to delete, not released yet.
func pendingExternal(s snapv1.Snapshot) bool {
	return s.DeletionTimestamp != nil && cleanup.IsExternal(&s) && cleanup.EffectivePolicy(&s) == snapv1.DeletionDelete &&
		s.Status.Snapshot != nil && s.Status.Snapshot.KopiaSnapshotID != "" && slices.Contains(s.Finalizers, wellknown.FinalizerSnapshotCleanup)
}

// succeeded: the run ended well (Unchanged found nothing new to store).
func succeeded(s snapv1.Snapshot) bool {
	return s.Status.Phase == snapv1.SnapshotSucceeded || s.Status.Phase == snapv1.SnapshotUnchanged
}

func finished(s snapv1.Snapshot) bool {
	return succeeded(s) || s.Status.Phase == snapv1.SnapshotFailed
}

// ended is when the run ended: its end time, else its creation.
func ended(s snapv1.Snapshot) time.Time {
	if t := s.Status.Timing; t != nil && t.EndTime != nil {
		return t.EndTime.Time
	}
	return s.CreationTimestamp.Time
}

func duration(t *snapv1.Timing) (float64, bool) {
	switch {
	case t == nil:
		return 0, false
	case t.DurationSeconds != nil:
		return float64(*t.DurationSeconds), true
	case t.StartTime != nil && t.EndTime != nil:
		return t.EndTime.Sub(t.StartTime.Time).Seconds(), true
	}
	return 0, false
}

func files(st *snapv1.SnapshotStats) int64 {
	var n int64
	for _, p := range []*int64{st.FilesNew, st.FilesModified, st.FilesUnchanged} {
		if p != nil {
			n += *p
		}
	}
	return n
}

// policyOf is the name of the Snapshot's policy ("" for one without).
func policyOf(s snapv1.Snapshot) string {
	if s.Spec.PolicyRef == nil {
		return ""
	}
	return s.Spec.PolicyRef.Name
}

// repositoryOf is the repository the Snapshot writes to, as resolved.
func repositoryOf(s snapv1.Snapshot) (kind, name string) {
	if r := s.Status.Resolved; r != nil && r.Repository != nil {
		kind = string(r.Repository.Kind)
		if kind == "" {
			kind = string(snapv1.KindRepository)
		}
		return kind, r.Repository.Name
	}
	return "", ""
}
