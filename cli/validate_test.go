package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Execute(args, &out, &errOut)
	return out.String(), errOut.String(), code
}

func write(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestValidateSamplesPass(t *testing.T) {
	out, errOut, code := run(t, "validate", "-f", filepath.Join("..", "config", "samples"))
	if code != 0 {
		t.Fatalf("samples should pass offline (exit %d):\n%s%s", code, out, errOut)
	}
	n := 0
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "ok ") {
			n++
		}
	}
	if n < 15 {
		t.Fatalf("expected every sample object to be listed ok, got %d:\n%s", n, out)
	}
}

func TestValidateDenies(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "policy.yaml", `apiVersion: kopiur.home-operations.com/v1alpha1
kind: SnapshotPolicy
metadata: {name: p, namespace: billing}
spec:
  repository: {kind: ClusterRepository, name: shared}
  sources: [{pvc: {name: data}}]
  retention: {keepDaily: 0}
  retension: {keepDaily: 7}
`)
	out, errOut, code := run(t, "validate", "-f", dir, "-o", "json")
	if code != 1 || !strings.Contains(errOut, "1 of 1 objects would be denied") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	var findings []Finding
	if err := json.Unmarshal([]byte(out), &findings); err != nil {
		t.Fatalf("-o json: %v\n%s", err, out)
	}
	f := findings[0]
	if f.Allowed || f.Kind != "SnapshotPolicy" || f.Namespace != "billing" {
		t.Fatalf("finding = %+v", f)
	}
	fields := errorsByField(f)
	if !strings.Contains(fields["spec.retention"], "keeps no snapshots") || !strings.Contains(fields["spec.retension"], "unknown field") {
		t.Fatalf("errors = %v", f.Errors)
	}
	// The ClusterRepository is not in the files: said so, not denied for it.
	if !strings.Contains(strings.Join(f.Warnings, "\n"), `ClusterRepository "shared" is not among the given manifests`) {
		t.Fatalf("warnings = %v", f.Warnings)
	}
}

// The schema's own rules apply offline too: an identity component left
// empty (a template value never set) is refused, not taken as the default.
func TestValidateAppliesTheSchema(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "policy.yaml", `apiVersion: kopiur.home-operations.com/v1alpha1
kind: SnapshotPolicy
metadata: {name: p, namespace: billing}
spec:
  repository: {name: nas}
  sources: [{pvc: {name: data}}]
  identity: {username: "", hostname: db}
  copyMethod: Sideways
`)
	findings := validateJSON(t, dir, 1)
	fields := errorsByField(findings[0])
	if !strings.Contains(fields["spec.identity.username"], "at least 1 chars long") || !strings.Contains(fields["spec.copyMethod"], "supported values") {
		t.Fatalf("errors = %v", findings[0].Errors)
	}
	if _, ok := fields["spec.identity.hostname"]; ok {
		t.Fatalf("a set hostname was refused: %v", findings[0].Errors)
	}
}

// A policy's volume-policy ConfigMap among the files is checked with it,
// as the webhook checks it: invalid is refused, missing is said.
func TestValidateChecksTheRecipesVolumePolicies(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "all.yaml", `apiVersion: v1
kind: ConfigMap
metadata: {name: rules, namespace: billing}
data:
  policy.yaml: |
    version: v1
    volumePolicies:
      - conditions: {capacity: 5Gi}
        action: {type: skip}
---
apiVersion: kopiur.home-operations.com/v1alpha1
kind: SnapshotPolicy
metadata: {name: broken, namespace: billing}
spec:
  repository: {name: nas}
  sources: [{pvc: {name: data}}]
  resourcePolicy: {name: rules}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: unplaced}
data:
  policy.yaml: |
    version: v1
    volumePolicies: [{conditions: {}, action: {type: shred}}]
---
apiVersion: kopiur.home-operations.com/v1alpha1
kind: SnapshotPolicy
metadata: {name: kustomized, namespace: billing}
spec:
  repository: {name: nas}
  sources: [{pvc: {name: cache}}]
  resourcePolicy: {name: unplaced}
---
apiVersion: kopiur.home-operations.com/v1alpha1
kind: SnapshotPolicy
metadata: {name: elsewhere, namespace: billing}
spec:
  repository: {name: nas}
  sources: [{pvc: {name: logs}}]
  resourcePolicy: {name: not-given}
`)
	findings := validateJSON(t, dir, 1)
	byName := map[string]Finding{}
	for _, f := range findings {
		byName[f.Name] = f
	}
	broken := byName["broken"]
	if broken.Allowed || len(broken.Errors) != 1 || broken.Errors[0].Field != "spec.resourcePolicy.name" || !strings.Contains(broken.Errors[0].Message, "conditions.capacity") {
		t.Fatalf("a recipe with invalid volume policies: %+v", broken)
	}
	if k := byName["kustomized"]; k.Allowed || !strings.Contains(fmt.Sprint(k.Errors), `"shred" is not an action type`) {
		t.Fatalf("a ConfigMap given without a namespace is not checked: %+v", k)
	}
	if e := byName["elsewhere"]; !e.Allowed || !strings.Contains(strings.Join(e.Warnings, "\n"), "billing/not-given is not among the given manifests") {
		t.Fatalf("a recipe whose ConfigMap was not given: %+v", e)
	}
}

