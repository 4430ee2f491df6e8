package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"k8s.io/apimachinery/pkg/api/meta"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/events"
)

// resyncVerify posts a resync to the verify function, as a PingSource would.
func resyncVerify(t *testing.T) {
	t.Helper()
	resync(t, "verify")
}

// resync posts a resync event to the named function, as a PingSource would.
func resync(t *testing.T, function string) {
	t.Helper()
	e := cloudevents.NewEvent()
	e.SetID(fmt.Sprintf("resync-%d", time.Now().UnixNano()))
	e.SetType(events.Resync)
	e.SetSource("test")
	body, _ := json.Marshal(e)
	if code := postEvent(t, env.Functions.Base+"/"+function, "application/cloudevents+json", body); code/100 != 2 {
		t.Fatalf("resync of %s answered %d", function, code)
	}
}

// waitRuns waits until every tier's run in the policy's status has a
// result for a slot after since, and returns them by tier.
func waitRuns(t *testing.T, ns, name string, since time.Time, tiers ...string) (map[string]snapv1.VerificationRun, *snapv1.SnapshotPolicy) {
	t.Helper()
	var p snapv1.SnapshotPolicy
	out := map[string]snapv1.VerificationRun{}
	eventually(t, func() error {
		if err := env.Client.Get(testContext(t), clientKey(ns, name), &p); err != nil {
			return err
		}
		for _, tier := range tiers {
			var got *snapv1.VerificationRun
			for i := range p.Status.VerificationRuns {
				if r := p.Status.VerificationRuns[i]; r.Tier == tier {
					got = &r
				}
			}
			if got == nil || got.Phase == "Running" || got.Slot.Time.Before(since.Truncate(time.Second)) {
				return fmt.Errorf("%s verification not finished since %s: %+v", tier, since, p.Status.VerificationRuns)
			}
			out[tier] = *got
		}
		return nil
	})
	return out, &p
}

func TestVerificationTiers(t *testing.T) {
	const ns = "verify-tiers"
	backupNamespace(t, ns, 5, "")
	kubectl(t, policy(ns, "app", `  verification:
    verifyFilesPercent: 100
    quick: {schedule: {cron: "0 3 * * *", timezone: UTC}}
    deep: {schedule: {cron: "0 4 * * 0"}}
`), 0, "apply", "-f", "-")

	// Gated: without a backup there is nothing to verify.
	resyncVerify(t)
	var p snapv1.SnapshotPolicy
	if err := env.Client.Get(testContext(t), clientKey(ns, "app"), &p); err != nil {
		t.Fatal(err)
	}
	if len(p.Status.VerificationRuns) != 0 {
		t.Fatalf("verification ran before any backup: %+v", p.Status.VerificationRuns)
	}

	// The first backup opens the gate and both tiers catch up at once.
	start := time.Now()
	kubectl(t, snapshotOf(ns, "s1", "app"), 0, "apply", "-f", "-")
	snap := waitSnapshot(t, ns, "s1", snapv1.SnapshotSucceeded)
	runs, pol := waitRuns(t, ns, "app", start, "quick", "deep")
	for tier, r := range runs {
		if r.Phase != "Passed" || r.KopiaSnapshotID != snap.Status.Snapshot.KopiaSnapshotID || r.Files == nil || *r.Files != 5 || *r.Errors != 0 {
			t.Errorf("%s run %+v", tier, r)
		}
	}
	if pol.Status.LastVerified == nil || len(pol.Status.Verification) != 1 || pol.Status.Verification[0].LastVerified == nil {
		t.Errorf("lastVerified %v, per repository %+v", pol.Status.LastVerified, pol.Status.Verification)
	}
	if c := meta.FindStatusCondition(pol.Status.Conditions, wellknown.ConditionVerified); c == nil || c.Status != "True" {
		t.Errorf("Verified condition %+v", c)
	}
	// The exporter serves both tiers' verdicts and the last verification.
	want := map[string]float64{series("snapflow_policy_verification_failed", "namespace", ns, "policy", "app", "tier", "deep", "repository_kind", "Repository", "repository", "primary"): 0,
		series("snapflow_policy_verification_failed", "namespace", ns, "policy", "app", "tier", "quick", "repository_kind", "Repository", "repository", "primary"): 0}
	if pol.Status.LastVerified != nil {
		want[series("kopiur_snapshot_verified_timestamp_seconds", "namespace", ns, "policy", "app")] = float64(pol.Status.LastVerified.Unix())
	}
	exported(t, want)

	// Damage the repository's data blobs on disk; a fresh verification
	// (requested now, outside the schedule) must notice in both tiers.
	repoDir := filepath.Join(env.Functions.Node.PVCDir(ns, "kopia-repo"), "repository")
	damaged := 0
	_ = filepath.Walk(repoDir, func(path string, info os.FileInfo, err error) error {
		rel, _ := filepath.Rel(repoDir, path)
		if err != nil || info.IsDir() || !strings.HasPrefix(rel, "p") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i := len(b) / 4; i < len(b)/2; i++ {
			b[i] ^= 0xff
		}
		damaged++
		return os.WriteFile(path, b, 0o600)
	})
	if damaged == 0 {
		t.Fatal("found no pack blobs to damage")
	}
	time.Sleep(1100 * time.Millisecond) // slots have whole seconds
	asked := time.Now().UTC().Truncate(time.Second)
	kubectl(t, nil, 0, "annotate", "snapshotpolicy", "app", "-n", ns, "--overwrite", wellknown.AnnotationVerifyRequested+"="+asked.Format(time.RFC3339))
	bad, pol := waitRuns(t, ns, "app", asked, "quick", "deep")
	for tier, r := range bad {
		if r.Phase != "Failed" || !strings.Contains(r.Message, "error") {
			t.Errorf("%s verification of a damaged repository: %+v", tier, r)
		}
	}
	if c := meta.FindStatusCondition(pol.Status.Conditions, wellknown.ConditionVerified); c == nil || c.Status != "False" {
		t.Errorf("Verified condition after damage %+v", c)
	}

	// The quick tier also fires on its own schedule (and still sees the damage).
	t.Cleanup(func() { clock.Set(time.Time{}) })
	next := time.Date(start.Year(), start.Month(), start.Day(), 3, 0, 0, 0, time.UTC)
	if !next.After(runs["quick"].Slot.Time) {
		next = next.AddDate(0, 0, 1)
	}
	clock.Set(next.Add(5 * time.Second))
	resyncVerify(t) // starts the run synchronously
	// Back to real time, or the new Job would look a day old and wedged.
	clock.Set(time.Time{})
	again, _ := waitRuns(t, ns, "app", next, "quick")
	if r := again["quick"]; !r.Slot.Time.Equal(next) || r.Phase != "Failed" {
		t.Errorf("scheduled quick run %+v, want slot %s and the damage found again", r, next)
	}

}

