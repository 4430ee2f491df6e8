package statemetrics

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/coverage"
	"github.com/snapflow/snapflow/internal/prune/ledger"
	"github.com/snapflow/snapflow/internal/scheme"
)

var t0 = time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)

func snap(name string, phase snapv1.SnapshotPhase, end time.Duration, mutate ...func(*snapv1.Snapshot)) snapv1.Snapshot {
	s := snapv1.Snapshot{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name, CreationTimestamp: metav1.NewTime(t0.Add(end - time.Minute))},
		Spec: snapv1.SnapshotSpec{PolicyRef: &snapv1.PolicyRef{Name: "app"}}}
	s.Status.Phase = phase
	s.Status.Resolved = &snapv1.SnapshotResolved{Repository: &snapv1.RepositoryRef{Kind: snapv1.KindRepository, Name: "primary"}}
	if phase == snapv1.SnapshotSucceeded || phase == snapv1.SnapshotFailed {
		s.Status.Timing = &snapv1.Timing{StartTime: ptr.To(metav1.NewTime(t0.Add(end - 5*time.Second))), EndTime: ptr.To(metav1.NewTime(t0.Add(end)))}
	}
	for _, m := range mutate {
		m(&s)
	}
	return s
}

func state() State {
	withStats := func(s *snapv1.Snapshot) {
		s.Status.Stats = &snapv1.SnapshotStats{SizeBytes: ptr.To[int64](4096), FilesNew: ptr.To[int64](2), FilesUnchanged: ptr.To[int64](1)}
	}
	failed := func(class string) func(*snapv1.Snapshot) {
		return func(s *snapv1.Snapshot) { s.Status.Failure = &snapv1.Failure{Class: class} }
	}
	cond := func(typ string, st metav1.ConditionStatus) func(*snapv1.Snapshot) {
		return func(s *snapv1.Snapshot) {
			s.Status.Conditions = append(s.Status.Conditions, metav1.Condition{Type: typ, Status: st, Reason: "Test"})
		}
	}
	return State{
		Snapshots: []snapv1.Snapshot{
			snap("old", snapv1.SnapshotSucceeded, 0, withStats),
			snap("newer-fail", snapv1.SnapshotFailed, 2*time.Hour, failed("UploadLimitReached")),
			snap("fail", snapv1.SnapshotFailed, time.Hour, failed("")),
			snap("parked", snapv1.SnapshotPending, 3*time.Hour, cond(wellknown.ConditionRepositorySlotAvailable, metav1.ConditionFalse)),
			snap("held", snapv1.SnapshotDeleting, -time.Hour, cond(wellknown.ConditionDeletionHeld, metav1.ConditionTrue)),
			snap("orphaned", snapv1.SnapshotDeleting, -2*time.Hour, cond(wellknown.ConditionDeletionHeld, metav1.ConditionFalse), func(s *snapv1.Snapshot) {
				s.DeletionTimestamp = ptr.To(metav1.NewTime(t0))
				s.Finalizers = []string{"test"}
			}),
			snap("gated", snapv1.SnapshotPending, 3*time.Hour, func(s *snapv1.Snapshot) {
				s.Status.Conditions = []metav1.Condition{{Type: wellknown.ConditionReady, Status: metav1.ConditionFalse, Reason: wellknown.ReasonRepositoryReclaiming}}
			}),
			// Deleted by a person: the breaker counts it until its data goes.
			snap("gone", snapv1.SnapshotDeleting, -3*time.Hour, func(s *snapv1.Snapshot) {
				s.DeletionTimestamp = ptr.To(metav1.NewTime(t0))
				s.Finalizers = []string{wellknown.FinalizerSnapshotCleanup}
				s.Status.Snapshot = &snapv1.SnapshotRecord{KopiaSnapshotID: "k1"}
			}),
			// Pruned by retention: snapflow's own, not counted.
			snap("pruned", snapv1.SnapshotDeleting, -4*time.Hour, func(s *snapv1.Snapshot) {
				s.DeletionTimestamp = ptr.To(metav1.NewTime(t0))
				s.Annotations = map[string]string{wellknown.AnnotationPrunedBy: wellknown.PrunedByRetention}
				s.Finalizers = []string{wellknown.FinalizerSnapshotCleanup}
				s.Status.Snapshot = &snapv1.SnapshotRecord{KopiaSnapshotID: "k2"}
			}),
		},
		Policies: []snapv1.SnapshotPolicy{{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "app", CreationTimestamp: metav1.NewTime(t0.Add(-48 * time.Hour))},
			Status: snapv1.SnapshotPolicyStatus{LastSuccessfulSnapshot: ptr.To(metav1.NewTime(t0)), LastVerified: ptr.To(metav1.NewTime(t0.Add(30 * time.Minute))),
				// The quick tier passed last; the deep one failed before it.
				Conditions: []metav1.Condition{{Type: wellknown.ConditionVerified, Status: metav1.ConditionTrue, Reason: "VerificationPassed"}},
				VerificationRuns: []snapv1.VerificationRun{{Tier: "deep", Repository: snapv1.RepositoryRef{Name: "primary"}, Phase: "Failed"},
					{Tier: "quick", Repository: snapv1.RepositoryRef{Name: "primary"}, Phase: "Passed"},
					{Tier: "quick", Repository: snapv1.RepositoryRef{Kind: snapv1.KindClusterRepository, Name: "shared"}, Phase: "Running"}}}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "paused"}, Spec: snapv1.SnapshotPolicySpec{Suspend: true,
				Verification: &snapv1.Verification{Deep: &snapv1.DeepVerification{Schedule: snapv1.CronSpec{Cron: "@weekly"}}}}}},
		// A stalled schedule still means the policy is meant to run; a
		// suspended one does not.
		Schedules: []snapv1.SnapshotSchedule{{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "nightly"},
			Spec:   snapv1.SnapshotScheduleSpec{PolicyRef: &snapv1.LocalObjectRef{Name: "app"}, Schedule: snapv1.Schedule{Cron: "@daily"}},
			Status: snapv1.SnapshotScheduleStatus{Conditions: []metav1.Condition{{Type: wellknown.ConditionStalled, Status: metav1.ConditionTrue}}}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "paused"},
				Spec: snapv1.SnapshotScheduleSpec{PolicyRef: &snapv1.LocalObjectRef{Name: "paused"}, Schedule: snapv1.Schedule{Cron: "@daily", Suspend: true}}}},
		Repositories: []snapv1.Repository{{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "primary"},
			Status: snapv1.RepositoryStatus{Phase: snapv1.RepositoryReady, StorageStats: &snapv1.StorageStats{TotalSize: ptr.To[int64](1 << 20), SnapshotCount: ptr.To[int64](7)}}}},
		ClusterRepositories: []snapv1.ClusterRepository{{ObjectMeta: metav1.ObjectMeta{Name: "shared"},
			Spec:   snapv1.ClusterRepositorySpec{RepositorySpec: snapv1.RepositorySpec{Mode: snapv1.ModeReadOnly}},
			Status: snapv1.RepositoryStatus{Phase: snapv1.RepositoryDegraded}}},
		Restores: []snapv1.Restore{{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "back"}, Status: snapv1.RestoreStatus{Phase: snapv1.RestoreCompleted,
			Timing: &snapv1.Timing{DurationSeconds: ptr.To[int64](42)}}}},
		Prunes: ledger.Ledger{"kb-repo/plan": {Repo: "kb-repo", Kind: ledger.KindPlan, At: t0, Outcome: ledger.Blocked, Blockers: 1},
			"other/prune": {Repo: "other", Kind: ledger.KindPrune, At: t0.Add(time.Hour), Outcome: ledger.Pruned}},
		PruneRecordKnown: ptr.To(1.0),
		Maintenances: []snapv1.Maintenance{{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "primary"},
			Spec:   snapv1.MaintenanceSpec{Repository: snapv1.RepositoryRef{Name: "primary"}},
			Status: snapv1.MaintenanceStatus{LastReclaimedBytes: ptr.To[int64](3000)}}},
	}
}

