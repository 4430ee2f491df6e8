package e2e

import (
	"crypto/rand"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/events"
)

// scrape reads the exporter's /metrics into series keyed
// name{label="value",...} (labels sorted).
func scrape() (map[string]float64, error) {
	resp, err := http.Get(env.Functions.MetricsURL)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			sort.Strings(ls)
			out[name+"{"+strings.Join(ls, ",")+"}"] = value(m)
		}
	}
	return out, nil
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Counter != nil:
		return m.Counter.GetValue()
	}
	return 0
}

// series is the key scrape uses for name and label pairs.
func series(name string, labels ...string) string {
	var ls []string
	for i := 0; i+1 < len(labels); i += 2 {
		ls = append(ls, fmt.Sprintf("%s=%q", labels[i], labels[i+1]))
	}
	sort.Strings(ls)
	return name + "{" + strings.Join(ls, ",") + "}"
}

// The exporter's gauges follow the objects through a real backup, a
// failed one and a deletion that cannot proceed: values, not just names,
// and a series goes when its object goes.
func TestExporterMetricsFollowTheObjects(t *testing.T) {
	const ns = "exporter-metrics"
	backupNamespace(t, ns, 3, "")
	kubectl(t, policy(ns, "app", "  copyMethod: Direct\n"), 0, "apply", "-f", "-")
	kubectl(t, snapshotOf(ns, "good", "app"), 0, "create", "-f", "-")
	good := waitSnapshot(t, ns, "good", snapv1.SnapshotSucceeded)

	// A second policy whose upload limit the data outgrows fails.
	failUploadLimit(t, ns, "bad")

	if good.Status.Stats == nil || good.Status.Stats.SizeBytes == nil || good.Status.Timing == nil || good.Status.Timing.EndTime == nil {
		t.Fatalf("the Snapshot has no stats or end time: %+v", good.Status)
	}
	want := map[string]float64{
		series("kopiur_resource_phase", "kind", "Snapshot", "namespace", ns, "name", "good", "phase", "Succeeded"):            1,
		series("kopiur_resource_phase", "kind", "Snapshot", "namespace", ns, "name", "bad", "phase", "Failed"):                1,
		series("kopiur_resource_phase", "kind", "Repository", "namespace", ns, "name", "primary", "phase", "Ready"):           1,
		series("kopiur_snapshot_size_bytes", "namespace", ns, "name", "good", "policy", "app"):                                float64(*good.Status.Stats.SizeBytes),
		series("kopiur_snapshot_last_success_timestamp_seconds", "namespace", ns, "policy", "app"):                            float64(good.Status.Timing.EndTime.Unix()),
		series("kopiur_snapshotpolicy_last_backup_success", "namespace", ns, "policy", "app"):                                 1,
		series("kopiur_snapshotpolicy_last_backup_success", "namespace", ns, "policy", "capped"):                              0,
		series("kopiur_snapshot_consecutive_failures", "namespace", ns, "policy", "app"):                                      0,
		series("kopiur_snapshot_consecutive_failures", "namespace", ns, "policy", "capped"):                                   1,
		series("snapflow_snapshot_failed", "namespace", ns, "name", "bad", "policy", "capped", "class", "UploadLimitReached"): 1,
		series("kopiur_snapshots_live", "namespace", ns):                                                                      2,
		// Counted as the exporter saw each run end.
		series("kopiur_snapshots_completed_total", "result", "Succeeded", "namespace", ns, "policy", "app"): 1,
		series("kopiur_snapshots_completed_total", "result", "Failed", "namespace", ns, "policy", "capped"): 1,
		// The repository's default Maintenance maintains it.
		series("kopiur_repository_maintenance_configured", "repository_kind", "Repository", "namespace", ns, "repository", "primary"): 1,
	}
	check := func(want map[string]float64, gone ...string) {
		t.Helper()
		eventually(t, func() error {
			got, err := scrape()
			if err != nil {
				return err
			}
			var miss []string
			for k, v := range want {
				if g, ok := got[k]; !ok || g != v {
					miss = append(miss, fmt.Sprintf("%s = %v (present %v), want %v", k, g, ok, v))
				}
			}
			for _, k := range gone {
				if _, ok := got[k]; ok {
					miss = append(miss, k+" is still served")
				}
			}
			if len(miss) > 0 {
				sort.Strings(miss)
				return fmt.Errorf("exporter:\n%s", strings.Join(miss, "\n"))
			}
			return nil
		})
	}
	check(want)

	// Deleted with its repository in place, a run's data is deleted; a
	// failed run stored none. Both are counted by outcome.
	before, err := scrape()
	if err != nil {
		t.Fatal(err)
	}
	kubectl(t, snapshotOf(ns, "again", "app"), 0, "create", "-f", "-")
	waitSnapshot(t, ns, "again", snapv1.SnapshotSucceeded)
	kubectl(t, nil, 0, "-n", ns, "delete", "snapshot", "again", "bad", "--timeout=5m")
	counted(t, before, series("kopiur_snapshot_deletions_total", "outcome", "deleted"), series("kopiur_snapshot_deletions_total", "outcome", "none"),
		// "again" went through a deletion batch.
		series("kopiur_snapshot_delete_batch_members_total", "outcome", "deleted"))

	// With its repository gone, a deleted Snapshot's data cannot be
	// deleted: it waits, and says why.
	kubectl(t, nil, 0, "-n", ns, "delete", "repository", "primary", "--wait=false")
	kubectl(t, nil, 0, "-n", ns, "delete", "snapshot", "good", "--wait=false")
	waiting := series("snapflow_snapshot_deletion_waiting", "namespace", ns, "name", "good", "reason", "RepositoryMissing")
	check(map[string]float64{waiting: 1}, series("kopiur_resource_phase", "kind", "Repository", "namespace", ns, "name", "primary", "phase", "Ready"))
	// A new run waits at the repository gate.
	kubectl(t, snapshotOf(ns, "later", "app"), 0, "create", "-f", "-")
	gated := series("kopiur_snapshot_gated", "namespace", ns, "name", "later", "gate", "WaitingForRepository")
	check(map[string]float64{gated: 1})
	if before, err = scrape(); err != nil {
		t.Fatal(err)
	}
	// The hold is announced once as a CloudEvent, for a Trigger to page on.
	// (A redelivery may send it again, always with the same id.)
	ids := map[string]bool{}
	for _, e := range env.Functions.Emitted.Events() {
		if e.Type() == events.DeletionHeld && e.Subject() == ns+"/good" {
			ids[e.ID()] = true
		}
	}
	if e, ok := env.Functions.Emitted.Find(events.DeletionHeld, ns+"/good"); !ok || len(ids) != 1 {
		t.Fatalf("%d distinct %s events for %s/good (want one): %v", len(ids), events.DeletionHeld, ns, env.Functions.Emitted.Types())
	} else if !strings.Contains(string(e.Data()), `"reason":"RepositoryMissing"`) {
		t.Fatalf("%s data %s: want reason RepositoryMissing", events.DeletionHeld, e.Data())
	}
	// Released by the user, the Snapshot goes, and its series with it.
	kubectl(t, nil, 0, "-n", ns, "annotate", "snapshot", "good", wellknown.AnnotationSkipSnapshotCleanup+"=true")
	check(nil, waiting, series("kopiur_snapshot_size_bytes", "namespace", ns, "name", "good", "policy", "app"))
	// Its data was kept, and counted so.
	counted(t, before, series("kopiur_snapshot_deletions_total", "outcome", "kept"), series("kopiur_orphaned_snapshots_total"))
}

