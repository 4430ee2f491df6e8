package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/functions/snapshot"
	"github.com/snapflow/snapflow/internal/jobwatch"
	"github.com/snapflow/snapflow/internal/repository"
)

// A run claims its repository slot before its beforeSnapshot hooks freeze
// the workload: a second run arriving while the first is in its hooks
// waits for the slot instead of taking it, so the first is never parked
// frozen and maxConcurrentJobs holds throughout.
func TestASlotIsClaimedBeforeTheHooksFreeze(t *testing.T) {
	const ns = "slot-claim"
	backupNamespace(t, ns, 2, "  concurrency: {maxConcurrentJobs: 1}\n")
	// The freeze hook holds until the test drops a file into the volume.
	thaw := filepath.Join(env.Functions.Node.PVCDir(ns, "app-data"), "thaw")
	t.Cleanup(func() { _ = os.WriteFile(thaw, nil, 0o644) })
	kubectl(t, policy(ns, "app", `  copyMethod: Direct
  hooks:
    beforeSnapshot:
      - runJob:
          timeout: 3m
          jobSpec:
            template:
              spec:
                restartPolicy: Never
                volumes: [{name: data, persistentVolumeClaim: {claimName: app-data}}]
                containers:
                - name: freeze
                  image: busybox
                  command: [sh, -c, "while [ ! -e /data/thaw ]; do sleep 0.2; done"]
                  volumeMounts: [{name: data, mountPath: /data}]
`), 0, "apply", "-f", "-")
	kubectl(t, policy(ns, "plain", "  copyMethod: Direct\n"), 0, "apply", "-f", "-")

	// Watch the repository's live mover Jobs for the whole test.
	ctx, stop := context.WithCancel(testContext(t))
	defer stop()
	var most atomic.Int32
	pool := repository.PoolKey(snapv1.KindRepository, ns, "primary")
	go func() {
		for ctx.Err() == nil {
			var jobs batchv1.JobList
			if env.Client.List(ctx, &jobs, client.MatchingLabels{wellknown.LabelRepoPool: pool}) == nil {
				live := int32(0)
				for i := range jobs.Items {
					if jobwatch.Live(&jobs.Items[i]) {
						live++
					}
				}
				if live > most.Load() {
					most.Store(live)
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()

	kubectl(t, snapshotOf(ns, "first", "app"), 0, "create", "-f", "-")
	eventually(t, func() error {
		s := getSnapshot(t, ns, "first")
		if c := meta.FindStatusCondition(s.Status.Conditions, wellknown.ConditionReady); c == nil || c.Reason != "RunningHooks" {
			return fmt.Errorf("the first run is not in its freeze hook yet: %+v", c)
		}
		return nil
	})
	first := slotCondition(t, ns, "first")
	if first == nil || first.Status != "True" || first.Reason != snapshot.ReasonSlotClaimed {
		t.Fatalf("the first run in its hooks: slot condition %+v, want True/%s", first, snapshot.ReasonSlotClaimed)
	}
	kubectl(t, snapshotOf(ns, "second", "plain"), 0, "create", "-f", "-")
	eventually(t, func() error {
		c := slotCondition(t, ns, "second")
		if c == nil || c.Status != "False" || c.Reason != snapshot.ReasonWaitingForSlot || !strings.Contains(c.Message, "running or starting") {
			return fmt.Errorf("second run: slot condition %+v, want it waiting for the slot the first run holds", c)
		}
		return nil
	})
	if s := getSnapshot(t, ns, "second"); s.Status.Job != nil {
		t.Fatalf("the second run started job %s while the first was in its hooks", s.Status.Job.Name)
	}

	if err := os.WriteFile(thaw, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitSnapshot(t, ns, "first", snapv1.SnapshotSucceeded)
	waitSnapshot(t, ns, "second", snapv1.SnapshotSucceeded)
	if n := most.Load(); n > 1 {
		t.Fatalf("%d mover jobs ran at once under maxConcurrentJobs: 1", n)
	}
}

func slotCondition(t *testing.T, ns, name string) *metav1.Condition {
	t.Helper()
	return meta.FindStatusCondition(getSnapshot(t, ns, name).Status.Conditions, wellknown.ConditionRepositorySlotAvailable)
}

func getSnapshot(t *testing.T, ns, name string) *snapv1.Snapshot {
	t.Helper()
	var s snapv1.Snapshot
	if err := env.Client.Get(testContext(t), clientKey(ns, name), &s); err != nil {
		t.Fatal(err)
	}
	return &s
}