// key renders a sample as name{v1,v2,...}.
func key(s Sample) string { return s.Desc.Name + "{" + strings.Join(s.Labels, ",") + "}" }

func TestSamples(t *testing.T) {
	got := map[string]float64{}
	for _, s := range Samples(state()) {
		if len(s.Labels) != len(s.Desc.Labels) {
			t.Fatalf("%s has %d label values for %v", s.Desc.Name, len(s.Labels), s.Desc.Labels)
		}
		if _, dup := got[key(s)]; dup {
			t.Fatalf("two series %s", key(s))
		}
		got[key(s)] = s.Value
	}
	want := map[string]float64{
		"kopiur_resource_phase{Snapshot,apps,old,Succeeded}":                       1,
		"kopiur_resource_phase{Snapshot,apps,parked,Pending}":                      1,
		"kopiur_resource_phase{Repository,apps,primary,Ready}":                     1,
		"kopiur_resource_phase{ClusterRepository,,shared,Degraded}":                1,
		"kopiur_resource_phase{Restore,apps,back,Completed}":                       1,
		"kopiur_snapshot_last_success_timestamp_seconds{apps,app}":                 float64(t0.Unix()),
		"kopiur_snapshot_consecutive_failures{apps,app}":                           2,
		"kopiur_snapshotpolicy_last_backup_success{apps,app}":                      0,
		"kopiur_snapshot_size_bytes{apps,old,app}":                                 4096,
		"kopiur_snapshot_files{apps,old,app}":                                      3,
		"kopiur_snapshot_duration_seconds{apps,old,app}":                           5,
		"kopiur_snapshot_duration_seconds{apps,fail,app}":                          5,
		"kopiur_snapshot_duration_seconds{apps,newer-fail,app}":                    5,
		"kopiur_policy_last_backup_size_bytes{apps,app}":                           4096,
		"kopiur_policy_last_backup_files{apps,app}":                                3,
		"kopiur_policy_last_backup_duration_seconds{apps,app}":                     5,
		"kopiur_policy_last_backup_success_timestamp_seconds{apps,app}":            float64(t0.Unix()),
		"kopiur_snapshot_verified_timestamp_seconds{apps,app}":                     float64(t0.Add(30 * time.Minute).Unix()),
		"snapflow_snapshot_deletion_waiting{apps,orphaned,Test}":                   1,
		"kopiur_snapshots_live{apps}":                                              9,
		"kopiur_snapshot_gated{apps,gated,RepositoryReclaiming}":                   1,
		"snapflow_policy_verification_failed{apps,app,deep,Repository,primary}":    1,
		"snapflow_policy_verification_failed{apps,app,quick,Repository,primary}":   0,
		"snapflow_prune_blocked{kb-repo,plan}":                                     1,
		"snapflow_prune_blocked{other,prune}":                                      0,
		"snapflow_prune_last_run_timestamp_seconds{kb-repo,plan,Blocked}":          float64(t0.Unix()),
		"snapflow_prune_last_run_timestamp_seconds{other,prune,Pruned}":            float64(t0.Add(time.Hour).Unix()),
		"snapflow_prune_record_known{}":                                            1,
		"kopiur_snapshot_deletions_pending_external{Repository,primary}":           1,
		"kopiur_repository_breaker_open{ClusterRepository,,shared}":                1,
		"kopiur_snapshot_waiting_for_slot{Repository,primary,apps,parked}":         1,
		"kopiur_snapshot_deletions_held{Repository,primary}":                       1,
		"kopiur_repo_size_bytes{Repository,apps,primary}":                          1 << 20,
		"kopiur_repo_snapshot_count{Repository,apps,primary}":                      7,
		"kopiur_repository_maintenance_configured{Repository,apps,primary}":        1,
		"kopiur_repository_maintenance_configured{ClusterRepository,,shared}":      0,
		"snapflow_repository_maintenance_wanted{Repository,apps,primary}":          1,
		"snapflow_repository_maintenance_wanted{ClusterRepository,,shared}":        0,
		"kopiur_maintenance_last_reclaimed_bytes{apps,primary,Repository,primary}": 3000,
		"kopiur_restore_duration_seconds{apps,back}":                               42,
		"snapflow_snapshot_failed{apps,newer-fail,app,UploadLimitReached}":         1,
		"snapflow_snapshot_failed{apps,fail,app,Unknown}":                          1,
		"snapflow_policy_info{apps,app,false,true,false}":                          1,
		"snapflow_policy_info{apps,paused,true,false,true}":                        1,
		"snapflow_policy_created_timestamp_seconds{apps,app}":                      float64(t0.Add(-48 * time.Hour).Unix()),
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok && !strings.HasPrefix(k, "kopiur_resource_phase{") {
			t.Errorf("unexpected series %s = %v", k, got[k])
		}
	}
}

