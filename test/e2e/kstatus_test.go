package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/snapflow/snapflow/test/harness"
)

// Every kind reports kstatus conditions, so `kubectl wait
// --for=condition=Ready` (and Argo CD or Flux health checks, which read the
// same conditions) work on each: a Repository and a ClusterRepository once
// connected, a SnapshotPolicy whose repositories exist, a SnapshotSchedule
// that is valid, a Snapshot and a Restore that succeeded, and the default
// Maintenance of a usable repository.
func TestKubectlWaitReadyOnEveryKind(t *testing.T) {
	const ns, credsNS = "kstatus", "kstatus-creds"
	createBucket(t, "snapflow-kstatus")
	backupNamespace(t, ns, 3, "")
	kubectl(t, []byte(fmt.Sprintf(`
apiVersion: v1
kind: Namespace
metadata: {name: %[1]s}
---
apiVersion: v1
kind: Secret
metadata: {name: s3, namespace: %[1]s}
stringData: {AWS_ACCESS_KEY_ID: %[2]s, AWS_SECRET_ACCESS_KEY: %[3]s}
---
apiVersion: v1
kind: Secret
metadata: {name: password, namespace: %[1]s}
stringData: {password: kstatus-horse}
---
apiVersion: kopiur.home-operations.com/v1alpha1
kind: ClusterRepository
metadata: {name: kstatus-shared}
spec:
  backend:
    s3:
      bucket: snapflow-kstatus
      endpoint: %[4]s
      region: %[5]s
      auth: {secretRef: {name: s3, namespace: %[1]s}}
      tls: {disableTls: true}
  encryption: {passwordSecretRef: {name: password, key: password, namespace: %[1]s}}
  create: {enabled: true}
  allowedNamespaces: {list: [%[6]s]}
`, credsNS, env.S3.AccessKey, env.S3.SecretKey, env.S3.Endpoint, env.S3.Region, ns)), 0, "apply", "-f", "-")
	kubectl(t, policy(ns, "app", "  copyMethod: Direct\n"), 0, "apply", "-f", "-")
	kubectl(t, []byte(fmt.Sprintf(`
apiVersion: kopiur.home-operations.com/v1alpha1
kind: SnapshotSchedule
metadata: {name: yearly, namespace: %s}
spec:
  policyRef: {name: app}
  schedule: {cron: "0 3 1 1 *", timezone: UTC}
`, ns)), 0, "apply", "-f", "-")
	kubectl(t, snapshotOf(ns, "first", "app"), 0, "create", "-f", "-")

	timeout := fmt.Sprintf("--timeout=%ds", int(harness.Timeout(3*time.Minute).Seconds()))
	wait := func(args ...string) {
		t.Helper()
		kubectl(t, nil, 0, append([]string{"wait", "--for=condition=Ready", timeout}, args...)...)
	}
	wait("clusterrepository/kstatus-shared")
	wait("-n", ns, "repository/primary")
	wait("-n", ns, "snapshot/first")
	wait("-n", ns, "snapshotpolicy/app")
	wait("-n", ns, "snapshotschedule/yearly")
	wait("-n", ns, "maintenance/primary")
	kubectl(t, restoreOf(ns, "back", "{snapshotRef: {name: first}}", "{pvc: {name: restored, capacity: 1Gi}}"), 0, "apply", "-f", "-")
	wait("-n", ns, "restores.kopiur.home-operations.com/back") // KubeBlocks has a Restore too
	// A SnapshotPolicy that names a repository that does not exist is not
	// Ready, and stalled until it is created.
	kubectl(t, []byte(fmt.Sprintf(`
apiVersion: kopiur.home-operations.com/v1alpha1
kind: SnapshotPolicy
metadata: {name: nowhere, namespace: %s}
spec:
  repository: {name: not-made-yet}
  sources: [{pvc: {name: app-data}}]
`, ns)), 0, "apply", "-f", "-")
	kubectl(t, nil, 0, "wait", "--for=condition=Stalled", timeout, "-n", ns, "snapshotpolicy/nowhere")
	if out := kubectl(t, nil, 0, "get", "-n", ns, "snapshotpolicy/nowhere", "-o", "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}").Stdout; out != "False" {
		t.Errorf("a policy with a missing repository is Ready=%q", out)
	}
}
