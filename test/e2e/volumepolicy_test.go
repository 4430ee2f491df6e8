package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/cli"
	"github.com/snapflow/snapflow/internal/volumepolicy"
	"github.com/snapflow/snapflow/test/harness"
	"github.com/snapflow/snapflow/webhook"
)

func stampOf(t *testing.T, ns, name string) volumepolicy.Stamp {
	t.Helper()
	raw := kubectl(t, nil, 0, "-n", ns, "get", "snapshot", name, "-o", `jsonpath={.metadata.annotations.snapflow\.dev/volume-policies}`).Stdout
	var s volumepolicy.Stamp
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		t.Fatalf("annotation %s on %s/%s: %v (%q)", wellknown.AnnotationVolumePolicies, ns, name, err, raw)
	}
	return s
}

func createSnapshot(t *testing.T, ns, name, policy string, want int) harness.KubectlResult {
	t.Helper()
	return kubectl(t, []byte(fmt.Sprintf(`{"apiVersion":"kopiur.home-operations.com/v1alpha1","kind":"Snapshot","metadata":{"name":%q,"namespace":%q},"spec":{"policyRef":{"name":%q}}}`, name, ns, policy)), want, "create", "-f", "-")
}

// A new Snapshot carries its effective volume policies: the recipe's rules,
// then the global baseline's, and which ConfigMaps (at which version) gave them.
func TestVolumePoliciesStampedOnAdmission(t *testing.T) {
	const ns = "volume-policies"
	ensureNamespace(t, ns, "")
	kubectl(t, []byte(`apiVersion: v1
kind: ConfigMap
metadata: {name: recipe-policies, namespace: volume-policies}
data:
  policies.yaml: |
    version: v1
    volumePolicies:
      - conditions: {pvcLabels: {tier: gold}}
        action: {type: snapshot, parameters: {snapshotClass: gold-vsc}}
---
apiVersion: kopiur.home-operations.com/v1alpha1
kind: SnapshotPolicy
metadata: {name: with-recipe, namespace: volume-policies}
spec:
  repository: {name: nas}
  sources: [{pvc: {name: data}}]
  resourcePolicy: {kind: configmap, name: recipe-policies}
---
apiVersion: kopiur.home-operations.com/v1alpha1
kind: SnapshotPolicy
metadata: {name: baseline-only, namespace: volume-policies}
spec:
  repository: {name: nas}
  sources: [{pvc: {name: data}}]
`), 0, "apply", "-f", "-")

	createSnapshot(t, ns, "merged", "with-recipe", 0)
	s := stampOf(t, ns, "merged")
	if s.Recipe == nil || s.Recipe.ConfigMap != ns+"/recipe-policies" || s.Global == nil ||
		s.Global.ConfigMap != harness.WebhookNamespace+"/"+harness.GlobalVolumePoliciesConfigMap || s.Global.ResourceVersion == "" {
		t.Fatalf("sources = %+v %+v", s.Recipe, s.Global)
	}
	if len(s.Rules) != 3 || s.Rules[0].Source != volumepolicy.FromRecipe || s.Rules[0].Action.SnapshotClass() != "gold-vsc" ||
		s.Rules[1].Source != volumepolicy.FromGlobal || s.Rules[1].Action.Type != volumepolicy.Skip || s.Rules[2].Action.Type != volumepolicy.FSBackup {
		t.Fatalf("rules = %+v", s.Rules)
	}
	createSnapshot(t, ns, "baseline", "baseline-only", 0)
	if s := stampOf(t, ns, "baseline"); s.Recipe != nil || len(s.Rules) != 2 || s.Rules[0].Source != volumepolicy.FromGlobal {
		t.Fatalf("baseline only: %+v", s)
	}

	// A missing or invalid recipe ConfigMap denies the Snapshot, naming it.
	kubectl(t, []byte(`apiVersion: kopiur.home-operations.com/v1alpha1
kind: SnapshotPolicy
metadata: {name: dangling, namespace: volume-policies}
spec:
  repository: {name: nas}
  sources: [{pvc: {name: data}}]
  resourcePolicy: {name: no-such-policies}
`), 0, "apply", "-f", "-")
	res := createSnapshot(t, ns, "dangling", "dangling", 1)
	if !strings.Contains(res.Stderr, "ConfigMap volume-policies/no-such-policies does not exist") {
		t.Fatalf("missing recipe ConfigMap: %s", res.Stderr)
	}
	kubectl(t, []byte(`apiVersion: v1
kind: ConfigMap
metadata: {name: recipe-policies, namespace: volume-policies}
data:
  policies.yaml: |
    version: v1
    volumePolicies:
      - conditions: {capacity: 10Gi}
        action: {type: skip}
`), 0, "apply", "-f", "-")
	res = createSnapshot(t, ns, "invalid", "with-recipe", 1)
	if !strings.Contains(res.Stderr, "ConfigMap volume-policies/recipe-policies is invalid: volumePolicies[0].conditions.capacity") {
		t.Fatalf("invalid recipe ConfigMap: %s", res.Stderr)
	}
}