// A policy whose newest run succeeded has no failures counted and reports
// success; one whose only run is still going reports nothing yet.
func TestRecovery(t *testing.T) {
	s := State{Snapshots: []snapv1.Snapshot{
		snap("fail", snapv1.SnapshotFailed, 0),
		snap("ok", snapv1.SnapshotUnchanged, time.Hour), // nothing new to store is a success
	}}
	got := map[string]float64{}
	for _, smp := range Samples(s) {
		got[key(smp)] = smp.Value
	}
	if got["kopiur_snapshot_consecutive_failures{apps,app}"] != 0 || got["kopiur_snapshotpolicy_last_backup_success{apps,app}"] != 1 {
		t.Errorf("after a recovery: %v", got)
	}
	orphan := snap("manual", snapv1.SnapshotSucceeded, 0)
	orphan.Spec.PolicyRef = nil
	s = State{Snapshots: []snapv1.Snapshot{snap("running", snapv1.SnapshotRunning, 0), orphan}}
	for _, smp := range Samples(s) {
		if strings.HasPrefix(smp.Desc.Name, "kopiur_snapshotpolicy_") || smp.Desc.Name == SnapshotConsecutiveFailures.Name {
			t.Errorf("a policy with no finished run reports %s", key(smp))
		}
	}
}

