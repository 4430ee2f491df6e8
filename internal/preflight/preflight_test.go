package preflight

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/mover"
)

var now = time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)

func at(ago time.Duration) *metav1.Time { t := metav1.NewTime(now.Add(-ago)); return &t }
func i64(v int64) *int64                { return &v }

func readyRepo() *snapv1.RepositoryStatus {
	return &snapv1.RepositoryStatus{
		Phase:          snapv1.RepositoryReady,
		StorageStats:   &snapv1.StorageStats{SnapshotCount: i64(7), TotalSize: i64(4096), LastObservedAt: at(2 * time.Hour)},
		Probe:          &snapv1.ProbeStatus{LastProbeAt: at(10 * time.Minute)},
		LastReverifyAt: at(10 * time.Minute),
		Conditions:     []metav1.Condition{{Type: wellknown.ConditionBackendReachable, Status: metav1.ConditionTrue}},
	}
}

func TestVars(t *testing.T) {
	degraded := readyRepo()
	degraded.Phase = snapv1.RepositoryDegraded
	degraded.Probe.ConsecutiveFailures = 2
	degraded.Conditions[0].Status = metav1.ConditionFalse
	maint := []snapv1.Maintenance{
		{Status: snapv1.MaintenanceStatus{LastFullSucceeded: at(30 * time.Hour), Runs: []snapv1.MaintenanceRun{
			{Mode: "quick", Phase: mover.MaintenanceSucceeded, CompletedAt: at(45 * time.Minute)},
			{Mode: "full", Phase: mover.MaintenanceFailed, CompletedAt: at(time.Minute)},
		}}},
	}
	for _, tc := range []struct {
		name  string
		repo  *snapv1.RepositoryStatus
		maint []snapv1.Maintenance
		want  map[string]any // "repository.x" or "maintenance.x"
	}{
		{"ready and probed", readyRepo(), nil, map[string]any{
			"repository.phase": "Ready", "repository.ready": true, "repository.backendReachable": true,
			"repository.snapshotCountKnown": true, "repository.snapshotCount": int64(7),
			"repository.sizeBytes": int64(4096), "repository.indexBlobCountKnown": false,
			"repository.lastHealthyKnown": true, "repository.lastHealthyAgeSeconds": int64(600),
			"repository.lastReverifyAgeSeconds": int64(600),
			"maintenance.hasRun":                false, "maintenance.lastSuccessAgeSeconds": nil, "repository.indexBlobCount": nil,
		}},
		{"degraded is not healthy", degraded, nil, map[string]any{
			"repository.ready": false, "repository.backendReachable": false, "repository.lastHealthyKnown": false,
		}},
		{"unknown repository", nil, nil, map[string]any{
			"repository.phase": "", "repository.snapshotCountKnown": false, "repository.lastReverifyKnown": false,
		}},
		{"the latest successful run counts, not a later failure", readyRepo(), maint, map[string]any{
			"maintenance.hasRun": true, "maintenance.lastSuccessAgeSeconds": int64(45 * 60),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := Vars(tc.repo, tc.maint, now)
			for k, want := range tc.want {
				obj, key, _ := strings.Cut(k, ".")
				if got := v[obj].(map[string]any)[key]; got != want {
					t.Errorf("%s = %v (%T), want %v", k, got, got, want)
				}
			}
		})
	}
}

func TestDecide(t *testing.T) {
	checks := func(timeout string, c ...snapv1.PreflightCheck) *snapv1.Preflight {
		return &snapv1.Preflight{Timeout: timeout, Checks: c}
	}
	ready := snapv1.PreflightCheck{Name: "ready", Expr: "repository.ready"}
	many := snapv1.PreflightCheck{Name: "enough", Expr: "repository.snapshotCount >= 100", Message: "the repository must hold 100 snapshots"}
	maintained := snapv1.PreflightCheck{Name: "maintained", Expr: "maintenance.hasRun && maintenance.lastSuccessAgeSeconds < 3600"}
	vars := Vars(readyRepo(), nil, now)
	for _, tc := range []struct {
		name      string
		p         *snapv1.Preflight
		since     time.Time
		pass, out bool
		msg       string
	}{
		{"no preflight", nil, time.Time{}, true, false, ""},
		{"all pass", checks("", ready), time.Time{}, true, false, "all 1 preflight check(s) passed"},
		{"an unobserved value holds, saying how to guard it", checks("", snapv1.PreflightCheck{Name: "small", Expr: "repository.indexBlobCount < 500"}), time.Time{}, false, false, "guard it with its ...Known flag"},
		{"a guarded one passes", checks("", snapv1.PreflightCheck{Name: "small", Expr: "!repository.indexBlobCountKnown || repository.indexBlobCount < 500"}), time.Time{}, true, false, ""},
		{"first failing check holds, with its message", checks("", ready, many, maintained), time.Time{}, false, false, `"enough" does not pass: the repository must hold 100 snapshots`},
		{"held within the default timeout", checks("", maintained), now.Add(-9 * time.Minute), false, false, "at most until 2026-12-06T12:01:00Z"},
		{"the default timeout fails the run", checks("", maintained), now.Add(-10 * time.Minute), false, true, "after 10m0s, the spec.preflight.timeout"},
		{"a set timeout", checks("30s", maintained), now.Add(-31 * time.Second), false, true, `"maintained" does not pass`},
		{"zero holds for ever", checks("0", maintained), now.Add(-1000 * time.Hour), false, false, "timeout is 0"},
		{"an expression that cannot run holds", checks("", snapv1.PreflightCheck{Name: "bad", Expr: "repository.nope > 1"}), time.Time{}, false, false, `"bad" cannot run`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := Decide(tc.p, vars, tc.since, now)
			if v.Pass != tc.pass || v.TimedOut != tc.out || !strings.Contains(v.Message, tc.msg) {
				t.Fatalf("got %+v, want pass=%v timedOut=%v message containing %q", v, tc.pass, tc.out, tc.msg)
			}
		})
	}
}
