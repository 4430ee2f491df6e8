package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/snapflow/snapflow/internal/volumepolicy"
	"github.com/snapflow/snapflow/test/harness"
)

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(harness.Timeout(20 * time.Second))
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// On a Velero cluster the same global baseline is merged into each Backup,
// through the real Velero CRDs, with no ConfigMap left behind.
func TestVeleroBackupsGetTheGlobalPolicies(t *testing.T) {
	const ns = "velero"
	ensureNamespace(t, ns, "")
	kubectl(t, []byte(`apiVersion: v1
kind: ConfigMap
metadata: {name: own-policies, namespace: velero}
data:
  policies.yaml: |
    version: v1
    volumePolicies:
      - conditions: {nfs: {}}
        action: {type: fs-backup}
    includeExcludePolicy:
      excludedNamespaceScopedResources: [secrets]
`), 0, "apply", "-f", "-")
	backup := func(name, policy string) []byte {
		rp := ""
		if policy != "" {
			rp = "\n  resourcePolicy: {kind: configmap, name: " + policy + "}"
		}
		return []byte("apiVersion: velero.io/v1\nkind: Backup\nmetadata: {name: " + name + ", namespace: velero}\nspec:\n  includedNamespaces: [billing]" + rp + "\n")
	}

	// A dry run is answered but writes nothing.
	kubectl(t, backup("dry", "own-policies"), 0, "create", "--dry-run=server", "-f", "-")
	if out := kubectl(t, nil, 0, "-n", ns, "get", "configmap", "-o", "name").Stdout; strings.Contains(out, "snapflow-vp-dry") {
		t.Fatalf("a dry run wrote a ConfigMap: %s", out)
	}

	kubectl(t, backup("nightly", "own-policies"), 0, "apply", "-f", "-")
	get := func(path string) string {
		return kubectl(t, nil, 0, "-n", ns, "get", "backups.velero.io", "nightly", "-o", "jsonpath="+path).Stdout
	}
	merged := get("{.spec.resourcePolicy.name}")
	if !strings.HasPrefix(merged, "snapflow-vp-nightly-") {
		t.Fatalf("spec.resourcePolicy.name = %q", merged)
	}
	if got := get(`{.metadata.annotations.velero\.io/global-backup-volume-policy-configmap}`); got != harness.WebhookNamespace+"/"+harness.GlobalVolumePoliciesConfigMap {
		t.Fatalf("Velero's global-policy annotation = %q", got)
	}
	if got := get(`{.metadata.annotations.snapflow\.dev/original-resource-policy}`); got != "own-policies" {
		t.Fatalf("original policy annotation = %q", got)
	}
	doc, err := volumepolicy.Parse([]byte(kubectl(t, nil, 0, "-n", ns, "get", "configmap", merged, "-o", `jsonpath={.data.policies\.yaml}`).Stdout))
	if err != nil {
		t.Fatal(err)
	}
	if len(doc.VolumePolicies) != 3 || doc.VolumePolicies[0].Conditions.NFS == nil || doc.VolumePolicies[1].Action.Type != volumepolicy.Skip || len(doc.IncludeExcludePolicy) == 0 {
		t.Fatalf("merged document = %+v", doc)
	}
	// A queued Backup cannot be pointed away from its merged policies.
	res := kubectl(t, nil, 1, "-n", ns, "patch", "backups.velero.io", "nightly", "--type=merge", "-p", `{"spec":{"resourcePolicy":{"kind":"configmap","name":"own-policies"}}}`)
	if !strings.Contains(res.Stderr, "spec.resourcePolicy: is set when the Backup is created") {
		t.Fatalf("repointing spec.resourcePolicy: %s", res.Stderr)
	}
	// Tied to its Backup, and gone with it.
	uid := get("{.metadata.uid}")
	waitUntil(t, "the merged ConfigMap to be owned by its Backup", func() bool {
		return kubectl(t, nil, 0, "-n", ns, "get", "configmap", merged, "-o", "jsonpath={.metadata.ownerReferences[0].uid}").Stdout == uid
	})
	kubectl(t, nil, 0, "-n", ns, "delete", "backups.velero.io", "nightly")
	waitUntil(t, "the merged ConfigMap to go with its Backup", func() bool {
		return kubectl(t, nil, 0, "-n", ns, "get", "configmap", merged, "--ignore-not-found", "-o", "name").Stdout == ""
	})

	// Without its own policy a Backup gets the baseline alone.
	kubectl(t, backup("plain", ""), 0, "apply", "-f", "-")
	doc, err = volumepolicy.Parse([]byte(kubectl(t, nil, 0, "-n", ns, "get", "configmap", kubectl(t, nil, 0, "-n", ns, "get", "backups.velero.io", "plain", "-o", "jsonpath={.spec.resourcePolicy.name}").Stdout, "-o", `jsonpath={.data.policies\.yaml}`).Stdout))
	if err != nil || len(doc.VolumePolicies) != 2 {
		t.Fatalf("baseline only: %+v %v", doc, err)
	}

	// An invalid own policy does not refuse the Backup (a Velero Schedule's
	// Backup would vanish without a trace): it is created and fails
	// Velero's validation with the reason, as Velero's design has it.
	kubectl(t, []byte(`apiVersion: v1
kind: ConfigMap
metadata: {name: broken-policies, namespace: velero}
data: {a: "version: v1\nvolumePolicies: [{conditions: {}, action: {type: shred}}]\n"}
`), 0, "apply", "-f", "-")
	const why = `the Backup's resourcePolicy ConfigMap velero/broken-policies is invalid: volumePolicies[0].action.type: "shred" is not an action type`
	res = kubectl(t, backup("broken", "broken-policies"), 0, "apply", "-f", "-")
	if !strings.Contains(res.Stderr, "FailedValidation") || !strings.Contains(res.Stderr, why) {
		t.Fatalf("invalid own policy, no warning: %s", res.Stderr)
	}
	if got := kubectl(t, nil, 0, "-n", ns, "get", "backups.velero.io", "broken", "-o", `jsonpath={.metadata.annotations.snapflow\.dev/volume-policies-error}`).Stdout; !strings.Contains(got, why) {
		t.Fatalf("error annotation = %q", got)
	}
	failed := kubectl(t, nil, 0, "-n", ns, "get", "configmap", kubectl(t, nil, 0, "-n", ns, "get", "backups.velero.io", "broken", "-o", "jsonpath={.spec.resourcePolicy.name}").Stdout, "-o", `jsonpath={.data.policies\.yaml}`).Stdout
	d, err := volumepolicy.Parse([]byte(failed))
	if err == nil {
		_, err = d.Validate()
	}
	if err == nil || !strings.Contains(failed, why) {
		t.Fatalf("the failure document must fail validation and say why: %v\n%s", err, failed)
	}

	// Names too long for a label value, and generated names, are admitted;
	// the sweeper ties each merged ConfigMap to its Backup.
	long := "weekly-" + strings.Repeat("x", 120)
	kubectl(t, backup(long, ""), 0, "apply", "-f", "-")
	gen := kubectl(t, []byte("apiVersion: velero.io/v1\nkind: Backup\nmetadata: {generateName: adhoc-, namespace: velero}\nspec: {includedNamespaces: [billing]}\n"), 0, "create", "-o", "name", "-f", "-").Stdout
	genName := strings.TrimPrefix(strings.TrimSpace(gen), "backup.velero.io/")
	for _, b := range []string{long, genName} {
		uid := kubectl(t, nil, 0, "-n", ns, "get", "backups.velero.io", b, "-o", "jsonpath={.metadata.uid}").Stdout
		cm := kubectl(t, nil, 0, "-n", ns, "get", "backups.velero.io", b, "-o", "jsonpath={.spec.resourcePolicy.name}").Stdout
		if cm == "" {
			t.Fatalf("Backup %s has no merged policies", b)
		}
		waitUntil(t, "the merged ConfigMap of "+b+" to be owned by it", func() bool {
			return kubectl(t, nil, 0, "-n", ns, "get", "configmap", cm, "-o", "jsonpath={.metadata.ownerReferences[0].uid}").Stdout == uid
		})
		if got := kubectl(t, nil, 0, "-n", ns, "get", "configmap", cm, "-o", `jsonpath={.metadata.annotations.snapflow\.dev/velero-backup}`).Stdout; got != b {
			t.Fatalf("ConfigMap %s names Backup %q, want %q", cm, got, b)
		}
	}

	// A merged ConfigMap whose Backup never came to exist is swept after the grace period.
	kubectl(t, []byte(`apiVersion: v1
kind: ConfigMap
metadata: {name: snapflow-vp-ghost, namespace: velero, labels: {snapflow.dev/velero-backup: ghost, app.kubernetes.io/managed-by: snapflow}}
data: {policies.yaml: "version: v1\n"}
`), 0, "apply", "-f", "-")
	waitUntil(t, "the orphaned ConfigMap to be swept", func() bool {
		return kubectl(t, nil, 0, "-n", ns, "get", "configmap", "snapflow-vp-ghost", "--ignore-not-found", "-o", "name").Stdout == ""
	})
}