// failUploadLimit adds a 3 MiB file to ns's app-data and fails the
// Snapshot name of a policy "capped" whose upload limit is 1 MB.
func failUploadLimit(t *testing.T, ns, name string) {
	t.Helper()
	buf := make([]byte, 3<<20)
	if _, err := rand.Read(buf); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(env.Functions.Node.PVCDir(ns, "app-data"), "big"), buf, 0o644); err != nil {
		t.Fatal(err)
	}
	kubectl(t, policy(ns, "capped", "  copyMethod: Direct\n  upload: {limitMb: 1}\n"), 0, "apply", "-f", "-")
	kubectl(t, snapshotOf(ns, name, "capped"), 0, "create", "-f", "-")
	waitSnapshot(t, ns, name, snapv1.SnapshotFailed)
}

// counted fails unless each counter grew by at least one since before
// (other tests' leftovers may add to a count meanwhile, never take).
func counted(t *testing.T, before map[string]float64, keys ...string) {
	t.Helper()
	scraped(t, func(got map[string]float64) error {
		for _, k := range keys {
			if got[k] < before[k]+1 {
				return fmt.Errorf("%s went from %v to %v; want at least one more", k, before[k], got[k])
			}
		}
		return nil
	})
}

// exported waits until the exporter serves each of want with its value
// and each of present with any value.
func exported(t *testing.T, want map[string]float64, present ...string) {
	t.Helper()
	scraped(t, func(got map[string]float64) error {
		for k, v := range want {
			if g, ok := got[k]; !ok || g != v {
				return fmt.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
			}
		}
		for _, k := range present {
			if _, ok := got[k]; !ok {
				return fmt.Errorf("%s is not served", k)
			}
		}
		return nil
	})
}

// scraped waits until a scrape of the exporter passes check.
func scraped(t *testing.T, check func(map[string]float64) error) {
	t.Helper()
	eventually(t, func() error {
		got, err := scrape()
		if err != nil {
			return err
		}
		return check(got)
	})
}