func TestVerificationSuccessExprFailsTheRun(t *testing.T) {
	const ns = "verify-expr"
	backupNamespace(t, ns, 3, "")
	kubectl(t, policy(ns, "app", `  verification:
    successExpr: "stats.files > 1000"
    quick: {schedule: {cron: "0 3 * * *"}}
`), 0, "apply", "-f", "-")
	start := time.Now()
	kubectl(t, snapshotOf(ns, "s1", "app"), 0, "apply", "-f", "-")
	waitSnapshot(t, ns, "s1", snapv1.SnapshotSucceeded)
	runs, pol := waitRuns(t, ns, "app", start, "quick")
	r := runs["quick"]
	if r.Phase != "Failed" || !strings.Contains(r.Message, "returned false") || r.Files == nil || *r.Files != 3 {
		t.Errorf("run %+v, want a failure naming successExpr", r)
	}
	if pol.Status.LastVerified != nil {
		t.Errorf("a failed verification set lastVerified %v", pol.Status.LastVerified)
	}
	// The failure is announced once, for a pager or a ticket without Prometheus.
	eventually(t, func() error {
		ids := map[string]bool{} // a redelivery carries the same id
		for _, e := range env.Functions.Emitted.Events() {
			if e.Type() == events.VerificationFailed && e.Subject() == ns+"/app" {
				ids[e.ID()] = true
			}
		}
		if len(ids) != 1 {
			return fmt.Errorf("%d %s events for %s/app, want one: %v", len(ids), events.VerificationFailed, ns, ids)
		}
		e, _ := env.Functions.Emitted.Find(events.VerificationFailed, ns+"/app")
		var d events.VerificationFailedData
		if err := e.DataAs(&d); err != nil || d.Tier != "quick" || d.Policy != "app" || !strings.Contains(d.Message, "returned false") || d.Slot == "" {
			return fmt.Errorf("data %+v (%v)", d, err)
		}
		return nil
	})
	// And served for SnapflowVerificationFailed, per tier and repository.
	exported(t, map[string]float64{series("snapflow_policy_verification_failed", "namespace", ns, "policy", "app", "tier", "quick",
		"repository_kind", "Repository", "repository", "primary"): 1})
}