func TestValidateUsesGivenReferents(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "all.yaml", `apiVersion: kopiur.home-operations.com/v1alpha1
kind: ClusterRepository
metadata: {name: shared}
spec:
  backend: {filesystem: {path: /b}}
  encryption: {passwordSecretRef: {name: pw, namespace: ops}}
  allowedNamespaces: {list: [ops]}
---
apiVersion: kopiur.home-operations.com/v1alpha1
kind: SnapshotPolicy
metadata: {name: p, namespace: billing}
spec:
  repository: {kind: ClusterRepository, name: shared}
  sources: [{pvcSelector: {labelSelector: {matchLabels: {backup: "yes"}}}}]
---
apiVersion: kopiur.home-operations.com/v1alpha1
kind: Snapshot
metadata: {name: s, namespace: billing}
spec: {policyRef: {name: p}}
`)
	out, _, code := run(t, "validate", "-f", dir)
	if code != 1 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	for _, want := range []string{
		`DENIED SnapshotPolicy billing/p`, `namespace "billing" is not in the allowedNamespaces of ClusterRepository "shared"`,
		`DENIED Snapshot billing/s`, "spec.source: SnapshotPolicy `p` uses a pvcSelector",
		"ok ClusterRepository shared",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output misses %q:\n%s", want, out)
		}
	}
}

func TestValidateShowMutations(t *testing.T) {
	dir := t.TempDir()
	f := write(t, dir, "snap.yaml", `apiVersion: kopiur.home-operations.com/v1alpha1
kind: Snapshot
metadata: {generateName: nightly-, namespace: billing}
spec: {policyRef: {name: p}}
`)
	out, _, code := run(t, "validate", "-f", f, "--show-mutations")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	for _, want := range []string{"stored as:", "kopiur.home-operations.com/snapshot-cleanup", "kopiur.home-operations.com/config: p", "deletionPolicy: Delete"} {
		if !strings.Contains(out, want) {
			t.Errorf("--show-mutations misses %q:\n%s", want, out)
		}
	}
	if _, errOut, code := run(t, "validate"); code != ExitUsage || !strings.Contains(errOut, "-f FILE") {
		t.Fatalf("no -f: exit %d %q", code, errOut)
	}
	for _, args := range [][]string{{"validate", "--bogus"}, {"policy", "check", "--bogus"}, {"retention", "preview", "--bogus"}} {
		if _, errOut, code := run(t, args...); code != ExitUsage || !strings.Contains(errOut, "unknown flag") {
			t.Errorf("%v: exit %d %q, want %d", args, code, errOut, ExitUsage)
		}
	}
}

// A Repository seeded from a ClusterRepository passes through its tenancy gate.
func TestValidateSeedTenancy(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "all.yaml", `apiVersion: kopiur.home-operations.com/v1alpha1
kind: ClusterRepository
metadata: {name: shared}
spec:
  backend: {filesystem: {path: /b}}
  encryption: {passwordSecretRef: {name: pw, namespace: ops}}
  allowedNamespaces: {list: [ops]}
---
apiVersion: kopiur.home-operations.com/v1alpha1
kind: Repository
metadata: {name: restored, namespace: billing}
spec:
  backend: {filesystem: {path: /r, volume: {pvc: {name: repo}}}}
  encryption: {passwordSecretRef: {name: pw}}
  seed: {from: {repository: {kind: ClusterRepository, name: shared}}}
`)
	out, _, code := run(t, "validate", "-f", dir)
	if code != 1 || !strings.Contains(out, "spec.seed.from.repository: namespace \"billing\" is not in the allowedNamespaces of ClusterRepository \"shared\"") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

// validateJSON runs validate -o json over dir, expecting exit code want.
func validateJSON(t *testing.T, dir string, want int) []Finding {
	t.Helper()
	out, errOut, code := run(t, "validate", "-f", dir, "-o", "json")
	var findings []Finding
	if err := json.Unmarshal([]byte(out), &findings); err != nil || code != want {
		t.Fatalf("exit %d (want %d), -o json: %v\n%s%s", code, want, err, out, errOut)
	}
	return findings
}

// errorsByField maps each denied field of f to its message.
func errorsByField(f Finding) map[string]string {
	fields := map[string]string{}
	for _, e := range f.Errors {
		fields[e.Field] = e.Message
	}
	return fields
}
