package e2e

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/events"
	"github.com/snapflow/snapflow/internal/coverage"
)

// snapflow coverage answers, for every PVC, whether it is backed up: a
// protected, an excluded (by a volume-policy rule, by a PVC annotation and
// by a namespace annotation), an unscheduled, a suspended and an
// unprotected volume, each with its reason, as table, JSON and exit code.
func TestCoverageShowsEveryPVC(t *testing.T) {
	const ns, lab = "coverage", "coverage-lab"
	kubectl(t, []byte(fmt.Sprintf(`
apiVersion: v1
kind: Namespace
metadata: {name: %[1]s}
---
apiVersion: v1
kind: Namespace
metadata: {name: %[2]s, annotations: {snapflow.dev/backup-not-required: "notebooks are rebuilt from git"}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: notebook, namespace: %[2]s}
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
---
apiVersion: v1
kind: Secret
metadata: {name: kopia-password, namespace: %[1]s}
stringData: {KOPIA_PASSWORD: correct-horse}
---
apiVersion: kopiur.home-operations.com/v1alpha1
kind: Repository
metadata: {name: primary, namespace: %[1]s}
spec:
  backend: {filesystem: {path: /repository, volume: {pvc: {name: kopia-repo}}}}
  encryption: {passwordSecretRef: {name: kopia-password, key: KOPIA_PASSWORD}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: web-rules, namespace: %[1]s}
data:
  policies.yaml: |
    version: v1
    volumePolicies:
      - conditions: {pvcLabels: {cache: "true"}}
        action: {type: skip}
`, ns, lab)), 0, "apply", "-f", "-")
	for _, c := range []struct{ name, meta string }{
		{"db", ""},
		{"web-data", "labels: {app: web}"},
		{"web-cache", "labels: {app: web, cache: \"true\"}"},
		{"reports", ""},
		{"paused", ""},
		{"scratch", "annotations: {snapflow.dev/backup-not-required: \"true\"}"},
		{"forgotten", ""},
	} {
		meta := fmt.Sprintf("name: %s, namespace: %s", c.name, ns)
		if c.meta != "" {
			meta += ", " + c.meta
		}
		kubectl(t, []byte(fmt.Sprintf("apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {%s}\nspec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}\n", meta)), 0, "apply", "-f", "-")
	}
	kubectl(t, []byte(fmt.Sprintf(`
apiVersion: kopiur.home-operations.com/v1alpha1
kind: SnapshotPolicy
metadata: {name: web, namespace: %[1]s, labels: {tier: gold}}
spec:
  repository: {name: primary}
  sources: [{pvcSelector: {labelSelector: {matchLabels: {app: web}}}}]
  resourcePolicy: {kind: configmap, name: web-rules}
---
apiVersion: kopiur.home-operations.com/v1alpha1
kind: SnapshotPolicy
metadata: {name: db, namespace: %[1]s, labels: {tier: gold}}
spec:
  repository: {name: primary}
  sources: [{pvc: {name: db}}]
---
apiVersion: kopiur.home-operations.com/v1alpha1
kind: SnapshotPolicy
metadata: {name: adhoc, namespace: %[1]s}
spec:
  repository: {name: primary}
  sources: [{pvc: {name: reports}}]
---
apiVersion: kopiur.home-operations.com/v1alpha1
kind: SnapshotPolicy
metadata: {name: held, namespace: %[1]s, labels: {tier: gold}}
spec:
  repository: {name: primary}
  suspend: true
  sources: [{pvc: {name: paused}}]
---
apiVersion: kopiur.home-operations.com/v1alpha1
kind: SnapshotSchedule
metadata: {name: nightly, namespace: %[1]s}
spec:
  policySelector: {matchLabels: {tier: gold}}
  schedule: {cron: "0 3 1 1 *", timezone: UTC}
`, ns)), 0, "apply", "-f", "-")
	// The schedule function writes when it fires next.
	eventually(t, func() error {
		var s snapv1.SnapshotSchedule
		if err := env.Client.Get(testContext(t), clientKey(ns, "nightly"), &s); err != nil {
			return err
		}
		if s.Status.NextSchedule == nil || s.Status.NextSchedule.At == nil {
			return fmt.Errorf("no next firing yet: %+v", s.Status)
		}
		return nil
	})

	out, errOut, code := runSnapflow(t, "coverage", "-n", ns, "-o", "json")
	if code != 0 {
		t.Fatalf("coverage -o json: exit %d\n%s%s", code, out, errOut)
	}
	var rep struct {
		Counts map[string]int     `json:"counts"`
		Items  []coverage.Verdict `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	want := map[string]struct {
		state  coverage.State
		reason string
	}{
		"web-data":  {coverage.Protected, "backed up by web"},
		"db":        {coverage.Protected, "backed up by db"},
		"web-cache": {coverage.Excluded, "policy web skips it: skipped by rule 0 of ConfigMap coverage/web-rules"},
		"scratch":   {coverage.Excluded, "the PVC is annotated snapflow.dev/backup-not-required"},
		"reports":   {coverage.Unscheduled, "policy adhoc covers it but no SnapshotSchedule fires it"},
		"paused":    {coverage.Suspended, "policy held covers it but is suspended"},
		"forgotten": {coverage.Unprotected, "no SnapshotPolicy covers it"},
	}
	if len(rep.Items) != len(want) {
		t.Fatalf("%d verdicts, want %d:\n%s", len(rep.Items), len(want), out)
	}
	for _, v := range rep.Items {
		w := want[v.PVC]
		if v.State != w.state || !strings.HasPrefix(v.Reason, w.reason) {
			t.Errorf("%s: %s %q, want %s %q", v.PVC, v.State, v.Reason, w.state, w.reason)
		}
		if v.PVC == "web-data" && v.NextFiring == nil {
			t.Errorf("web-data has no next firing: %+v", v)
		}
	}

	// The table, across namespaces: the lab namespace's annotation excludes
	// its volume, and the unprotected one stands out.
	out, _, code = runSnapflow(t, "coverage", "-A")
	if code != 0 {
		t.Fatalf("coverage -A: exit %d\n%s", code, out)
	}
	// Column widths follow every namespace of the shared cluster.
	if !regexp.MustCompile(`(?m)^coverage-lab +notebook +Excluded .*namespace coverage-lab is annotated snapflow.dev/backup-not-required: notebooks are rebuilt from git$`).MatchString(out) {
		t.Errorf("coverage -A lacks the lab namespace's excluded notebook:\n%s", out)
	}
	if !strings.Contains(out, "forgotten") || !strings.Contains(out, "UNPROTECTED") {
		t.Errorf("coverage -A does not show the unprotected volume:\n%s", out)
	}
	// A check for CI: exit 3 while any volume is unprotected.
	if _, errOut, code := runSnapflow(t, "coverage", "-n", ns, "--fail-unprotected"); code != 3 || !strings.Contains(errOut, "1 PVC(s) unprotected, 0 failing") {
		t.Errorf("--fail-unprotected: exit %d, %q", code, errOut)
	}
	if _, _, code := runSnapflow(t, "coverage", "-n", lab, "--fail-unprotected"); code != 0 {
		t.Errorf("--fail-unprotected on a namespace with nothing unprotected: exit %d", code)
	}

	// The exporter serves the same verdicts as snapflow_pvc_protected,
	// reading the policy's resourcePolicy ConfigMap with its own rights,
	// and follows the objects: annotating the forgotten volume excludes it.
	series := func(pvcNS, pvc string, state coverage.State) string {
		return fmt.Sprintf(`snapflow_pvc_protected{namespace=%q,persistentvolumeclaim=%q,state=%q}`, pvcNS, pvc, state)
	}
	wantSeries := map[string]bool{series(lab, "notebook", coverage.Excluded): true}
	for pvc, w := range want {
		wantSeries[series(ns, pvc, w.state)] = true
	}
	eventually(t, func() error {
		m, err := scrape()
		if err != nil {
			return err
		}
		return seriesOf(m, ns, lab, wantSeries)
	})
	// The schedule function tells the unprotected volume once it has been
	// so for the grace (1h), once: a pass opens the spell, one after the
	// grace tells it, later passes do not. The clock moves past the pass
	// interval each time, so each resync runs a pass.
	t.Cleanup(func() { clock.Set(time.Time{}) })
	start := time.Now()
	told := func() []string {
		var ids []string
		for _, e := range env.Functions.Emitted.Events() {
			if e.Type() == events.CoverageUnprotected && e.Subject() == ns+"/forgotten" {
				ids = append(ids, e.ID())
			}
		}
		return ids
	}
	pass := func(at time.Time) {
		t.Helper()
		clock.Set(at)
		resync(t, "schedule")
	}
	pass(start.Add(10 * time.Minute))
	if ids := told(); len(ids) != 0 {
		t.Fatalf("told before the grace: %v", ids)
	}
	pass(start.Add(90 * time.Minute))
	eventually(t, func() error {
		if ids := told(); len(ids) != 1 {
			return fmt.Errorf("%d coverage.unprotected events for %s/forgotten, want 1: %v", len(ids), ns, ids)
		}
		return nil
	})
	e, _ := env.Functions.Emitted.Find(events.CoverageUnprotected, ns+"/forgotten")
	var data events.CoverageUnprotectedData
	if err := json.Unmarshal(e.Data(), &data); err != nil || data.Reason != "no SnapshotPolicy covers it" || !strings.Contains(data.Message, "snapflow coverage -n "+ns) {
		t.Errorf("event data %+v (%v)", data, err)
	}
	for _, other := range []string{lab + "/notebook", ns + "/scratch", ns + "/db", ns + "/paused"} {
		if _, ok := env.Functions.Emitted.Find(events.CoverageUnprotected, other); ok {
			t.Errorf("%s is not unprotected, yet it was told", other)
		}
	}
	pass(start.Add(100 * time.Minute))
	pass(start.Add(110 * time.Minute))
	if ids := told(); len(ids) != 1 {
		t.Errorf("later passes told the same spell again: %v", ids)
	}
	if out := kubectl(t, nil, 0, "-n", ns, "get", "events", "--field-selector", "involvedObject.name=forgotten,reason=Unprotected", "-o", "name"); len(strings.Fields(out.Stdout)) == 0 {
		t.Errorf("no Unprotected Event on the PVC")
	}
	clock.Set(time.Time{})

	kubectl(t, nil, 0, "-n", ns, "annotate", "pvc", "forgotten", "snapflow.dev/backup-not-required=scratch data")
	delete(wantSeries, series(ns, "forgotten", coverage.Unprotected))
	wantSeries[series(ns, "forgotten", coverage.Excluded)] = true
	eventually(t, func() error {
		m, err := scrape()
		if err != nil {
			return err
		}
		return seriesOf(m, ns, lab, wantSeries)
	})
}

// seriesOf checks that the snapflow_pvc_protected series of namespaces a
// and b are exactly want, each with the value 1.
func seriesOf(m map[string]float64, a, b string, want map[string]bool) error {
	got := map[string]bool{}
	for k, v := range m {
		if !strings.HasPrefix(k, "snapflow_pvc_protected{") || (!strings.Contains(k, fmt.Sprintf("namespace=%q", a)) && !strings.Contains(k, fmt.Sprintf("namespace=%q", b))) {
			continue
		}
		if v != 1 {
			return fmt.Errorf("%s = %v, want 1", k, v)
		}
		got[k] = true
	}
	for k := range want {
		if !got[k] {
			return fmt.Errorf("missing %s; have %v", k, got)
		}
	}
	for k := range got {
		if !want[k] {
			return fmt.Errorf("unexpected %s", k)
		}
	}
	return nil
}
