package e2e

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/functions/snapshot"
	"github.com/snapflow/snapflow/test/harness"
)

// The suite's global baseline skips storageClass scratch and sends every
// other volume to fs-backup. One run over two PVCs shows both decisions.
func TestVolumePoliciesDecidePerVolumeAtRunTime(t *testing.T) {
	const ns = "vp-runtime"
	backupNamespace(t, ns, 1, "")
	kubectl(t, []byte(`
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: cache, namespace: `+ns+`, labels: {tier: app}}
spec: {storageClassName: scratch, accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: records, namespace: `+ns+`, labels: {tier: app}}
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
---
apiVersion: kopiur.home-operations.com/v1alpha1
kind: SnapshotPolicy
metadata: {name: tier, namespace: `+ns+`}
spec:
  repository: {name: primary}
  groupBy: None
  sources: [{pvcSelector: {labelSelector: {matchLabels: {tier: app}}}}]
`), 0, "apply", "-f", "-")
	writeFiles(t, env.Functions.Node.PVCDir(ns, "cache"), 2)
	writeFiles(t, env.Functions.Node.PVCDir(ns, "records"), 2)
	stdout, stderr, code := runSnapflow(t, "snapshot", "now", "--policy", "tier", "-n", ns)
	if code != 0 {
		t.Fatalf("snapshot now: %d\n%s\n%s", code, stdout, stderr)
	}
	byPVC := map[string]snapv1.Snapshot{}
	for _, s := range policySnapshots(t, ns, "tier") {
		byPVC[s.Spec.Source.Target.PVC.Name] = s
	}
	cache, records := byPVC["cache"], byPVC["records"]
	dc, dr := onlyDecision(t, &cache), onlyDecision(t, &records)
	if cache.Status.Phase != snapv1.SnapshotSucceeded || cache.Status.Snapshot != nil || dc.Action != "skip" || dc.Source != "global" || *dc.RuleIndex != 0 ||
		dc.ConfigMap != harness.WebhookNamespace+"/"+harness.GlobalVolumePoliciesConfigMap || dc.ResourceVersion == "" {
		t.Errorf("skipped volume: phase %s snapshot %+v decision %+v", cache.Status.Phase, cache.Status.Snapshot, dc)
	}
	eventually(t, func() error { // Ready is written once the function publishes the end
		var s snapv1.Snapshot
		if err := env.Client.Get(testContext(t), clientKey(ns, cache.Name), &s); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(s.Status.Conditions, wellknown.ConditionReady); c == nil || !strings.Contains(c.Message, "skipped by rule 0 of the global") {
			return fmt.Errorf("the skipped run's Ready condition should say why: %+v", c)
		}
		return nil
	})
	if records.Status.Phase != snapv1.SnapshotSucceeded || records.Status.Snapshot == nil || dr.Action != "fs-backup" || *dr.RuleIndex != 1 || dr.CopyMethod != snapv1.CopyDirect {
		t.Errorf("fs-backup volume: phase %s decision %+v", records.Status.Phase, dr)
	}
	if records.Status.Staged != nil {
		t.Errorf("fs-backup reads the live volume; nothing should be staged: %+v", records.Status.Staged)
	}
	// kubectl shows the decisions to anyone who asks.
	out := kubectl(t, nil, 0, "-n", ns, "get", "snapshot", cache.Name, "-o", "jsonpath={.status.volumePolicies[0].action}/{.status.volumePolicies[0].source}/{.status.volumePolicies[0].ruleIndex}").Stdout
	if out != "skip/global/0" {
		t.Errorf("kubectl sees %q", out)
	}
	// The wide listing says why a Succeeded run has no kopia snapshot (the
	// default columns stay Kopiur's), and so do the CLI's table and
	// describe.
	if out := kubectl(t, nil, 0, "-n", ns, "get", "snapshot", cache.Name, "-o", "wide").Stdout; !strings.Contains(out, "SKIPPED") || !strings.Contains(out, "skipped by rule 0 of the global volume policies") {
		t.Errorf("kubectl get does not say why nothing was backed up:\n%s", out)
	}
	if out, _, code := runSnapflow(t, "describe", "snapshot", cache.Name, "-n", ns); code != 0 || !strings.Contains(out, "Kopia snapshot:    <none>: skipped by rule 0") {
		t.Errorf("describe (exit %d) does not say why nothing was backed up:\n%s", code, out)
	}
}

