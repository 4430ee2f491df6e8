package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
)

// Deleting a namespace must not delete the backups needed to restore it:
// with onNamespaceDelete Orphan (the default) its Snapshots are released
// and their kopia snapshots stay in the repository. No kube-controller-
// manager runs here, so the test does the namespace controller's part:
// it deletes the namespace's objects once the namespace is terminating,
// then finalizes it.
func TestDeletingANamespaceKeepsItsBackups(t *testing.T) {
	const ns = "ns-delete"
	backupNamespace(t, ns, 2, "")

	// Delete is refused on a Repository: nothing could act on it.
	res, err := env.Kubectl(testContext(t), []byte(fmt.Sprintf(`
apiVersion: kopiur.home-operations.com/v1alpha1
kind: Repository
metadata: {name: doomed, namespace: %s}
spec:
  backend: {filesystem: {path: /other, volume: {pvc: {name: kopia-repo}}}}
  encryption: {passwordSecretRef: {name: kopia-password, key: KOPIA_PASSWORD}}
  onNamespaceDelete: Delete
`, ns)), "apply", "-f", "-")
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode == 0 || !strings.Contains(res.Stderr, "spec.onNamespaceDelete") || !strings.Contains(res.Stderr, "ClusterRepository") {
		t.Fatalf("onNamespaceDelete: Delete on a Repository: exit %d\n%s%s\nwant a refusal naming the field and the way out", res.ExitCode, res.Stdout, res.Stderr)
	}

	kubectl(t, policy(ns, "app", "  copyMethod: Direct\n"), 0, "apply", "-f", "-")
	ids := backups(t, ns, "app", "monday", "tuesday")
	kubectl(t, nil, 0, "delete", "namespace", ns, "--wait=false")
	eventually(t, func() error {
		var n corev1.Namespace
		if err := env.Client.Get(testContext(t), client.ObjectKey{Name: ns}, &n); err != nil {
			return err
		}
		if n.DeletionTimestamp == nil {
			return fmt.Errorf("namespace %s is not terminating yet", ns)
		}
		return nil
	})
	// As the namespace controller would: every Snapshot first.
	kubectl(t, nil, 0, "-n", ns, "delete", "snapshots", "--all", "--wait=false")
	waitGone(t, ns, "monday")
	waitGone(t, ns, "tuesday")
	left := kopiaIDs(t, ns)
	if !left[ids["monday"]] || !left[ids["tuesday"]] {
		t.Fatalf("onNamespaceDelete Orphan (the default) must keep the kopia data of a deleted namespace: had %v, left %v", ids, left)
	}

	// Then the rest, and the namespace's own finalizer.
	kubectl(t, nil, 0, "-n", ns, "delete", "snapshotpolicies,repositories", "--all", "--wait=false")
	eventually(t, func() error {
		var repos snapv1.RepositoryList
		if err := env.Client.List(testContext(t), &repos, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(repos.Items) > 0 {
			return fmt.Errorf("repository %s still there: finalizers %v", repos.Items[0].Name, repos.Items[0].Finalizers)
		}
		return nil
	})
	kubectl(t, nil, 0, "-n", ns, "delete", "pvc,secrets,configmaps,jobs", "--all", "--wait=false")
	var n corev1.Namespace
	if err := env.Client.Get(testContext(t), client.ObjectKey{Name: ns}, &n); err != nil {
		t.Fatal(err)
	}
	n.Spec.Finalizers = nil
	body, _ := json.Marshal(n)
	kubectl(t, body, 0, "replace", "--raw", "/api/v1/namespaces/"+ns+"/finalize", "-f", "-")
	eventually(t, func() error {
		err := env.Client.Get(testContext(t), client.ObjectKey{Name: ns}, &corev1.Namespace{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("namespace %s still there (%v)", ns, err)
	})
}
