package e2e

import (
	"strings"
	"testing"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
)

// Deleting a Repository that a run still uses, and that holds backups, is
// allowed (it is how its owner retires it) but kubectl prints what that
// means: which runs wait, and that the data stays and its deletions wait.
func TestDeletingARepositoryInUseWarns(t *testing.T) {
	const ns = "repo-delete-warn"
	backupNamespace(t, ns, 2, "")
	kubectl(t, policy(ns, "app", "  copyMethod: Direct\n"), 0, "apply", "-f", "-")
	kubectl(t, snapshotOf(ns, "kept", "app"), 0, "create", "-f", "-")
	waitSnapshot(t, ns, "kept", snapv1.SnapshotSucceeded)
	// A run that cannot start yet: its policy does not exist.
	kubectl(t, []byte(`
apiVersion: kopiur.home-operations.com/v1alpha1
kind: Snapshot
metadata: {name: queued, namespace: `+ns+`}
spec:
  policyRef: {name: not-yet}
  repository: {name: primary}
`), 0, "create", "-f", "-")

	res := kubectl(t, nil, 0, "-n", ns, "delete", "repository", "primary")
	for _, want := range []string{
		"Warning: Repository " + ns + "/primary is in use by 1 run(s) in progress (Snapshot " + ns + "/queued)",
		"Warning: 1 Snapshot(s) keep their data in Repository " + ns + "/primary",
		"RepositoryMissing",
	} {
		if !strings.Contains(res.Stderr, want) {
			t.Errorf("kubectl delete's output lacks %q:\n%s", want, res.Stderr)
		}
	}
	// An unused one goes without a word.
	repoNamespace(t, ns+"-unused", "/repository", "")
	if res := kubectl(t, nil, 0, "-n", ns+"-unused", "delete", "repository", "primary"); strings.Contains(res.Stderr, "Warning") {
		t.Fatalf("deleting an unused repository warned:\n%s", res.Stderr)
	}
}