// The collector serves the samples from a reader, passes Prometheus' lint
// (names, help, units), and a series goes when its object goes.
func TestCollector(t *testing.T) {
	st := state()
	var objs []client.Object
	for i := range st.Snapshots {
		objs = append(objs, &st.Snapshots[i])
	}
	objs = append(objs, &st.Policies[0], &st.Repositories[0], &st.ClusterRepositories[0], &st.Restores[0], &st.Maintenances[0])
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).WithStatusSubresource(objs...).Build()
	col := NewCollector(c, logr.Discard())
	problems, err := testutil.CollectAndLint(col)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if p.Metric == RepoSnapshotCount.Name {
			continue // Kopiur's name, kept so its dashboards work
		}
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	before := testutil.CollectAndCount(col, SnapshotSize.Name)
	if before != 1 {
		t.Fatalf("%d size series, want 1", before)
	}
	old := st.Snapshots[0]
	if err := c.Delete(t.Context(), &old); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(col, SnapshotSize.Name); n != 0 {
		t.Errorf("a deleted Snapshot still has %d size series", n)
	}
	if err := testutil.CollectAndCompare(col, strings.NewReader(fmt.Sprintf(`
# HELP %s %s
# TYPE %s gauge
%s{namespace="apps",policy="app"} 0
`, PolicyLastBackupSuccess.Name, PolicyLastBackupSuccess.Help, PolicyLastBackupSuccess.Name, PolicyLastBackupSuccess.Name)), PolicyLastBackupSuccess.Name); err != nil {
		t.Error(err)
	}
}

// docs/metrics.md lists every family the exporter serves.
func TestEveryFamilyIsDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range append(Families, Counters...) {
		if !strings.Contains(string(doc), "`"+d.Name+"`") {
			t.Errorf("docs/metrics.md does not list %s", d.Name)
		}
	}
}

// failingReader cannot list Maintenances.
type failingReader struct{ client.Reader }

func (f failingReader) List(ctx context.Context, l client.ObjectList, opts ...client.ListOption) error {
	if _, ok := l.(*snapv1.MaintenanceList); ok {
		return errors.New("maintenances: forbidden")
	}
	return f.Reader.List(ctx, l, opts...)
}

// A kind that cannot be listed fails the scrape instead of answering with
// a partial, healthy-looking state.
func TestAFailedListFailsTheScrape(t *testing.T) {
	st := state()
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(&st.Repositories[0]).Build()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector(failingReader{c}, logr.Discard()))
	if _, err := reg.Gather(); err == nil || !strings.Contains(err.Error(), "maintenances: forbidden") {
		t.Fatalf("gather: %v, want the list error", err)
	}
	reg = prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector(c, logr.Discard()))
	if _, err := reg.Gather(); err != nil {
		t.Fatalf("gather with every kind listed: %v", err)
	}
}

// Coverage verdicts become one series per PVC; coverage that cannot be
// judged drops them and says so in snapflow_coverage_known, keeping the
// rest of the scrape.
func TestCoverageSeries(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(scheme.New()).Build()
	verdicts := []coverage.Verdict{
		{Namespace: "apps", PVC: "db", State: coverage.Protected},
		{Namespace: "apps", PVC: "forgotten", State: coverage.Unprotected},
	}
	col := NewCollector(c, logr.Discard()).WithCoverage(func(context.Context) ([]coverage.Verdict, error) { return verdicts, nil })
	if err := testutil.CollectAndCompare(col, strings.NewReader(fmt.Sprintf(`
# HELP %[1]s %[2]s
# TYPE %[1]s gauge
%[1]s{namespace="apps",persistentvolumeclaim="db",state="Protected"} 1
%[1]s{namespace="apps",persistentvolumeclaim="forgotten",state="Unprotected"} 1
`, PVCProtected.Name, PVCProtected.Help)), PVCProtected.Name); err != nil {
		t.Error(err)
	}
	// Coverage that cannot be judged drops its own series only, and says so.
	col = NewCollector(c, logr.Discard()).WithCoverage(func(context.Context) ([]coverage.Verdict, error) {
		return nil, errors.New("configmaps: forbidden")
	})
	if n := testutil.CollectAndCount(col, PVCProtected.Name); n != 0 {
		t.Errorf("%d coverage series while coverage is unknown", n)
	}
	if err := testutil.CollectAndCompare(col, strings.NewReader(fmt.Sprintf(`
# HELP %[1]s %[2]s
# TYPE %[1]s gauge
%[1]s 0
`, CoverageKnown.Name, CoverageKnown.Help)), CoverageKnown.Name); err != nil {
		t.Error(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(col)
	if _, err := reg.Gather(); err != nil {
		t.Fatalf("gather while coverage is unknown: %v; the other series must still be served", err)
	}
}
