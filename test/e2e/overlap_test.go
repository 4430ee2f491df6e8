package e2e

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
)

// Two sources of one policy may not back up one PVC (both would write one
// kopia identity): refused at apply when the claims show it, and left out
// of each firing when a label makes it so later (the other claims are
// still backed up), with a condition on the policy that clears once the
// sources are disjoint again.
func TestSourcesCoveringOnePVCAreRefused(t *testing.T) {
	const ns = "source-overlap"
	backupNamespace(t, ns, 1, "")
	kubectl(t, []byte(`
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: db, namespace: `+ns+`, labels: {app: pg, tier: db}}
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: wal, namespace: `+ns+`, labels: {app: pg}}
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
`), 0, "apply", "-f", "-")

	// A pvc source and a selector matching the same claim: refused at apply.
	res := kubectl(t, []byte(`
apiVersion: kopiur.home-operations.com/v1alpha1
kind: SnapshotPolicy
metadata: {name: both, namespace: `+ns+`}
spec:
  repository: {name: primary}
  copyMethod: Clone
  groupBy: None
  sources: [{pvc: {name: db}}, {pvcSelector: {labelSelector: {matchLabels: {app: pg}}}}]
`), 1, "apply", "-f", "-")
	if !strings.Contains(res.Stderr, "spec.sources[1]") || !strings.Contains(res.Stderr, "is covered by spec.sources[0] and spec.sources[1]") || !strings.Contains(res.Stderr, "db") {
		t.Fatalf("apply of overlapping sources: %s", res.Stderr)
	}

	// Disjoint selectors are admitted...
	kubectl(t, []byte(`
apiVersion: kopiur.home-operations.com/v1alpha1
kind: SnapshotPolicy
metadata: {name: split, namespace: `+ns+`}
spec:
  repository: {name: primary}
  copyMethod: Clone
  groupBy: None
  sources:
    - pvcSelector: {labelSelector: {matchLabels: {tier: db}}}
    - pvcSelector: {labelSelector: {matchLabels: {role: wal}}}
`), 0, "apply", "-f", "-")
	kubectl(t, nil, 0, "-n", ns, "label", "pvc", "wal", "role=wal")

	cond := func() *metav1.Condition {
		var p snapv1.SnapshotPolicy
		if err := env.Client.Get(testContext(t), clientKey(ns, "split"), &p); err != nil {
			t.Fatal(err)
		}
		return meta.FindStatusCondition(p.Status.Conditions, wellknown.ConditionSourcesOverlap)
	}

	// ...until a label makes both match one claim: the firing leaves that
	// claim out, says which claim and which sources, still backs up the
	// other, and the policy shows it.
	kubectl(t, nil, 0, "-n", ns, "label", "pvc", "wal", "tier=db")
	stdout, stderr, code := runSnapflow(t, "snapshot", "now", "--policy", "split", "-n", ns, "--wait=false")
	if code == 0 || !strings.Contains(stderr, `PVC "wal" is covered by spec.sources[0] and spec.sources[1]`) || !strings.Contains(stderr, "left out of this firing") || !strings.Contains(stderr, "created 1 Snapshot(s)") {
		t.Fatalf("snapshot now with overlapping sources exited %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if c := cond(); c == nil || c.Status != metav1.ConditionTrue || c.Reason != "PVCCoveredTwice" || !strings.Contains(c.Message, `PVC "wal"`) {
		t.Fatalf("policy condition %s = %+v", wellknown.ConditionSourcesOverlap, c)
	}
	snaps := policySnapshots(t, ns, "split")
	if len(snaps) != 1 || snaps[0].Spec.Source == nil || snaps[0].Spec.Source.Target.PVC.Name != "db" {
		t.Fatalf("%d Snapshots minted, want only db's (wal is covered twice): %+v", len(snaps), snaps)
	}

	// Disjoint again: the firing mints one Snapshot per claim and the
	// condition clears.
	kubectl(t, nil, 0, "-n", ns, "label", "pvc", "wal", "tier-")
	if stdout, stderr, code := runSnapflow(t, "snapshot", "now", "--policy", "split", "-n", ns, "--wait=false"); code != 0 {
		t.Fatalf("snapshot now with disjoint sources exited %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if c := cond(); c == nil || c.Status != metav1.ConditionFalse || c.Reason != "NoOverlap" {
		t.Fatalf("policy condition after a disjoint firing = %+v", c)
	}
	// (Two firings in one second share their names, so count claims.)
	covered := map[string]bool{}
	for _, s := range policySnapshots(t, ns, "split") {
		if s.Spec.Source != nil {
			covered[s.Spec.Source.Target.PVC.Name] = true
		}
	}
	if !covered["db"] || !covered["wal"] || len(covered) != 2 {
		t.Fatalf("claims backed up: %v, want db and wal", covered)
	}
}
