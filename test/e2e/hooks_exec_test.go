package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/test/localnode"
)

// runningPod creates a workload pod bound to the stand-in node and marks it
// Running, as a kubelet would once its containers start.
func runningPod(t *testing.T, ns, name string, labels map[string]string) {
	t.Helper()
	ctx := testContext(t)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: corev1.PodSpec{NodeName: localnode.NodeName, Containers: []corev1.Container{{Name: "db", Image: "postgres"}}}}
	if err := env.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status.Phase = corev1.PodRunning
	if err := env.Client.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
}

// workloadExec hooks reach the workload through the API server's pods/exec
// and the streaming protocol, to the stand-in kubelet, which runs the
// command in the pod's directory; exit codes and output come back the same
// way.
func TestWorkloadExecHooksThroughPodsExec(t *testing.T) {
	const ns = "hooks-exec"
	backupNamespace(t, ns, 2, "")
	runningPod(t, ns, "db-0", map[string]string{"app": "db"})
	kubectl(t, policy(ns, "app", `  copyMethod: Direct
  hooks:
    beforeSnapshot:
      - workloadExec: {podSelector: {matchLabels: {app: db}}, command: [sh, -c, "echo frozen > froze.txt; echo freezing writes"]}
    afterSnapshot:
      - workloadExec: {podSelector: {matchLabels: {app: db}}, container: db, command: [sh, -c, "echo thawed > thawed.txt"]}
`), 0, "apply", "-f", "-")
	kubectl(t, snapshotOf(ns, "frozen", "app"), 0, "create", "-f", "-")
	waitSnapshot(t, ns, "frozen", snapv1.SnapshotSucceeded)
	var s snapv1.Snapshot
	eventually(t, func() error {
		if err := env.Client.Get(testContext(t), clientKey(ns, "frozen"), &s); err != nil {
			return err
		}
		if s.Status.Hooks == nil || s.Status.Hooks.PostCompletedAt == nil {
			return fmt.Errorf("afterSnapshot not stamped yet: %+v", s.Status.Hooks)
		}
		return nil
	})
	h := s.Status.Hooks
	if len(h.Results) != 2 || h.Results[0].Kind != "workloadExec" || !h.Results[0].Succeeded || !strings.Contains(h.Results[0].Message, "freezing writes") ||
		!strings.Contains(h.Results[0].Message, "db-0/db") || !h.Results[1].Succeeded {
		t.Fatalf("hook results %+v", h.Results)
	}
	dir := env.Functions.Node.PodDir(ns, "db-0")
	for _, f := range []string{"froze.txt", "thawed.txt"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("the %s hook did not run in the pod: %v", f, err)
		}
	}

	// A command that exits non-zero aborts the backup with its output and code.
	kubectl(t, policy(ns, "strict", `  copyMethod: Direct
  hooks:
    beforeSnapshot:
      - workloadExec: {podSelector: {matchLabels: {app: db}}, command: [sh, -c, "echo cannot freeze >&2; exit 3"]}
`), 0, "apply", "-f", "-")
	kubectl(t, snapshotOf(ns, "refused", "strict"), 0, "create", "-f", "-")
	f := waitSnapshot(t, ns, "refused", snapv1.SnapshotFailed)
	if f.Status.Failure == nil || f.Status.Failure.Class != "HookFailed" || !strings.Contains(f.Status.Failure.Message, "cannot freeze") ||
		!strings.Contains(f.Status.Failure.Message, "exit code 3") {
		t.Fatalf("failure %+v", f.Status.Failure)
	}
	if f.Status.Job != nil {
		t.Fatalf("an aborted backup created its mover job %s", f.Status.Job.Name)
	}
}
