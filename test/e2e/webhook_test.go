package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/snapflow/snapflow/test/harness"
)

func ensureNamespace(t *testing.T, name string, labels string) {
	t.Helper()
	kubectl(t, []byte(fmt.Sprintf(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":%q,"labels":{%s}}}`, name, labels)), 0, "apply", "-f", "-")
}

// Each invalid fixture is refused on kubectl apply with the message its
// header promises, and nothing is stored.
func TestWebhookRefusesInvalidManifests(t *testing.T) {
	ensureNamespace(t, "invalid", "")
	files, _ := filepath.Glob(repoPath(t, "test", "fixtures", "invalid", "*.yaml"))
	if len(files) < 8 {
		t.Fatalf("only %d invalid fixtures", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			raw := readFile(t, f)
			var wants []string
			for _, line := range strings.Split(string(raw), "\n") {
				if w, ok := strings.CutPrefix(line, "# expect: "); ok {
					wants = append(wants, w)
				}
			}
			if len(wants) == 0 {
				t.Fatal("fixture has no # expect: line")
			}
			res := kubectl(t, nil, 1, "apply", "-f", f)
			// The webhook answers 422 Invalid with one cause per field, which
			// kubectl lists as "The request is invalid: * field: message";
			// the CRD schema's refusals read "The <Kind> "<name>" is invalid".
			if !strings.Contains(res.Stderr, "The request is invalid") && !strings.Contains(res.Stderr, "denied the request") && !strings.Contains(res.Stderr, "\" is invalid: ") {
				t.Fatalf("not denied:\n%s", res.Stderr)
			}
			for _, w := range wants {
				if !strings.Contains(res.Stderr, w) {
					t.Errorf("the user should see %q; kubectl printed:\n%s", w, res.Stderr)
				}
			}
			var meta struct {
				Kind     string
				Metadata struct{ Name, Namespace string }
			}
			if err := yaml.Unmarshal(raw, &meta); err != nil {
				t.Fatal(err)
			}
			args := []string{"get", strings.ToLower(meta.Kind) + ".kopiur.home-operations.com", meta.Metadata.Name, "--ignore-not-found", "-o", "name"}
			if meta.Metadata.Namespace != "" {
				args = append(args, "-n", meta.Metadata.Namespace)
			}
			if out := kubectl(t, nil, 0, args...).Stdout; strings.TrimSpace(out) != "" {
				t.Fatalf("a refused object was stored: %s", out)
			}
		})
	}
}

// The mutations are visible on the stored object, and dry-run goes through
// the same admission without storing anything.
func TestWebhookMutationsAndDryRun(t *testing.T) {
	ensureNamespace(t, "mutations", "")
	policy := []byte(`apiVersion: kopiur.home-operations.com/v1alpha1
kind: SnapshotPolicy
metadata: {name: keep, namespace: mutations}
spec:
  repository: {name: nas}
  sources: [{pvc: {name: data}}]
  defaultDeletionPolicy: Retain
`)
	// Server-side dry run: admitted, mutated, not stored.
	out := kubectl(t, policy, 0, "apply", "--dry-run=server", "-f", "-", "-o", "yaml").Stdout
	if !strings.Contains(out, "- /lost+found") {
		t.Fatalf("dry run should show the default ignore rules:\n%s", out)
	}
	if got := kubectl(t, nil, 0, "-n", "mutations", "get", "snapshotpolicies", "-o", "name").Stdout; strings.TrimSpace(got) != "" {
		t.Fatalf("dry run stored %s", got)
	}
	kubectl(t, policy, 0, "apply", "-f", "-")
	out = kubectl(t, nil, 0, "-n", "mutations", "get", "snapshotpolicy", "keep", "-o", "yaml").Stdout
	for _, want := range []string{"ignoreRules:", "- /lost+found", "- System Volume Information", "- $RECYCLE.BIN", "- '@eaDir'", "- .snapshot"} {
		if !strings.Contains(out, want) {
			t.Errorf("stored policy misses %q:\n%s", want, out)
		}
	}

	res := kubectl(t, []byte(`apiVersion: kopiur.home-operations.com/v1alpha1
kind: Snapshot
metadata: {generateName: keep-manual-, namespace: mutations}
spec: {policyRef: {name: keep}}
`), 0, "create", "-f", "-", "-o", "yaml")
	for _, want := range []string{
		"kopiur.home-operations.com/snapshot-cleanup", // finalizer
		"kopiur.home-operations.com/config: keep",     // config label
		"deletionPolicy: Retain",                      // from the recipe's defaultDeletionPolicy
	} {
		if !strings.Contains(res.Stdout, want) {
			t.Errorf("created Snapshot misses %q:\n%s", want, res.Stdout)
		}
	}
	// A dry run of an invalid object is denied like the real thing.
	res = kubectl(t, []byte(`apiVersion: kopiur.home-operations.com/v1alpha1
kind: Snapshot
metadata: {name: bad, namespace: mutations}
spec: {policyRef: {name: keep}, failurePolicy: {activeDeadlineSeconds: 0}}
`), 1, "apply", "--dry-run=server", "-f", "-")
	if !strings.Contains(res.Stderr, "spec.failurePolicy.activeDeadlineSeconds: must be at least 1 second") {
		t.Fatalf("dry run should be denied with the field: %s", res.Stderr)
	}
}

// Non-blocking findings reach the user as kubectl warnings.
func TestWebhookWarnings(t *testing.T) {
	ensureNamespace(t, "warnings", "")
	res := kubectl(t, []byte(`apiVersion: kopiur.home-operations.com/v1alpha1
kind: SnapshotSchedule
metadata: {name: often, namespace: warnings}
spec:
  policyRef: {name: pg}
  schedule: {cron: "*/5 * * * *"}
`), 0, "apply", "-f", "-")
	if !strings.Contains(res.Stderr, "Warning: schedule fires ~12×/hour") {
		t.Fatalf("want a sub-hourly warning, stderr:\n%s", res.Stderr)
	}
}

// Rules that read other objects, on the real API: tenancy, selector
// policies, multi-repository pins and restore repository choice.
func TestWebhookReferentRules(t *testing.T) {
	ensureNamespace(t, "tenant-a", `"team":"a"`)
	ensureNamespace(t, "tenant-b", `"team":"b"`)
	kubectl(t, []byte(`apiVersion: kopiur.home-operations.com/v1alpha1
kind: ClusterRepository
metadata: {name: team-a-only}
spec:
  backend: {filesystem: {path: /backups}}
  encryption: {passwordSecretRef: {name: pw, namespace: snapflow-system}}
  allowedNamespaces: {selector: {matchLabels: {team: a}}}
`), 0, "apply", "-f", "-")
	policy := func(ns string) []byte {
		return []byte(fmt.Sprintf(`apiVersion: kopiur.home-operations.com/v1alpha1
kind: SnapshotPolicy
metadata: {name: shared, namespace: %s}
spec:
  repository: {kind: ClusterRepository, name: team-a-only}
  sources: [{pvcSelector: {labelSelector: {matchLabels: {backup: "true"}}}}]
`, ns))
	}
	kubectl(t, policy("tenant-a"), 0, "apply", "-f", "-")
	res := kubectl(t, policy("tenant-b"), 1, "apply", "-f", "-")
	if !strings.Contains(res.Stderr, `namespace "tenant-b" does not match the allowedNamespaces.selector of ClusterRepository "team-a-only"`) {
		t.Fatalf("tenancy: %s", res.Stderr)
	}

	// A hand-written Snapshot against a selector policy must say which PVC.
	res = kubectl(t, []byte(`apiVersion: kopiur.home-operations.com/v1alpha1
kind: Snapshot
metadata: {name: which-pvc, namespace: tenant-a}
spec: {policyRef: {name: shared}}
`), 1, "apply", "-f", "-")
	if !strings.Contains(res.Stderr, "spec.source: SnapshotPolicy `shared` uses a pvcSelector") {
		t.Fatalf("selector snapshot: %s", res.Stderr)
	}

	kubectl(t, []byte(`apiVersion: kopiur.home-operations.com/v1alpha1
kind: SnapshotPolicy
metadata: {name: two, namespace: tenant-a}
spec:
  repositories: [{name: nas}, {name: offsite}]
  sources: [{pvc: {name: data}}]
`), 0, "apply", "-f", "-")
	res = kubectl(t, []byte(`apiVersion: kopiur.home-operations.com/v1alpha1
kind: Restore
metadata: {name: which-repo, namespace: tenant-a}
spec:
  source: {fromPolicy: {name: two}}
  target: {pvcRef: {name: data}}
`), 1, "apply", "-f", "-")
	if !strings.Contains(res.Stderr, "set spec.repository to one of: Repository/tenant-a/nas, Repository/tenant-a/offsite") {
		t.Fatalf("restore repository choice: %s", res.Stderr)
	}
	res = kubectl(t, []byte(`apiVersion: kopiur.home-operations.com/v1alpha1
kind: Snapshot
metadata: {name: pinned, namespace: tenant-a}
spec: {policyRef: {name: two}, repository: {name: tape}}
`), 1, "apply", "-f", "-")
	if !strings.Contains(res.Stderr, "does not list that repository (current set: Repository/tenant-a/nas, Repository/tenant-a/offsite)") {
		t.Fatalf("multi-repository pin: %s", res.Stderr)
	}
}

// UPDATE guards fire on edits of stored objects.
func TestWebhookUpdateGuards(t *testing.T) {
	ensureNamespace(t, "guards", "")
	policy := func(username, annotations string) []byte {
		return []byte(fmt.Sprintf(`apiVersion: kopiur.home-operations.com/v1alpha1
kind: SnapshotPolicy
metadata: {name: pg, namespace: guards, annotations: {%s}}
spec:
  repository: {name: nas}
  identity: {username: %s}
  sources: [{pvc: {name: data}}]
`, annotations, username))
	}
	kubectl(t, policy("pg", ""), 0, "apply", "-f", "-")
	// Before any history, the identity may change freely.
	kubectl(t, policy("pg-v2", ""), 0, "apply", "-f", "-")
	kubectl(t, nil, 0, "-n", "guards", "patch", "snapshotpolicy", "pg", "--subresource=status", "--type=merge",
		"-p", `{"status":{"lastSuccessfulSnapshot":"2026-11-30T02:17:00Z"}}`)
	res := kubectl(t, policy("pg-v3", ""), 1, "apply", "-f", "-")
	if !strings.Contains(res.Stderr, `changes the policy's resolved kopia identity from "pg-v2@guards" to "pg-v3@guards"`) ||
		!strings.Contains(res.Stderr, "kopiur.home-operations.com/allow-identity-change") {
		t.Fatalf("identity-change guard: %s", res.Stderr)
	}
	kubectl(t, policy("pg-v3", `"kopiur.home-operations.com/allow-identity-change": "planned rename"`), 0, "apply", "-f", "-")

	repoNamed := func(name, pvc, splitter string) []byte {
		return []byte(fmt.Sprintf(`apiVersion: kopiur.home-operations.com/v1alpha1
kind: Repository
metadata: {name: %s, namespace: guards}
spec:
  backend: {filesystem: {path: /repository, volume: {pvc: {name: %s}}}}
  encryption: {passwordSecretRef: {name: pw}}
  create: {enabled: true, splitter: %s}
`, name, pvc, splitter))
	}
	repo := func(splitter string) []byte { return repoNamed("nas", "repo", splitter) }
	// Until a kopia repository was made for it, the format is an intention
	// only: a Repository that never connected (its volume does not exist)
	// may still change it.
	kubectl(t, repoNamed("draft", "no-such-volume", "DYNAMIC-4M-BUZHASH"), 0, "apply", "-f", "-")
	kubectl(t, repoNamed("draft", "no-such-volume", "FIXED-4M"), 0, "apply", "-f", "-")
	kubectl(t, repo("DYNAMIC-4M-BUZHASH"), 0, "apply", "-f", "-")
	// Once one was (status.uniqueId, as the snapshot function records it),
	// the format is fixed.
	kubectl(t, nil, 0, "-n", "guards", "patch", "repository", "nas", "--subresource=status", "--type=merge", "-p", `{"status":{"uniqueId":"made-by-e2e"}}`)
	res = kubectl(t, repo("FIXED-4M"), 1, "apply", "-f", "-")
	if !strings.Contains(res.Stderr, "spec.create.splitter: is immutable after repository creation") {
		t.Fatalf("splitter immutability: %s", res.Stderr)
	}
	// The identityDefaults of a repository whose consumer has history are guarded too.
	// pg pins only its username, so its hostname comes from the repository.
	res = kubectl(t, nil, 1, "-n", "guards", "patch", "repository", "nas", "--type=merge", "-p", `{"spec":{"identityDefaults":{"cluster":"eu1"}}}`)
	if !strings.Contains(res.Stderr, "would re-identify 1 consumer policies with snapshot history (guards/pg)") {
		t.Fatalf("identityDefaults guard: %s", res.Stderr)
	}
	kubectl(t, nil, 0, "-n", "guards", "annotate", "repository", "nas", "kopiur.home-operations.com/allow-identity-change=adding a cluster suffix")
	res = kubectl(t, nil, 0, "-n", "guards", "patch", "repository", "nas", "--type=merge", "-p", `{"spec":{"identityDefaults":{"cluster":"eu1"}}}`)
	if !strings.Contains(res.Stderr, "Warning: identityDefaults changed") {
		t.Fatalf("an acknowledged edit should warn: %s", res.Stderr)
	}
}

// The webhook's own endpoints: metrics, health, and the body limit.
func TestWebhookEndpoints(t *testing.T) {
	resp, err := http.Get(env.Webhook.MetricsURL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`snapflow_webhook_admission_total{decision="denied",kind="Snapshot",mode="validate",operation="CREATE"}`, "snapflow_webhook_admission_duration_seconds_bucket",
		`kopiur_webhook_admission_total{decision="denied",kind="Snapshot"}`, `kopiur_webhook_admission_total{decision="allowed",kind="SnapshotPolicy"}`} {
		if !bytes.Contains(body, []byte(want)) {
			t.Errorf("metrics miss %s", want)
		}
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get(env.Webhook.HealthURL + p)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %v %v", p, resp, err)
		}
	}
	big := bytes.Repeat([]byte("x"), 5<<20)
	resp, err = harness.InsecureClient().Post(env.Webhook.URL+"/validate/snapshot", "application/json", bytes.NewReader(big))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversized request: status %d, want 413", resp.StatusCode)
	}
}
