package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/internal/certs"
	"github.com/snapflow/snapflow/internal/doctor"
)

// The doctor passes a working namespace: the CRDs, the webhook's CA and a
// live dry-run the webhook must refuse, the repository; then names a
// repository that cannot connect, with the fix, and exits 3.
func TestDoctor(t *testing.T) {
	const ns = "doctor"
	backupNamespace(t, ns, 1, "")
	kubectl(t, policy(ns, "app", "  copyMethod: Direct\n"), 0, "apply", "-f", "-")

	run := func(want int) map[string]doctor.Check {
		t.Helper()
		var rep doctor.Report
		out := snapflowCLI(t, want, "doctor", "-n", ns, "--grace", "1s", "-o", "json")
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("doctor -o json: %v\n%s", err, out)
		}
		checks := map[string]doctor.Check{}
		for _, c := range rep.Checks {
			checks[c.Name] = c
		}
		return checks
	}
	checks := run(0)
	for _, name := range []string{"crds", "webhook-ca", "webhook", "events", "schedules", "repositories", "clock"} {
		if c := checks[name]; c.Status != doctor.OK {
			t.Errorf("%s: %s %q (fix %q), want OK on a working namespace", name, c.Status, c.Detail, c.Fix)
		}
	}
	// The suite runs its functions outside the cluster: none is found, and
	// the events check is what shows they work.
	if c := checks["functions"]; c.Status != doctor.Warn {
		t.Errorf("functions: %s %q, want WARN (none deployed in the cluster)", c.Status, c.Detail)
	}
	// The repository's own PVC is backed up by nothing.
	if c := checks["coverage"]; c.Status != doctor.Warn || !strings.Contains(c.Fix, "snapflow coverage") {
		t.Errorf("coverage: %s %q, want WARN pointing at snapflow coverage", c.Status, c.Detail)
	}

	kubectl(t, []byte(fmt.Sprintf(`
apiVersion: kopiur.home-operations.com/v1alpha1
kind: Repository
metadata: {name: nowhere, namespace: %s}
spec:
  backend: {filesystem: {path: /nothing-here, volume: {pvc: {name: kopia-repo}}}}
  encryption: {passwordSecretRef: {name: kopia-password, key: KOPIA_PASSWORD}}
`, ns)), 0, "apply", "-f", "-")
	waitRepository(t, ns, "nowhere", snapv1.RepositoryFailed)
	checks = run(3)
	if c := checks["repositories"]; c.Status != doctor.Fail || !strings.Contains(c.Detail, "Repository "+ns+"/nowhere") || !strings.Contains(c.Detail, "create.enabled") || c.Fix == "" {
		t.Errorf("repositories: %s %q (fix %q), want FAIL naming %s/nowhere and why", c.Status, c.Detail, c.Fix, ns)
	}
	if c := checks["webhook"]; c.Status != doctor.OK {
		t.Errorf("webhook: %s %q, want it still OK", c.Status, c.Detail)
	}
	// A function Deployment that never becomes available (no kubelet runs
	// here), whose account nothing binds, and no source to feed it.
	kubectl(t, []byte(fmt.Sprintf(`
apiVersion: apps/v1
kind: Deployment
metadata: {name: doctor-snapshot, namespace: %s, labels: {snapflow.dev/function: snapshot}}
spec:
  selector: {matchLabels: {app: doctor-snapshot}}
  template:
    metadata: {labels: {app: doctor-snapshot}}
    spec:
      serviceAccountName: doctor-unbound
      containers: [{name: function, image: snapflow}]
`, ns)), 0, "apply", "-f", "-")
	t.Cleanup(func() { kubectl(t, nil, 0, "-n", ns, "delete", "deployment", "doctor-snapshot", "--ignore-not-found") })
	checks = run(3)
	for name, want := range map[string]string{
		"functions": "Deployment " + ns + "/doctor-snapshot",
		"sources":   "nothing sends them events",
		"rbac":      "runs as doctor-unbound, which no RoleBinding or ClusterRoleBinding names",
	} {
		if c := checks[name]; c.Status != doctor.Fail || !strings.Contains(c.Detail, want) || c.Fix == "" {
			t.Errorf("%s: %s %q (fix %q), want FAIL with %q", name, c.Status, c.Detail, c.Fix, want)
		}
	}
	table := snapflowCLI(t, 3, "doctor", "-n", ns, "--grace", "1s")
	for _, want := range []string{"CHECK", "repositories", "FAIL", "4 failed", "rbac (FAIL): helm upgrade"} {
		if !strings.Contains(table, want) {
			t.Errorf("the table does not say %q:\n%s", want, table)
		}
	}

	// snapflow's own namespace is left out by its webhook: a probe there
	// could only mislead, so it is not made.
	var own doctor.Report
	if err := json.Unmarshal([]byte(snapflowCLI(t, 3, "doctor", "-n", ns, "--probe-namespace", "snapflow-system", "-o", "json")), &own); err != nil {
		t.Fatal(err)
	}
	for _, c := range own.Checks {
		if c.Name == "webhook" && (c.Status != doctor.Warn || !strings.Contains(c.Detail, "left out by snapshotpolicies.validate.snapflow.dev's namespaceSelector")) {
			t.Errorf("webhook probed in snapflow's own namespace: %s %q, want WARN: not probed there", c.Status, c.Detail)
		}
	}

	// A webhook whose caBundle holds a CA, but not the one that signed the
	// webhook's certificate: the bundle parses, the probe names the fault.
	t.Run("an untrusted webhook", func(t *testing.T) {
		const probeNS = "doctor-ca"
		kubectl(t, []byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: "+probeNS+"}\n"), 0, "apply", "-f", "-")
		wrong, err := certs.Apply(certs.Bundle{}, certs.NewCA, certs.Hosts{DNSNames: []string{"not-the-webhook"}}, certs.DefaultPolicy, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		wrongCA := wrong.CABundle()
		kubectl(t, []byte(fmt.Sprintf(`
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: doctor-untrusted}
webhooks:
  - name: untrusted.doctor.snapflow.dev
    admissionReviewVersions: [v1]
    sideEffects: None
    failurePolicy: Fail
    clientConfig: {url: %q, caBundle: %s}
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: %s}}
    rules: [{apiGroups: [kopiur.home-operations.com], apiVersions: [v1alpha1], operations: [CREATE], resources: [snapshotpolicies]}]
`, env.Webhook.URL+"/mutate/snapshotpolicy", base64.StdEncoding.EncodeToString(wrongCA), probeNS)), 0, "apply", "-f", "-")
		t.Cleanup(func() {
			kubectl(t, nil, 0, "delete", "mutatingwebhookconfiguration", "doctor-untrusted", "--ignore-not-found")
		})
		var rep doctor.Report
		out := snapflowCLI(t, 3, "doctor", "-n", probeNS, "-o", "json")
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		for _, c := range rep.Checks {
			switch c.Name {
			case "webhook":
				if c.Status != doctor.Fail || !strings.Contains(c.Detail, "does not trust") || !strings.Contains(c.Detail, "untrusted.doctor.snapflow.dev") || !strings.Contains(c.Fix, "caBundle") {
					t.Errorf("webhook: %s %q (fix %q), want FAIL: not trusted, naming the webhook", c.Status, c.Detail, c.Fix)
				}
			case "webhook-ca":
				if c.Status != doctor.OK {
					t.Errorf("webhook-ca: %s %q, want OK (every bundle holds a valid CA)", c.Status, c.Detail)
				}
			}
		}
	})
}
