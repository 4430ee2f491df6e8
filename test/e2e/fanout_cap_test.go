package e2e

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
)

// A firing that would expand past 400 Snapshots creates none, and says so
// on the policy, on the schedule and to the CLI user; the policy's
// condition clears once a firing fits again.
func TestFiringOverTheCapCreatesNothingAndSaysWhy(t *testing.T) {
	const ns = "fanout-cap"
	backupNamespace(t, ns, 1, "")
	var b strings.Builder
	for i := 0; i < 401; i++ {
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: vol-%03d, namespace: %s, labels: {fleet: \"yes\"}}\nspec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}\n", i, ns)
	}
	kubectl(t, []byte(b.String()), 0, "apply", "-f", "-")
	kubectl(t, []byte(`
apiVersion: kopiur.home-operations.com/v1alpha1
kind: SnapshotPolicy
metadata: {name: fleet, namespace: `+ns+`}
spec:
  repository: {name: primary}
  copyMethod: Clone
  groupBy: None
  sources: [{pvcSelector: {labelSelector: {matchLabels: {fleet: "yes"}}}}]
---
apiVersion: kopiur.home-operations.com/v1alpha1
kind: SnapshotSchedule
metadata: {name: fleet-nightly, namespace: `+ns+`}
spec:
  policyRef: {name: fleet}
  schedule: {cron: "0 3 * * *", timezone: UTC, runOnCreate: true}
`), 0, "apply", "-f", "-")

	policyCond := func() *metav1.Condition {
		var p snapv1.SnapshotPolicy
		if err := env.Client.Get(testContext(t), clientKey(ns, "fleet"), &p); err != nil {
			t.Fatal(err)
		}
		return meta.FindStatusCondition(p.Status.Conditions, wellknown.ConditionFanoutCapped)
	}

	// The schedule's first firing (runOnCreate) is refused and recorded on
	// the policy; nothing else fires it before the CLI below.
	eventually(t, func() error {
		if c := policyCond(); c == nil || c.Status != metav1.ConditionTrue || c.Reason != "TooManyChildren" {
			return fmt.Errorf("policy condition %s after the schedule's firing = %+v", wellknown.ConditionFanoutCapped, c)
		}
		return nil
	})

	// The CLI refuses with the count and the fix.
	stdout, stderr, code := runSnapflow(t, "snapshot", "now", "--policy", "fleet", "-n", ns)
	if code == 0 || !strings.Contains(stderr, "401") || !strings.Contains(stderr, "over the cap of 400") || !strings.Contains(stderr, "Narrow the pvcSelector") {
		t.Fatalf("snapshot now over the cap exited %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if c := policyCond(); c == nil || c.Status != metav1.ConditionTrue || c.Reason != "TooManyChildren" || !strings.Contains(c.Message, "nothing was created") {
		t.Fatalf("policy condition %s = %+v", wellknown.ConditionFanoutCapped, c)
	}

	// The schedule's firing is refused the same way; its slot is held and
	// its Scheduled condition says why nothing was created.
	eventually(t, func() error {
		tick(t, "cap-1") // again while the watch cache may lag
		s := getSchedule(t, ns, "fleet-nightly")
		c := meta.FindStatusCondition(s.Status.Conditions, "Scheduled")
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != "FiringFailed" || !strings.Contains(c.Message, "over the cap of 400") {
			return fmt.Errorf("Scheduled condition %+v", c)
		}
		return nil
	})
	if n := len(policySnapshots(t, ns, "fleet")); n != 0 {
		t.Fatalf("%d Snapshots were created over the cap", n)
	}

	// Narrowed to one PVC, a firing fits and the policy's condition clears.
	kubectl(t, nil, 0, "-n", ns, "label", "pvc", "vol-000", "pick=one")
	kubectl(t, nil, 0, "-n", ns, "patch", "snapshotpolicy", "fleet", "--type=merge", "-p",
		`{"spec":{"sources":[{"pvcSelector":{"labelSelector":{"matchLabels":{"pick":"one"}}}}]}}`)
	if stdout, stderr, code := runSnapflow(t, "snapshot", "now", "--policy", "fleet", "-n", ns); code != 0 {
		t.Fatalf("snapshot now after narrowing exited %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if c := policyCond(); c == nil || c.Status != metav1.ConditionFalse || c.Reason != "WithinCap" {
		t.Fatalf("policy condition after a fitting firing = %+v", c)
	}
	// The schedule's held slot now fires too.
	eventually(t, func() error {
		tick(t, "cap-2")
		s := getSchedule(t, ns, "fleet-nightly")
		if c := meta.FindStatusCondition(s.Status.Conditions, "Scheduled"); c == nil || c.Reason != "Fired" || s.Status.LastSchedule == nil {
			return fmt.Errorf("the held slot has not fired: Scheduled %+v, lastSchedule %+v", c, s.Status.LastSchedule)
		}
		return nil
	})
}
