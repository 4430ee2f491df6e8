package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/cleanup"
	"github.com/snapflow/snapflow/internal/kopia"
)

// kopiaIDs lists the snapshot ids in a namespace's primary repository.
func kopiaIDs(t *testing.T, ns string) map[string]bool {
	t.Helper()
	ctx := context.Background()
	dir := filepath.Join(env.Functions.Node.PVCDir(ns, "kopia-repo"), "repository")
	r, err := kopia.Open(ctx, kopia.OpenOptions{Backend: kopia.Backend{Filesystem: &kopia.FilesystemBackend{Path: dir}}, Password: "correct-horse", ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	list, err := r.List(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, s := range list {
		ids[s.ID] = true
	}
	return ids
}

func waitGone(t *testing.T, ns, name string) {
	t.Helper()
	eventually(t, func() error {
		var s snapv1.Snapshot
		err := env.Client.Get(testContext(t), clientKey(ns, name), &s)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("snapshot %s/%s still exists: phase %s cleanup %+v conditions %+v", ns, name, s.Status.Phase, s.Status.Cleanup, s.Status.Conditions)
	})
}

func backups(t *testing.T, ns, pol string, names ...string) map[string]string {
	t.Helper()
	var docs []string
	for _, n := range names {
		docs = append(docs, string(snapshotOf(ns, n, pol)))
	}
	kubectl(t, []byte(strings.Join(docs, "\n---\n")), 0, "create", "-f", "-")
	ids := map[string]string{}
	for _, n := range names {
		ids[n] = waitSnapshot(t, ns, n, snapv1.SnapshotSucceeded).Status.Snapshot.KopiaSnapshotID
	}
	return ids
}

func TestDeletionPolicies(t *testing.T) {
	const ns = "cleanup-policies"
	backupNamespace(t, ns, 3, "")
	kubectl(t, policy(ns, "app", "  copyMethod: Direct\n"), 0, "apply", "-f", "-")
	ids := backups(t, ns, "app", "gone", "kept", "skipped")
	kubectl(t, nil, 0, "-n", ns, "patch", "snapshot", "kept", "--type=merge", "-p", `{"spec":{"deletionPolicy":"Retain"}}`)
	kubectl(t, nil, 0, "-n", ns, "annotate", "snapshot", "skipped", wellknown.AnnotationSkipSnapshotCleanup+"=")
	kubectl(t, nil, 0, "-n", ns, "delete", "snapshot", "gone", "kept", "skipped", "--wait=false")
	for _, n := range []string{"gone", "kept", "skipped"} {
		waitGone(t, ns, n)
	}
	left := kopiaIDs(t, ns)
	if left[ids["gone"]] {
		t.Errorf("deletionPolicy Delete must remove kopia snapshot %s", ids["gone"])
	}
	if !left[ids["kept"]] || !left[ids["skipped"]] {
		t.Errorf("Retain and the skip annotation must keep the data: %v (have %v)", ids, left)
	}
}

func TestMassDeletionIsHeldUntilAcknowledged(t *testing.T) {
	const ns = "cleanup-breaker"
	backupNamespace(t, ns, 1, "")
	kubectl(t, policy(ns, "app", "  copyMethod: Direct\n"), 0, "apply", "-f", "-")
	var first, second []string
	for i := 0; i < 12; i++ {
		first = append(first, fmt.Sprintf("a%02d", i))
	}
	for i := 0; i < 13; i++ {
		second = append(second, fmt.Sprintf("b%02d", i))
	}
	ids := backups(t, ns, "app", append(append([]string{}, first...), second...)...)

	// A GitOps prune deletes them in two waves.
	kubectl(t, nil, 0, append([]string{"-n", ns, "delete", "snapshot", "--wait=false"}, first...)...)
	time.Sleep(1100 * time.Millisecond) // deletion timestamps have whole seconds
	kubectl(t, nil, 0, append([]string{"-n", ns, "delete", "snapshot", "--wait=false"}, second...)...)

	// All 25 are held: nothing leaves the repository.
	var cmd string
	eventually(t, func() error {
		for _, n := range append(append([]string{}, first...), second...) {
			var s snapv1.Snapshot
			if err := env.Client.Get(testContext(t), clientKey(ns, n), &s); err != nil {
				return err
			}
			c := meta.FindStatusCondition(s.Status.Conditions, wellknown.ConditionDeletionHeld)
			if s.Status.Phase != snapv1.SnapshotDeleting || c == nil || c.Status != "True" || c.Reason != cleanup.ReasonBreaker {
				return fmt.Errorf("%s: phase %s held %+v", n, s.Status.Phase, c)
			}
			i := strings.Index(c.Message, "kubectl annotate")
			if i < 0 {
				return fmt.Errorf("%s: condition %+v names no kubectl annotate command", n, c)
			}
			cmd = c.Message[i:]
		}
		return nil
	})
	var repo snapv1.Repository
	if err := env.Client.Get(testContext(t), clientKey(ns, "primary"), &repo); err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(repo.Status.Conditions, wellknown.ConditionMassDeletionHeld); c == nil || c.Status != "True" || c.Reason != "ThresholdExceeded" {
		t.Fatalf("repository MassDeletionHeld %+v", c)
	}
	if got := len(kopiaIDs(t, ns)); got != 25 {
		t.Fatalf("held deletions touched the repository: %d snapshots left", got)
	}
	if !strings.Contains(cmd, "repository/primary -n "+ns) {
		t.Fatalf("the held message should carry the exact command, got %q", cmd)
	}

	// Acknowledge only the first wave.
	var s snapv1.Snapshot
	if err := env.Client.Get(testContext(t), clientKey(ns, first[len(first)-1]), &s); err != nil {
		t.Fatal(err)
	}
	kubectl(t, nil, 0, "-n", ns, "annotate", "--overwrite", "repository", "primary", wellknown.AnnotationAllowMassDeletion+"="+s.DeletionTimestamp.UTC().Format(time.RFC3339))
	for _, n := range first {
		waitGone(t, ns, n)
	}
	left := kopiaIDs(t, ns)
	for _, n := range first {
		if left[ids[n]] {
			t.Errorf("acknowledged %s still has its kopia snapshot", n)
		}
	}
	// The second wave (13, still over the threshold) stays held with its data.
	for _, n := range second {
		if !left[ids[n]] {
			t.Errorf("unacknowledged %s lost its kopia snapshot", n)
		}
		if err := env.Client.Get(testContext(t), clientKey(ns, n), &s); err != nil || s.Status.Phase != snapv1.SnapshotDeleting {
			t.Errorf("unacknowledged %s: %v phase %s", n, err, s.Status.Phase)
		}
	}
	out := kubectl(t, nil, 0, "-n", ns, "get", "events", "--field-selector", "reason="+cleanup.ReasonDeleted, "-o", "name").Stdout
	if n := len(strings.Fields(out)); n < 12 {
		t.Errorf("want a %s event per released Snapshot, got %d", cleanup.ReasonDeleted, n)
	}
	// Acknowledging the rest releases them too.
	if err := env.Client.Get(testContext(t), clientKey(ns, second[len(second)-1]), &s); err != nil {
		t.Fatal(err)
	}
	kubectl(t, nil, 0, "-n", ns, "annotate", "--overwrite", "repository", "primary", wellknown.AnnotationAllowMassDeletion+"="+s.DeletionTimestamp.UTC().Format(time.RFC3339))
	for _, n := range second {
		waitGone(t, ns, n)
	}
	if got := len(kopiaIDs(t, ns)); got != 0 {
		t.Fatalf("%d kopia snapshots left after every deletion was acknowledged", got)
	}
}

func TestBatchDeletesManyInOneJob(t *testing.T) {
	const ns = "cleanup-batch"
	backupNamespace(t, ns, 1, "  deletionProtection: {threshold: 0}\n")
	kubectl(t, policy(ns, "app", "  copyMethod: Direct\n"), 0, "apply", "-f", "-")
	var names []string
	for i := 0; i < 8; i++ {
		names = append(names, fmt.Sprintf("s%02d", i))
	}
	backups(t, ns, "app", names...)
	kubectl(t, nil, 0, append([]string{"-n", ns, "delete", "snapshot", "--wait=false"}, names...)...)
	batches := map[string]bool{}
	eventually(t, func() error {
		var list snapv1.SnapshotList
		if err := env.Client.List(testContext(t), &list, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, s := range list.Items {
			if s.Status.Cleanup != nil && s.Status.Cleanup.Batch != "" {
				batches[s.Status.Cleanup.Batch] = true
			}
		}
		if len(list.Items) > 0 {
			return fmt.Errorf("%d snapshots still deleting", len(list.Items))
		}
		return nil
	})
	if len(batches) != 1 {
		t.Fatalf("8 deletions within the quiet window should go in one batch, saw %v", batches)
	}
	if got := len(kopiaIDs(t, ns)); got != 0 {
		t.Fatalf("%d kopia snapshots left", got)
	}
	// The batch Job is reaped once its members are released.
	eventually(t, func() error {
		var jobs batchv1.JobList
		if err := env.Client.List(testContext(t), &jobs, client.InNamespace(ns), client.MatchingLabels{wellknown.LabelOp: "snapshot-delete-batch"}); err != nil {
			return err
		}
		if len(jobs.Items) != 0 {
			return fmt.Errorf("batch job not reaped: %d left", len(jobs.Items))
		}
		return nil
	})
}

func TestDeletingAPolicyRetainsItsBackups(t *testing.T) {
	const ns = "cleanup-policy-delete"
	backupNamespace(t, ns, 2, "")
	kubectl(t, policy(ns, "app", "  copyMethod: Direct\n"), 0, "apply", "-f", "-")
	ids := backups(t, ns, "app", "one", "two")
	eventually(t, func() error {
		var p snapv1.SnapshotPolicy
		if err := env.Client.Get(testContext(t), clientKey(ns, "app"), &p); err != nil {
			return err
		}
		for _, f := range p.Finalizers {
			if f == wellknown.FinalizerPolicyCleanup {
				return nil
			}
		}
		return fmt.Errorf("the policy has no %s finalizer yet", wellknown.FinalizerPolicyCleanup)
	})
	kubectl(t, nil, 0, "-n", ns, "delete", "snapshotpolicy", "app", "--wait=false")
	eventually(t, func() error {
		var p snapv1.SnapshotPolicy
		err := env.Client.Get(testContext(t), clientKey(ns, "app"), &p)
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("policy still there (%v)", err)
	})
	waitGone(t, ns, "one")
	waitGone(t, ns, "two")
	left := kopiaIDs(t, ns)
	if !left[ids["one"]] || !left[ids["two"]] {
		t.Fatalf("onPolicyDelete Retain (the default) must keep the kopia data: %v", left)
	}
	ev := kubectl(t, nil, 0, "-n", ns, "get", "events", "--field-selector", "reason="+cleanup.ReasonRetainedOnPolicy, "-o", "name").Stdout
	if len(strings.Fields(ev)) < 2 {
		t.Errorf("want a %s warning per Snapshot, got %q", cleanup.ReasonRetainedOnPolicy, ev)
	}
}
