package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snapflow/snapflow/internal/volumepolicy"
)

func TestPolicyCheck(t *testing.T) {
	dir := t.TempDir()
	global := write(t, dir, "global.yaml", `apiVersion: v1
kind: ConfigMap
metadata: {name: global-volume-policies, namespace: snapflow-system}
data:
  policies.yaml: |
    version: v1
    volumePolicies:
      - conditions: {storageClass: [scratch]}
        action: {type: skip}
      - conditions: {}
        action: {type: fs-backup}
    includeExcludePolicy:
      excludedNamespaceScopedResources: [secrets]
`)
	recipe := write(t, dir, "recipe.yaml", `version: v1
volumePolicies:
  - conditions: {csi: {driver: ebs.csi.aws.com}, pvcLabels: {tier: gold}}
    action: {type: snapshot, parameters: {snapshotClass: gold-vsc}}
`)
	pv := write(t, dir, "pv.yaml", `apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-1}
spec:
  capacity: {storage: 20Gi}
  storageClassName: scratch
  csi: {driver: ebs.csi.aws.com, volumeHandle: vol-1}
`)
	gold := write(t, dir, "gold.yaml", `apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: db, namespace: billing, labels: {tier: gold}}
spec: {accessModes: [ReadWriteOnce]}
status: {phase: Bound}
`)
	plain := write(t, dir, "plain.yaml", `apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: tmp, namespace: billing}
spec: {accessModes: [ReadWriteOnce]}
`)

	// The recipe overrides the baseline for a gold volume...
	out, errOut, code := run(t, "policy", "check", "--policies", recipe, "--global", global, "--pv", pv, "--pvc", gold)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"includeExcludePolicy ignored", "Volume: pvc billing/db, pv pv-1", `action: snapshot {"snapshotClass":"gold-vsc"}`, `recipe   #0  snapshot   {"csi":{"driver":"ebs.csi.aws.com"},"pvcLabels":{"tier":"gold"}}`, "global   #1  fs-backup  every volume", "rule:   recipe policy #0"} {
		if !strings.Contains(out, want) {
			t.Errorf("output misses %q:\n%s", want, out)
		}
	}
	// ...and the same PV under a plain claim falls to the global skip rule.
	out, _, _ = run(t, "policy", "check", "--policies", recipe, "--global", global, "--pv", pv, "--pvc", plain, "-o", "json")
	var res PolicyCheck
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("-o json: %v\n%s", err, out)
	}
	if res.Merged == nil || len(res.Merged.VolumePolicies) != 3 {
		t.Fatalf("-o json lacks the merged document: %+v", res.Merged)
	}
	if len(res.Rules) != 3 || res.Decision == nil || res.Decision.Action != volumepolicy.Skip || res.Decision.Rule.Source != volumepolicy.FromGlobal || res.Decision.Rule.Index != 0 {
		t.Fatalf("json = %+v", res)
	}

	// A baseline that skips emptyDirs, the design's motivating example,
	// checked against a pod's volume.
	skipEmpty := write(t, dir, "skip-empty.yaml", "version: v1\nvolumePolicies:\n  - conditions: {volumeTypes: [emptyDir]}\n    action: {type: skip}\n  - conditions: {}\n    action: {type: fs-backup}\n")
	cache := write(t, dir, "cache.yaml", "name: cache\nemptyDir: {sizeLimit: 1Gi}\n")
	out, errOut, code = run(t, "policy", "check", "--global", skipEmpty, "--pod-volume", cache)
	if code != 0 || !strings.Contains(out, "Volume: pod volume cache") || !strings.Contains(out, "action: skip") {
		t.Fatalf("pod emptyDir: exit %d %s\n%s", code, errOut, out)
	}
	claimVol := write(t, dir, "claim-vol.yaml", "name: data\npersistentVolumeClaim: {claimName: db}\n")
	if out, errOut, code := run(t, "policy", "check", "--global", skipEmpty, "--pod-volume", claimVol, "--pvc", gold, "--pv", pv); code != 0 || !strings.Contains(out, "action: fs-backup") {
		t.Fatalf("a pod volume of a PVC: exit %d %s\n%s", code, errOut, out)
	}
	if _, errOut, code := run(t, "policy", "check", "--global", skipEmpty, "--pod-volume", claimVol); code != ExitUsage || !strings.Contains(errOut, `names PVC "db": give that PVC with --pvc`) {
		t.Fatalf("a pod volume of a PVC without the PVC: exit %d %q", code, errOut)
	}
	typo := write(t, dir, "typo.yaml", "name: cache\nemptyDirr: {}\n")
	if _, errOut, code := run(t, "policy", "check", "--global", skipEmpty, "--pod-volume", typo); code != ExitUsage || !strings.Contains(errOut, "--pod-volume") {
		t.Fatalf("a misspelt pod volume: exit %d %q", code, errOut)
	}

	bad := write(t, dir, "bad.yaml", "version: v1\nvolumePolicies:\n  - conditions: {capacity: 5Gi}\n    action: {type: skip}\n")
	_, errOut, code = run(t, "policy", "check", "--global", bad)
	if code != 1 || !strings.Contains(errOut, "--global "+bad+" is invalid: volumePolicies[0].conditions.capacity") {
		t.Fatalf("invalid baseline: exit %d %q", code, errOut)
	}
	// A section the global baseline ignores is still checked first, as
	// Velero does: an invalid one fails the whole baseline.
	ignored := write(t, dir, "ignored.yaml", "version: v1\nincludeExcludePolicy: {includedNamespaceScopedResources: ['*']}\nvolumePolicies:\n  - conditions: {}\n    action: {type: skip}\n")
	if _, errOut, code := run(t, "policy", "check", "--global", ignored); code != 1 || !strings.Contains(errOut, "includeExcludePolicy.includedNamespaceScopedResources: '*' cannot be used") {
		t.Fatalf("invalid ignored section of the baseline: exit %d %q", code, errOut)
	}
	// Nothing to merge: rules is an empty list, not null.
	empty := write(t, dir, "empty.yaml", "version: v1\n")
	if out, _, code := run(t, "policy", "check", "--global", empty, "-o", "json"); code != 0 || !strings.Contains(out, `"rules": []`) {
		t.Fatalf("no rules: exit %d\n%s", code, out)
	}
	if _, errOut, code := run(t, "policy", "check", "--global", filepath.Join(dir, "missing.yaml")); code != ExitUsage || !strings.Contains(errOut, "--global") {
		t.Fatalf("an unreadable file: exit %d %q", code, errOut)
	}
	// A ConfigMap manifest is named as the webhook names it.
	cmFile := write(t, dir, "cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: global, namespace: snapflow-system}\ndata:\n  policy.yaml: |\n    version: v2\n")
	if _, errOut, code := run(t, "policy", "check", "--global", cmFile); code != 1 || !strings.Contains(errOut, "ConfigMap snapflow-system/global is invalid") {
		t.Fatalf("an invalid ConfigMap manifest: exit %d %q", code, errOut)
	}
	if _, errOut, code := run(t, "policy", "check"); code != ExitUsage || !strings.Contains(errOut, "--policies FILE") {
		t.Fatalf("no documents: %d %q", code, errOut)
	}
}
