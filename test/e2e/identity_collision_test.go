package e2e

import (
	"strings"
	"testing"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/functions/snapshot"
)

// Two policies admitted with distinct identities come to share one when the
// repository's identityDefaults change: admission saw no collision, so the
// snapshot function checks again before each backup. The newer policy's run
// stops, naming the older one and the field to change; the older one's
// lineage goes on.
func TestIdentityCollisionIsCheckedAgainBeforeABackup(t *testing.T) {
	const ns = "id-collide"
	backupNamespace(t, ns, 1, "")
	kubectl(t, policy(ns, "first", ""), 0, "apply", "-f", "-")
	kubectl(t, policy(ns, "second", ""), 0, "apply", "-f", "-")
	kubectl(t, nil, 0, "-n", ns, "patch", "repository", "primary", "--type", "merge",
		"-p", `{"spec":{"identityDefaults":{"usernameExpr":"\"team\""}}}`)

	kubectl(t, snapshotOf(ns, "second-now", "second"), 0, "apply", "-f", "-")
	s := waitSnapshot(t, ns, "second-now", snapv1.SnapshotFailed)
	f := s.Status.Failure
	if f == nil || f.Class != snapshot.ReasonIdentityCollision || f.Retryable || !strings.Contains(f.Message, "SnapshotPolicy "+ns+"/first") ||
		!strings.Contains(f.Message, "team@"+ns) || !strings.Contains(f.Message, "spec.identity") {
		t.Fatalf("failure %+v: want %s naming %s/first, the shared identity and spec.identity", f, snapshot.ReasonIdentityCollision, ns)
	}
	if s.Status.Job != nil || s.Status.Snapshot != nil {
		t.Fatalf("the stopped run started a mover or recorded data: job %+v snapshot %+v", s.Status.Job, s.Status.Snapshot)
	}

	kubectl(t, snapshotOf(ns, "first-now", "first"), 0, "apply", "-f", "-")
	if got := waitSnapshot(t, ns, "first-now", snapv1.SnapshotSucceeded); got.Status.Snapshot == nil {
		t.Fatal("the older policy's backup succeeded without recording its kopia snapshot")
	}
}
