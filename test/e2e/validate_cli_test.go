package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/test/harness"
)

// snapflow validate checks a policy's resourcePolicy ConfigMap from the
// given files, says when it is not among them, and with --cluster reads it
// from the cluster, as the webhook will once the files are applied.
func TestValidateResolvesVolumePolicies(t *testing.T) {
	const ns = "validate-cli"
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pol := func(recipe string) string {
		return fmt.Sprintf("%s  resourcePolicy: {kind: configmap, name: %s}\n", policy(ns, "app", ""), recipe)
	}
	recipe := func(name, action string) string {
		return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s, namespace: %s}\ndata: {policies.yaml: \"version: v1\\nvolumePolicies: [{conditions: {}, action: {type: %s}}]\\n\"}\n", name, ns, action)
	}
	// In the same files: an invalid recipe denies the policy.
	both := t.TempDir()
	for name, body := range map[string]string{"policy.yaml": pol("recipe"), "recipe.yaml": recipe("recipe", "shred")} {
		if err := os.WriteFile(filepath.Join(both, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if out, errOut, code := runSnapflow(t, "validate", "-f", both); code != 1 || !strings.Contains(out, `"shred" is not an action type`) {
		t.Fatalf("an invalid recipe in the files: exit %d\n%s%s", code, out, errOut)
	}
	// Not among the files: said, and allowed (the cluster may hold it).
	alone := write("alone.yaml", pol("recipe"))
	if out, errOut, code := runSnapflow(t, "validate", "-f", alone); code != 0 || !strings.Contains(out, "ConfigMap "+ns+"/recipe is not among the given manifests") {
		t.Fatalf("a recipe not given: exit %d\n%s%s", code, out, errOut)
	}
	// With --cluster it is read from the cluster: a broken one denies, a
	// good one passes without the warning.
	backupNamespace(t, ns, 1, "")
	kubectl(t, []byte(recipe("recipe", "fs-backup")+"---\n"+recipe("broken", "shred")), 0, "apply", "-f", "-")
	if out, errOut, code := runSnapflow(t, "validate", "--cluster", "-f", alone); code != 0 || strings.Contains(out, "not among the given manifests") {
		t.Fatalf("--cluster with a good recipe: exit %d\n%s%s", code, out, errOut)
	}
	broken := write("broken.yaml", pol("broken"))
	if out, errOut, code := runSnapflow(t, "validate", "--cluster", "-f", broken); code != 1 || !strings.Contains(out, "ConfigMap "+ns+"/broken holds invalid volume policies") {
		t.Fatalf("--cluster with a broken recipe: exit %d\n%s%s", code, out, errOut)
	}
	// The files still win over the cluster.
	if out, errOut, code := runSnapflow(t, "validate", "--cluster", "-f", both); code != 1 || !strings.Contains(out, `"shred"`) {
		t.Fatalf("--cluster with the recipe in the files: exit %d\n%s%s", code, out, errOut)
	}
}

// A section of the global volume policies that never applies (only its
// volumePolicies do) is reported at every run, also when it was added
// after start-up: a Warning Event on each Snapshot, and an admission
// warning on each Velero Backup.
func TestIgnoredGlobalSectionsAreReportedPerRun(t *testing.T) {
	const ns = "global-sections"
	ctx := testContext(t)
	key := client.ObjectKey{Namespace: harness.WebhookNamespace, Name: harness.GlobalVolumePoliciesConfigMap}
	var cm corev1.ConfigMap
	if err := env.Client.Get(ctx, key, &cm); err != nil {
		t.Fatal(err)
	}
	orig := cm.Data["policies.yaml"]
	cm.Data["policies.yaml"] = orig + "includeExcludePolicy:\n  excludedNamespaceScopedResources: [secrets]\n"
	if err := env.Client.Update(ctx, &cm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		var now corev1.ConfigMap
		if err := env.Client.Get(ctx, key, &now); err == nil {
			now.Data["policies.yaml"] = orig
			_ = env.Client.Update(ctx, &now)
		}
	})

	backupNamespace(t, ns, 2, "")
	kubectl(t, policy(ns, "app", "  copyMethod: Direct\n"), 0, "apply", "-f", "-")
	kubectl(t, snapshotOf(ns, "one", "app"), 0, "create", "-f", "-")
	waitSnapshot(t, ns, "one", snapv1.SnapshotSucceeded)
	eventually(t, func() error {
		var list corev1.EventList
		if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.InvolvedObject.Kind == "Snapshot" && e.InvolvedObject.Name == "one" && e.Reason == "GlobalVolumePolicySectionsIgnored" &&
				strings.Contains(e.Message, "includeExcludePolicy") {
				return nil
			}
		}
		return fmt.Errorf("no GlobalVolumePolicySectionsIgnored Event on Snapshot %s/one", ns)
	})
	ensureNamespace(t, "velero", "")
	eventually(t, func() error {
		res := kubectl(t, []byte("apiVersion: velero.io/v1\nkind: Backup\nmetadata: {name: sections, namespace: velero}\nspec: {includedNamespaces: [billing]}\n"), 0, "create", "--dry-run=server", "-f", "-")
		if !strings.Contains(res.Stderr, "includeExcludePolicy") || !strings.Contains(res.Stderr, "ignored globally") {
			return fmt.Errorf("no warning about the ignored section: %s", res.Stderr)
		}
		return nil
	})
}
