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
// kopia identity): refused at apply when the claims show it, and at each
// firing when a label makes it so later, with a condition on the policy
// that clears once the sources are disjoint again.
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

	// ...until a label makes both match one claim: the firing mints
	// nothing, says which claim and which sources, and the policy shows it.
	kubectl(t, nil, 0, "-n", ns, "label", "pvc", "wal", "tier=db")
	stdout, stderr, code := runSnapflow(t, "snapshot", "now", "--policy", "split", "-n", ns)
	if code == 0 || !strings.Contains(stderr, `PVC "wal" is covered by spec.sources[0] and spec.sources[1]`) || !strings.Contains(stderr, "nothing was created") {
		t.Fatalf("snapshot now with overlapping sources exited %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if c := cond(); c == nil || c.Status != metav1.ConditionTrue || c.Reason != "PVCCoveredTwice" || !strings.Contains(c.Message, `PVC "wal"`) {
		t.Fatalf("policy condition %s = %+v", wellknown.ConditionSourcesOverlap, c)
	}
	if n := len(policySnapshots(t, ns, "split")); n != 0 {
		t.Fatalf("%d Snapshots were minted with two sources covering one PVC", n)
	}

	// Disjoint again: the firing mints one Snapshot per claim and the
	// condition clears.
	kubectl(t, nil, 0, "-n", ns, "label", "pvc", "wal", "tier-")
	if stdout, stderr, code := runSnapflow(t, "snapshot", "now", "--policy", "split", "-n", ns); code != 0 {
		t.Fatalf("snapshot now with disjoint sources exited %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if c := cond(); c == nil || c.Status != metav1.ConditionFalse || c.Reason != "NoOverlap" {
		t.Fatalf("policy condition after a disjoint firing = %+v", c)
	}
	if n := len(policySnapshots(t, ns, "split")); n != 2 {
		t.Fatalf("%d Snapshots minted, want one per claim (db, wal)", n)
	}
}
