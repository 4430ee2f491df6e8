package e2e

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/moverjob"
)

// A Persistent mover cache is a PVC per source and repository, owned by the
// policy: every run mounts the same one, so the second run starts with the
// first one's kopia cache instead of an empty directory, and none of them
// leaves kopia's connection config (the storage keys) on it.
func TestPersistentMoverCacheOutlivesTheRun(t *testing.T) {
	const ns = "cache-persistent"
	ctx := testContext(t)
	backupNamespace(t, ns, 3, "")
	kubectl(t, policy(ns, "app", "  copyMethod: Direct\n  mover: {cache: {mode: Persistent, capacity: 2Gi}}\n"), 0, "apply", "-f", "-")
	claim := moverjob.CacheClaimName("app", "app-data", snapv1.RepositoryRef{Kind: snapv1.KindRepository, Namespace: ns, Name: "primary"})

	for i, name := range []string{"c1", "c2"} {
		kubectl(t, snapshotOf(ns, name, "app"), 0, "apply", "-f", "-")
		waitSnapshot(t, ns, name, snapv1.SnapshotSucceeded)
		var jobs batchv1.JobList
		if err := env.Client.List(ctx, &jobs, client.InNamespace(ns), client.MatchingLabels{wellknown.LabelSnapshot: name}); err != nil || len(jobs.Items) != 1 {
			t.Fatalf("jobs of %s: %d (%v)", name, len(jobs.Items), err)
		}
		mounted := ""
		for _, v := range jobs.Items[0].Spec.Template.Spec.Volumes {
			if v.Name == "cache" && v.PersistentVolumeClaim != nil {
				mounted = v.PersistentVolumeClaim.ClaimName
			}
		}
		if mounted != claim {
			t.Fatalf("run %d mounts cache %q, want the persistent claim %q", i+1, mounted, claim)
		}
		dir := env.Functions.Node.PVCDir(ns, claim)
		// The connection config names the storage with its keys: it lives
		// in the pod's memory volume, never on the claim.
		if _, err := os.Stat(filepath.Join(dir, "repository.config")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("run %d left kopia's connection config on the cache claim (%v)", i+1, err)
		}
		if i == 0 {
			ents, err := os.ReadDir(dir)
			if err != nil || len(ents) == 0 {
				t.Fatalf("the first run left no kopia cache on the claim (%d entries, %v)", len(ents), err)
			}
			// As an earlier version left it: the next run removes it.
			if err := os.WriteFile(filepath.Join(dir, "repository.config"), []byte("{}"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	var pvc corev1.PersistentVolumeClaim
	if err := env.Client.Get(ctx, clientKey(ns, claim), &pvc); err != nil {
		t.Fatal(err)
	}
	owned := false
	for _, o := range pvc.OwnerReferences {
		owned = owned || (o.Kind == "SnapshotPolicy" && o.Name == "app")
	}
	if !owned || pvc.Spec.Resources.Requests.Storage().String() != "2Gi" {
		t.Fatalf("cache claim owners %+v size %v: want the policy and 2Gi", pvc.OwnerReferences, pvc.Spec.Resources.Requests.Storage())
	}
}