// The global ConfigMap is read for every Snapshot: an edit shows up at
// once, and its disappearance denies Snapshots until it is back.
func TestGlobalVolumePoliciesChangeAfterStartup(t *testing.T) {
	const ns = "global-changes"
	ensureNamespace(t, ns, "")
	kubectl(t, []byte(`apiVersion: kopiur.home-operations.com/v1alpha1
kind: SnapshotPolicy
metadata: {name: p, namespace: global-changes}
spec:
  repository: {name: nas}
  sources: [{pvc: {name: data}}]
`), 0, "apply", "-f", "-")
	ctx := context.Background()
	var global corev1.ConfigMap
	key := clientKey(harness.WebhookNamespace, harness.GlobalVolumePoliciesConfigMap)
	if err := env.Client.Get(ctx, key, &global); err != nil {
		t.Fatal(err)
	}
	original := global.DeepCopy()
	t.Cleanup(func() {
		restored := original.DeepCopy()
		restored.ResourceVersion = ""
		var cur corev1.ConfigMap
		if env.Client.Get(ctx, key, &cur) == nil {
			cur.Data = original.Data
			_ = env.Client.Update(ctx, &cur)
			return
		}
		_ = env.Client.Create(ctx, restored)
	})

	global.Data["policies.yaml"] = "version: v1\nvolumePolicies:\n  - conditions: {nfs: {}}\n    action: {type: fs-backup}\n" + strings.TrimPrefix(original.Data["policies.yaml"], "version: v1\nvolumePolicies:\n")
	if err := env.Client.Update(ctx, &global); err != nil {
		t.Fatal(err)
	}
	createSnapshot(t, ns, "after-edit", "p", 0)
	s := stampOf(t, ns, "after-edit")
	if len(s.Rules) != 3 || s.Rules[0].Conditions.NFS == nil || s.Global.ResourceVersion != global.ResourceVersion {
		t.Fatalf("edited global not picked up: %+v (want resourceVersion %s)", s, global.ResourceVersion)
	}

	if err := env.Client.Delete(ctx, &global); err != nil {
		t.Fatal(err)
	}
	res := createSnapshot(t, ns, "after-delete", "p", 1)
	if !strings.Contains(res.Stderr, "global backup volume policies ConfigMap snapflow-system/global-volume-policies does not exist") {
		t.Fatalf("deleted global: %s", res.Stderr)
	}
}

