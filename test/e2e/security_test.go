package e2e

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
)

// moverOf is the identity a pod of ns gets when it runs as the chart's mover
// ServiceAccount, as every mover pod (and any pod of a tenant) can.
func moverOf(ns string) string { return "system:serviceaccount:" + ns + ":" + chartRelease + "-mover" }

// asMover runs kubectl as ns's mover and returns its result.
func asMover(t *testing.T, ns string, args ...string) (int, string) {
	t.Helper()
	res, err := env.Kubectl(testContext(t), nil, append([]string{"--as", moverOf(ns)}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	return res.ExitCode, res.Stdout + res.Stderr
}

// A mover's rights end at its namespace: from a pod of tenant A, the status
// of tenant B's objects (which the functions act on) and every
// ClusterRepository's are out of reach.
func TestMoverCannotWriteAnotherNamespace(t *testing.T) {
	const a, b = "sec-rbac-a", "sec-rbac-b"
	repoNamespace(t, a, "/repository", "")
	repoNamespace(t, b, "/repository", "")
	patch := []string{"--subresource=status", "--type=merge", "--dry-run=server", "-p", `{"status":{"phase":"Failed"}}`}

	// Its own namespace: allowed (the harness binds it as the chart does).
	eventually(t, func() error {
		if code, out := asMover(t, a, append([]string{"-n", a, "patch", "repository", "primary"}, patch...)...); code != 0 {
			return fmt.Errorf("the mover of %s may not patch its own Repository's status yet: %s", a, out)
		}
		return nil
	})
	for _, args := range [][]string{
		{"-n", b, "patch", "repository", "primary"},
		{"patch", "clusterrepository", "shared"},
	} {
		code, out := asMover(t, a, append(args, patch...)...)
		if code == 0 || !strings.Contains(out, "forbidden") {
			t.Errorf("the mover of %s ran %v: exit %d, want forbidden:\n%s", a, args, code, out)
		}
	}
}

// A mover writes its own Snapshot's status, so what the snapshot function
// deletes when a run ends may not be named by status: a forged
// status.staged pointing at the application's PVC leaves it in place.
func TestForgedStagedStatusDeletesNothing(t *testing.T) {
	const ns = "sec-staged"
	ctx := testContext(t)
	backupNamespace(t, ns, 2, "")
	kubectl(t, policy(ns, "app", "  copyMethod: Direct\n"), 0, "apply", "-f", "-")
	kubectl(t, snapshotOf(ns, "first", "app"), 0, "create", "-f", "-")
	waitSnapshot(t, ns, "first", snapv1.SnapshotSucceeded)
	var before corev1.PersistentVolumeClaim
	if err := env.Client.Get(ctx, clientKey(ns, "app-data"), &before); err != nil {
		t.Fatal(err)
	}

	// Clearing the conditions makes the function finish the run again,
	// and unstage what status now names.
	forged := `{"status":{"conditions":null,"staged":{"pvcName":"app-data","copyMethod":"Clone","ready":true}}}`
	eventually(t, func() error {
		if code, out := asMover(t, ns, "-n", ns, "patch", "snapshot", "first", "--subresource=status", "--type=merge", "-p", forged); code != 0 {
			return fmt.Errorf("forge status: %s", out)
		}
		return nil
	})
	eventually(t, func() error {
		var s snapv1.Snapshot
		if err := env.Client.Get(ctx, clientKey(ns, "first"), &s); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(s.Status.Conditions, wellknown.ConditionReady); c == nil {
			return fmt.Errorf("the function has not finished the run again: %+v", s.Status.Conditions)
		}
		return nil
	})
	var after corev1.PersistentVolumeClaim
	if err := env.Client.Get(ctx, clientKey(ns, "app-data"), &after); err != nil || after.UID != before.UID || after.DeletionTimestamp != nil {
		t.Fatalf("the application's PVC must survive a forged status.staged: err %v, uid %s (was %s), deleting %v", err, after.UID, before.UID, after.DeletionTimestamp)
	}
}

// A tenant points its own Snapshot's status at another namespace's
// repository and kopia snapshot, then deletes it: the cleanup function
// refuses to use the other namespace's keys, and the victim's backup stays.
func TestDecoySnapshotCannotDeleteAnotherNamespacesBackup(t *testing.T) {
	const attacker, victim = "sec-decoy-a", "sec-decoy-b"
	backupNamespace(t, victim, 2, "")
	kubectl(t, policy(victim, "app", "  copyMethod: Direct\n"), 0, "apply", "-f", "-")
	ids := backups(t, victim, "app", "precious")
	backupNamespace(t, attacker, 1, "")
	kubectl(t, policy(attacker, "app", "  copyMethod: Direct\n"), 0, "apply", "-f", "-")
	backups(t, attacker, "app", "decoy")

	forged := fmt.Sprintf(`{"status":{"resolved":{"repository":{"kind":"Repository","name":"primary","namespace":%q}},"snapshot":{"kopiaSnapshotID":%q}}}`, victim, ids["precious"])
	eventually(t, func() error {
		if code, out := asMover(t, attacker, "-n", attacker, "patch", "snapshot", "decoy", "--subresource=status", "--type=merge", "-p", forged); code != 0 {
			return fmt.Errorf("forge status: %s", out)
		}
		return nil
	})
	kubectl(t, nil, 0, "-n", attacker, "delete", "snapshot", "decoy", "--wait=false")
	eventually(t, func() error {
		var s snapv1.Snapshot
		if err := env.Client.Get(testContext(t), clientKey(attacker, "decoy"), &s); err != nil {
			return err
		}
		c := meta.FindStatusCondition(s.Status.Conditions, wellknown.ConditionDeletionHeld)
		if c == nil || c.Reason != "RepositoryNotAllowed" || !strings.Contains(c.Message, victim) {
			return fmt.Errorf("want DeletionHeld RepositoryNotAllowed naming %s, got %+v", victim, s.Status.Conditions)
		}
		return nil
	})
	if left := kopiaIDs(t, victim); !left[ids["precious"]] {
		t.Fatalf("the victim's kopia snapshot %s was deleted through a decoy: %v", ids["precious"], left)
	}
	// The decoy is released the way its condition says, keeping the data.
	kubectl(t, nil, 0, "-n", attacker, "annotate", "snapshot", "decoy", wellknown.AnnotationSkipSnapshotCleanup+"=true")
	waitGone(t, attacker, "decoy")
	if left := kopiaIDs(t, victim); !left[ids["precious"]] {
		t.Fatalf("releasing the decoy deleted the victim's kopia snapshot: %v", left)
	}
}
