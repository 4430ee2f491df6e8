package e2e

import (
	"strings"
	"testing"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
)

// snapflow logs prints a run's mover output under a header per pod; once
// the Jobs are gone it prints what status kept of a failure.
func TestLogsOfARun(t *testing.T) {
	const ns = "cli-logs"
	backupNamespace(t, ns, 3, "")
	kubectl(t, policy(ns, "app", "  copyMethod: Direct\n"), 0, "apply", "-f", "-")
	kubectl(t, snapshotOf(ns, "first", "app"), 0, "create", "-f", "-")
	s := waitSnapshot(t, ns, "first", snapv1.SnapshotSucceeded)
	out, errOut, code := runSnapflow(t, "logs", "-n", ns, "first")
	if code != 0 || !strings.Contains(out, "container mover") || !strings.Contains(out, "mover: snapshot "+s.Status.Snapshot.KopiaSnapshotID) {
		t.Fatalf("snapflow logs: exit %d\n%s%s", code, out, errOut)
	}

	// A restore's mover.
	kubectl(t, restoreOf(ns, "back", "{snapshotRef: {name: first}}", "{pvc: {name: restored, capacity: 1Gi}}"), 0, "apply", "-f", "-")
	waitRestore(t, ns, "back", snapv1.RestoreCompleted)
	if out, errOut, code := runSnapflow(t, "logs", "-n", ns, "restore", "back"); code != 0 || !strings.Contains(out, "container mover") {
		t.Fatalf("snapflow logs restore: exit %d\n%s%s", code, out, errOut)
	}
	// -f on a run just created waits for its pod and follows it to the end.
	kubectl(t, snapshotOf(ns, "second", "app"), 0, "create", "-f", "-")
	out, errOut, code = runSnapflow(t, "logs", "-n", ns, "-f", "second")
	if code != 0 || !strings.Contains(out, "mover: snapshot ") {
		t.Fatalf("snapflow logs -f: exit %d\n%s%s", code, out, errOut)
	}

	// A run that fails: its Jobs removed, status still tells the end.
	failUploadLimit(t, ns, "bad")
	if out, errOut, code := runSnapflow(t, "logs", "-n", ns, "snapshot", "bad"); code != 0 || !strings.Contains(out, "UploadLimitReached") {
		t.Fatalf("snapflow logs of a failed run: exit %d\n%s%s", code, out, errOut)
	}
	kubectl(t, nil, 0, "-n", ns, "delete", "jobs", "-l", wellknown.LabelSnapshot+"=bad", "--wait=true")
	// (-f too: a run that has ended gets no new pod to wait for.)
	out, errOut, code = runSnapflow(t, "logs", "-n", ns, "-f", "snapshot", "bad")
	if code != 0 || !strings.Contains(out, "no Jobs any more") || !strings.Contains(out, "UploadLimitReached") {
		t.Fatalf("snapflow logs after the Jobs went: exit %d\n%s%s", code, out, errOut)
	}

	if _, errOut, code := runSnapflow(t, "logs", "-n", ns, "restore", "nope"); code == 0 || !strings.Contains(errOut, "restore "+ns+"/nope not found") {
		t.Fatalf("logs of a missing restore: exit %d, %s", code, errOut)
	}
}
