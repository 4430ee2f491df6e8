package e2e

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/internal/jobwatch"
	"github.com/snapflow/snapflow/test/harness"
	"github.com/snapflow/snapflow/test/netfault"
)

// Storage that goes away in the middle of an upload fails that attempt as
// the storage's (Unreachable), never as a file error with a hint to ignore
// such errors, even where the policy ignores them; the Job runs another
// pod, and once the storage is back the backup succeeds whole.
func TestStorageOutageMidUploadIsRetried(t *testing.T) {
	const ns = "storage-outage"
	createBucket(t, "outage")
	proxy, err := netfault.New(env.S3.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Cut)
	// 8 MiB through a 512 KiB/s upload throttle: the cut lands mid-upload.
	s3RepoAt(t, ns, proxy.Addr, "outage", "", "outage-password", "  moverDefaults: {throttle: {uploadBytesPerSecond: 524288}}\n")
	waitRepository(t, ns, "primary", snapv1.RepositoryReady)
	dir := env.Functions.Node.PVCDir(ns, "app-data")
	randomFiles(t, dir, 16, 512<<10)
	kubectl(t, policy(ns, "app", "  copyMethod: Direct\n  errorHandling: {ignoreFileErrors: true}\n"), 0, "apply", "-f", "-")
	kubectl(t, snapshotOf(ns, "cut", "app"), 0, "create", "-f", "-")

	var s snapv1.Snapshot
	eventually(t, func() error {
		if err := env.Client.Get(testContext(t), clientKey(ns, "cut"), &s); err != nil {
			return err
		}
		if s.Status.Phase.IsTerminal() {
			t.Fatalf("the backup ended %s before the storage could be cut", s.Status.Phase)
		}
		if p := s.Status.Progress; p == nil || p.BytesRead == 0 {
			return errNotYet("the mover has not started reading")
		}
		return nil
	})
	proxy.Cut()
	// kopia retries each write for a minute and more before it gives up.
	first := failedPod(t, ns, s.Status.Job.Name, 4)
	if err := proxy.Restore(); err != nil {
		t.Fatal(err)
	}
	r, err := jobwatch.ReportOf(first.State.Terminated)
	if err != nil || r.Failure == nil || r.Failure.Class != "Unreachable" || strings.Contains(r.Failure.Message+r.Failure.Hint, "ignoreFileErrors") {
		t.Fatalf("the attempt the outage failed reported %+v (%v):\n%s\nwant class Unreachable and no hint to ignore file errors", r, err, first.State.Terminated.Message)
	}

	done := waitSnapshot(t, ns, "cut", snapv1.SnapshotSucceeded)
	if done.Status.Failure != nil || done.Status.Stats == nil || done.Status.Stats.FilesFailed != nil && *done.Status.Stats.FilesFailed != 0 {
		t.Fatalf("the retried backup: failure %+v stats %+v", done.Status.Failure, done.Status.Stats)
	}
	snapflowCLI(t, 0, "restore", "back", "-n", ns, "--snapshot", "cut", "--to-pvc", "copy", "--capacity", "1Gi")
	waitRestore(t, ns, "back", snapv1.RestoreCompleted)
	sameFiles(t, tree(t, dir), tree(t, env.Functions.Node.PVCDir(ns, "copy")), false)
}

type errNotYet string

func (e errNotYet) Error() string { return string(e) }

// failedPod waits for a pod of the Job to end with exit code and returns
// its mover container's status.
func failedPod(t *testing.T, ns, job string, code int32) corev1.ContainerStatus {
	t.Helper()
	deadline := time.Now().Add(harness.Timeout(5 * time.Minute))
	for {
		var pods corev1.PodList
		if err := env.Client.List(testContext(t), &pods, client.InNamespace(ns), client.MatchingLabels{"job-name": job}); err != nil {
			t.Fatal(err)
		}
		for _, p := range pods.Items {
			for _, c := range p.Status.ContainerStatuses {
				if c.Name == "mover" && c.State.Terminated != nil && c.State.Terminated.ExitCode == code {
					return c
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pod of job %s/%s exited %d: %+v", ns, job, code, pods.Items)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
