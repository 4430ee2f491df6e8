package e2e

import (
	"encoding/json"
	"testing"

	"github.com/snapflow/snapflow/internal/cli"
)

// retention preview reads a policy and the Snapshots carrying its config
// label (stamped by the webhook) from the cluster, and deletes nothing.
func TestRetentionPreviewAgainstCluster(t *testing.T) {
	const ns = "retention-preview"
	ensureNamespace(t, ns, "")
	kubectl(t, []byte(`apiVersion: kopiur.home-operations.com/v1alpha1
kind: SnapshotPolicy
metadata: {name: p, namespace: retention-preview}
spec:
  repository: {name: nas}
  sources: [{pvc: {name: data}}]
  retention: {keepLatest: 1}
`), 0, "apply", "-f", "-")
	for name, end := range map[string]string{"older": "2026-11-01T02:00:00Z", "newer": "2026-11-02T02:00:00Z"} {
		createSnapshot(t, ns, name, "p", 0)
		kubectl(t, nil, 0, "-n", ns, "patch", "snapshot", name, "--subresource=status", "--type=merge", "-p",
			`{"status":{"phase":"Succeeded","snapshot":{"kopiaSnapshotID":"k-`+name+`"},"timing":{"endTime":"`+end+`"}}}`)
	}
	// Not labelled for the policy: outside its retention.
	kubectl(t, []byte(`{"apiVersion":"kopiur.home-operations.com/v1alpha1","kind":"Snapshot","metadata":{"name":"stray","namespace":"retention-preview","labels":{"kopiur.home-operations.com/config":"other"}},"spec":{"policyRef":{"name":"p"}}}`), 0, "create", "-f", "-")

	var res cli.RetentionPreview
	if err := json.Unmarshal([]byte(snapflowCLI(t, 0, "retention", "preview", "--policy", "p", "-n", ns, "-o", "json")), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Verdicts) != 2 || len(res.Prune) != 1 || res.Prune[0] != "older" {
		t.Fatalf("preview = %+v", res)
	}
	if out := kubectl(t, nil, 0, "-n", ns, "get", "snapshot", "older", "-o", "name").Stdout; out == "" {
		t.Fatal("preview must not delete")
	}
}
