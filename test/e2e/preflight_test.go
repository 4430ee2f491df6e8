package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
)

// spec.preflight holds a run, Pending and saying which check holds it,
// until every check passes; past the timeout the run fails without ever
// creating its mover Job.
func TestPreflightHoldsARunUntilItsChecksPass(t *testing.T) {
	const ns = "preflight"
	backupNamespace(t, ns, 2, "")
	gated := func(name, timeout, check string) []byte {
		return policy(ns, name, fmt.Sprintf(`  copyMethod: Direct
  preflight:
    timeout: %s
    checks:
    - {name: ready, expr: repository.ready}
    - {name: maintained, expr: %q, message: no maintenance has run on this repository yet}
`, timeout, check))
	}
	kubectl(t, gated("app", "1h", "maintenance.hasRun"), 0, "apply", "-f", "-")
	kubectl(t, snapshotOf(ns, "held", "app"), 0, "create", "-f", "-")
	s := waitHeld(t, ns, "held")
	if s.Status.PreflightSince == nil || s.Status.Job != nil {
		t.Fatalf("a held run: preflightSince %v, job %+v; want a stamp and no job", s.Status.PreflightSince, s.Status.Job)
	}

	// Loosening the check lets the waiting run go on at the next resync.
	kubectl(t, gated("app", "1h", "!maintenance.hasRun || maintenance.lastSuccessAgeSeconds < 86400"), 0, "apply", "-f", "-")
	resync(t, "snapshot")
	s = waitSnapshot(t, ns, "held", snapv1.SnapshotSucceeded)
	if s.Status.PreflightSince != nil {
		t.Fatalf("preflightSince %v after the checks passed, want it cleared", s.Status.PreflightSince)
	}

	// A check that never passes fails the run once the timeout is over
	// (the snapshot function runs on the wall clock here, so the timeout
	// is short).
	kubectl(t, gated("strict", "15s", "maintenance.hasRun"), 0, "apply", "-f", "-")
	kubectl(t, snapshotOf(ns, "timed-out", "strict"), 0, "create", "-f", "-")
	s = waitHeld(t, ns, "timed-out")
	held := s.Status.PreflightSince.Time
	s = waitSnapshot(t, ns, "timed-out", snapv1.SnapshotFailed)
	if ended := s.Status.Timing.EndTime.Time; ended.Sub(held) < 15*time.Second {
		t.Fatalf("held at %s, failed at %s: before the 15s timeout", held, ended)
	}
	if f := s.Status.Failure; f == nil || f.Class != "PreflightTimeout" || !strings.Contains(f.Message, `"maintained"`) || !strings.Contains(f.Message, "spec.preflight.timeout") {
		t.Fatalf("failure %+v, want PreflightTimeout naming the check and spec.preflight.timeout", s.Status.Failure)
	}
	if s.Status.Job != nil {
		t.Fatalf("a run that never passed its preflight created job %s", s.Status.Job.Name)
	}
	jobs := kubectl(t, nil, 0, "-n", ns, "get", "jobs", "-l", wellknown.LabelSnapshot+"=timed-out", "-o", "name").Stdout
	if strings.TrimSpace(jobs) != "" {
		t.Fatalf("mover jobs of a run refused by preflight: %s", jobs)
	}
}

// waitHeld waits until a Snapshot is Pending, held by its preflight checks
// with the failing check's name and message on its Ready condition.
func waitHeld(t *testing.T, ns, name string) *snapv1.Snapshot {
	t.Helper()
	var s snapv1.Snapshot
	eventually(t, func() error {
		if err := env.Client.Get(testContext(t), clientKey(ns, name), &s); err != nil {
			return err
		}
		c := meta.FindStatusCondition(s.Status.Conditions, wellknown.ConditionReady)
		if s.Status.Phase != snapv1.SnapshotPending || c == nil || c.Reason != "PreflightHeld" ||
			!strings.Contains(c.Message, `"maintained" does not pass: no maintenance has run`) {
			return fmt.Errorf("snapshot %s/%s is %q with %+v, want Pending held by the preflight check \"maintained\"", ns, name, s.Status.Phase, c)
		}
		return nil
	})
	return &s
}
