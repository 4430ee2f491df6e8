package e2e

import (
	"fmt"
	"os"
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
// first one's kopia cache instead of an empty directory.
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
		if i == 0 {
			ents, err := os.ReadDir(env.Functions.Node.PVCDir(ns, claim))
			if err != nil || len(ents) == 0 {
				t.Fatalf("the first run left no kopia cache on the claim (%d entries, %v)", len(ents), err)
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
		t.Fatal(fmt.Sprintf("cache claim owners %+v size %v: want the policy and 2Gi", pvc.OwnerReferences, pvc.Spec.Resources.Requests.Storage()))
	}
}