// A missing or invalid global ConfigMap stops the webhook at startup with
// a clear error, before it serves anything.
func TestGlobalVolumePoliciesStartup(t *testing.T) {
	ctx := context.Background()
	bad := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: harness.WebhookNamespace, Name: "bad-global"},
		Data: map[string]string{"p.yaml": "version: v1\nvolumePolicies:\n  - conditions: {}\n    action: {type: archive}\n"}}
	if err := env.Client.Create(ctx, bad); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"absent-global": "global backup volume policies ConfigMap snapflow-system/absent-global does not exist",
		"bad-global":    `volumePolicies[0].action.type: "archive" is not an action type`,
	} {
		err := webhook.Run(ctx, env.Config, webhook.Options{Namespace: harness.WebhookNamespace, GlobalVolumePoliciesConfigMap: name,
			TLSCertFile: filepath.Join(t.TempDir(), "unused.crt"), TLSKeyFile: filepath.Join(t.TempDir(), "unused.key"), Log: logr.Discard()})
		if err == nil || !strings.Contains(err.Error(), "--global-backup-volume-policies-configmap") || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", name, err, want)
		}
	}
}

func snapflowCLI(t *testing.T, want int, args ...string) string {
	t.Helper()
	var out, errOut strings.Builder
	if code := cli.Execute(append([]string{"--kubeconfig", env.Kubeconfig}, args...), &out, &errOut); code != want {
		t.Fatalf("snapflow %s: exit %d, want %d\n%s%s", strings.Join(args, " "), code, want, out.String(), errOut.String())
	}
	return out.String()
}

// describe shows what admission decided; policy check evaluates a live
// volume against the same rules.
func TestDescribeAndPolicyCheckAgainstCluster(t *testing.T) {
	const ns = "describe"
	ensureNamespace(t, ns, "")
	kubectl(t, []byte(`apiVersion: v1
kind: PersistentVolume
metadata: {name: describe-scratch}
spec:
  capacity: {storage: 5Gi}
  accessModes: [ReadWriteOnce]
  storageClassName: scratch
  csi: {driver: hostpath.csi.k8s.io, volumeHandle: scratch-1}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: tmp, namespace: describe}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: scratch
  volumeName: describe-scratch
  resources: {requests: {storage: 5Gi}}
---
apiVersion: kopiur.home-operations.com/v1alpha1
kind: SnapshotPolicy
metadata: {name: p, namespace: describe}
spec:
  repository: {name: nas}
  sources: [{pvc: {name: tmp}}]
`), 0, "apply", "-f", "-")
	createSnapshot(t, ns, "s1", "p", 0)

	out := snapflowCLI(t, 0, "describe", "snapshot", "s1", "-n", ns)
	for _, want := range []string{"Name:              s1", "Policy:            p", "Deletion policy:   Delete",
		"Global volume policies:", "Type:\tconfigmap", "Name:\tsnapflow-system/global-volume-policies", `global #0  skip       {"storageClass":["scratch"]}`} {
		if !strings.Contains(out, want) {
			t.Errorf("describe misses %q:\n%s", want, out)
		}
	}
	var d cli.SnapshotDescription
	if err := json.Unmarshal([]byte(snapflowCLI(t, 0, "describe", "snapshot", "s1", "-n", ns, "-o", "json")), &d); err != nil {
		t.Fatal(err)
	}
	if d.Snapshot.Name != "s1" || d.VolumePolicies == nil || d.VolumePolicies.Global == nil || len(d.VolumePolicies.Rules) != 2 {
		t.Fatalf("describe -o json = %+v", d)
	}

	global := filepath.Join(t.TempDir(), "global.yaml")
	b := kubectl(t, nil, 0, "-n", harness.WebhookNamespace, "get", "configmap", harness.GlobalVolumePoliciesConfigMap, "-o", "yaml").Stdout
	if err := os.WriteFile(global, []byte(b), 0o600); err != nil {
		t.Fatal(err)
	}
	out = snapflowCLI(t, 0, "policy", "check", "--global", global, "--volume-from", ns+"/tmp")
	if !strings.Contains(out, "Volume: pvc describe/tmp") || !strings.Contains(out, "action: skip") || !strings.Contains(out, "rule:   global policy #0") {
		t.Fatalf("policy check --volume-from:\n%s", out)
	}
}