// A recipe rule comes first, so it overrides the baseline: here it asks for
// a CSI snapshot, which exercises VolumeSnapshot staging end to end.
func TestRecipeRuleOverridesTheBaselineWithASnapshot(t *testing.T) {
	const ns = "vp-recipe"
	backupNamespace(t, ns, 6, "")
	kubectl(t, []byte(`
apiVersion: v1
kind: ConfigMap
metadata: {name: recipe-policies, namespace: `+ns+`}
data:
  policies.yaml: |
    version: v1
    volumePolicies:
      - conditions: {pvcLabels: {app: data}}
        action: {type: snapshot, parameters: {snapshotClass: fast-snaps}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: labelled, namespace: `+ns+`, labels: {app: data}}
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
`), 0, "apply", "-f", "-")
	writeFiles(t, env.Functions.Node.PVCDir(ns, "labelled"), 6)
	kubectl(t, []byte(`
apiVersion: kopiur.home-operations.com/v1alpha1
kind: SnapshotPolicy
metadata: {name: app, namespace: `+ns+`}
spec:
  repository: {name: primary}
  copyMethod: Direct
  resourcePolicy: {kind: configmap, name: recipe-policies}
  sources: [{pvc: {name: labelled}}]
`), 0, "apply", "-f", "-")
	kubectl(t, snapshotOf(ns, "staged", "app"), 0, "create", "-f", "-")
	s := waitSnapshot(t, ns, "staged", snapv1.SnapshotSucceeded)
	d := onlyDecision(t, s)
	if d.Action != "snapshot" || d.Source != "recipe" || d.ConfigMap != ns+"/recipe-policies" || d.CopyMethod != snapv1.CopySnapshot {
		t.Fatalf("decision %+v", d)
	}
	if st := s.Status.Staged; st == nil || st.VolumeSnapshotName != "staged-src" || st.CopyMethod != snapv1.CopySnapshot {
		t.Fatalf("staged %+v", s.Status.Staged)
	}
	if *s.Status.Stats.FilesNew != 6 {
		t.Fatalf("backed up %d files from the staged copy, want 6", *s.Status.Stats.FilesNew)
	}
	// The staged objects are cleaned up once the run finished.
	eventually(t, func() error {
		out := kubectl(t, nil, 0, "-n", ns, "get", "pvc,volumesnapshots", "-o", "name").Stdout
		if strings.Contains(out, "staged-src") {
			return fmt.Errorf("staged objects left:\n%s", out)
		}
		return nil
	})
}

// The global baseline is re-read for every run: if it breaks after a
// Snapshot was admitted, the run fails with FailedValidation naming it.
func TestBrokenGlobalPoliciesFailTheRun(t *testing.T) {
	const ns = "vp-broken"
	repoNamespace(t, ns, "/r", "")
	waitRepository(t, ns, "primary", snapv1.RepositoryFailed) // not created yet: the run will wait
	kubectl(t, policy(ns, "app", ""), 0, "apply", "-f", "-")
	kubectl(t, snapshotOf(ns, "late", "app"), 0, "create", "-f", "-")

	var cm corev1.ConfigMap
	ctx := testContext(t)
	if err := env.Client.Get(ctx, clientKey(harness.WebhookNamespace, harness.GlobalVolumePoliciesConfigMap), &cm); err != nil {
		t.Fatal(err)
	}
	good := cm.Data["policies.yaml"]
	cm.Data["policies.yaml"] = "version: v1\nvolumePolicies:\n  - conditions: {capacity: nonsense}\n    action: {type: skip}\n"
	if err := env.Client.Update(ctx, &cm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		var cm corev1.ConfigMap
		if err := env.Client.Get(ctx, clientKey(harness.WebhookNamespace, harness.GlobalVolumePoliciesConfigMap), &cm); err == nil {
			cm.Data["policies.yaml"] = good
			_ = env.Client.Update(ctx, &cm)
		}
	})
	kubectl(t, nil, 0, "-n", ns, "patch", "repository", "primary", "--type=merge", "-p", `{"spec":{"create":{"enabled":true}}}`)
	s := waitSnapshot(t, ns, "late", snapv1.SnapshotFailed)
	if f := s.Status.Failure; f == nil || f.Class != snapshot.ReasonInvalidSpec || !strings.Contains(f.Message, harness.GlobalVolumePoliciesConfigMap) {
		t.Fatalf("failure %+v: want %s naming the ConfigMap", f, snapshot.ReasonInvalidSpec)
	}
}

func onlyDecision(t *testing.T, s *snapv1.Snapshot) snapv1.VolumePolicyDecision {
	t.Helper()
	if len(s.Status.VolumePolicies) != 1 {
		t.Fatalf("%s: want one volume policy decision, got %+v", s.Name, s.Status.VolumePolicies)
	}
	return s.Status.VolumePolicies[0]
}

// The functions, like the webhook, refuse to start without a valid
// baseline: running without it would back up what it means to skip.
func TestFunctionsRefuseToStartOnABadGlobalConfigMap(t *testing.T) {
	kubectl(t, []byte(`
apiVersion: v1
kind: ConfigMap
metadata: {name: broken-baseline, namespace: `+harness.WebhookNamespace+`}
data:
  policies.yaml: "version: v1\nvolumePolicies:\n  - conditions: {colour: blue}\n    action: {type: skip}\n"
`), 0, "apply", "-f", "-")
	for name, want := range map[string]string{
		"no-such-configmap": "does not exist",
		"broken-baseline":   "colour",
	} {
		_, stderr, code := runSnapflow(t, "function", "snapshot", "--addr", "127.0.0.1:0", "--namespace", harness.WebhookNamespace,
			"--global-backup-volume-policies-configmap", name)
		if code == 0 || !strings.Contains(stderr, "--global-backup-volume-policies-configmap") || !strings.Contains(stderr, want) {
			t.Errorf("%s: exit %d, stderr %q: want a refusal naming the flag and %q", name, code, stderr, want)
		}
	}
}
