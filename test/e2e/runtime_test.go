package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/snapflow/snapflow/test/harness"
)

// The local node runs the mover image under runc, as a node's runtime
// would: the image holds no shell, its root is read-only when the
// container asks, and a volume is writable at its container path.
func TestMoverImageRunsUnderRunc(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the local node runs containers under runc only as root; movers ran as host processes")
	}
	const ns = "runtime-runc"
	kubectl(t, []byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: "+ns+"}\n"), 0, "apply", "-f", "-")
	job := func(name, args string) []byte {
		return []byte(fmt.Sprintf(`
apiVersion: batch/v1
kind: Job
metadata: {name: %s, namespace: %s}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      automountServiceAccountToken: false
      containers:
        - name: main
          image: %s
          command: %s
          terminationMessagePolicy: FallbackToLogsOnError
          securityContext: {readOnlyRootFilesystem: true, runAsNonRoot: true, allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
          volumeMounts: [{name: scratch, mountPath: /scratch}]
      volumes: [{name: scratch, emptyDir: {}}]
`, name, ns, harness.MoverImage, args))
	}
	ended := func(name string) string {
		t.Helper()
		var msg string
		eventually(t, func() error {
			var pods corev1.PodList
			if err := env.Client.List(testContext(t), &pods, client.InNamespace(ns), client.MatchingLabels{"job-name": name}); err != nil {
				return err
			}
			if len(pods.Items) != 1 || pods.Items[0].Status.Phase != corev1.PodFailed || len(pods.Items[0].Status.ContainerStatuses) == 0 ||
				pods.Items[0].Status.ContainerStatuses[0].State.Terminated == nil {
				return fmt.Errorf("job %s: want one Failed pod with a terminated container", name)
			}
			msg = pods.Items[0].Status.ContainerStatuses[0].State.Terminated.Message
			return nil
		})
		return msg
	}
	// A claim the pod mounts read-only refuses writes; one it mounts
	// read-write takes them as the pod's user (fsGroup gives it the
	// volume).
	kubectl(t, []byte(fmt.Sprintf(`
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: vol, namespace: %[1]s}
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
---
apiVersion: batch/v1
kind: Job
metadata: {name: ro-claim, namespace: %[1]s}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      automountServiceAccountToken: false
      containers:
        - name: main
          image: %[2]s
          command: [snapflow, mover, --cpu-profile, /vol/denied.out, --work, /nowhere]
          terminationMessagePolicy: FallbackToLogsOnError
          volumeMounts: [{name: vol, mountPath: /vol}]
      volumes: [{name: vol, persistentVolumeClaim: {claimName: vol, readOnly: true}}]
---
apiVersion: batch/v1
kind: Job
metadata: {name: as-user, namespace: %[1]s}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      automountServiceAccountToken: false
      securityContext: {runAsUser: 1000, runAsGroup: 1000, fsGroup: 1000}
      containers:
        - name: main
          image: %[2]s
          command: [snapflow, mover, --cpu-profile, /vol/profile.out, --work, /nowhere]
          terminationMessagePolicy: FallbackToLogsOnError
          volumeMounts: [{name: vol, mountPath: /vol}]
      volumes: [{name: vol, persistentVolumeClaim: {claimName: vol}}]
`, ns, harness.MoverImage)), 0, "apply", "-f", "-")
	kubectl(t, job("shell", `[/bin/sh, -c, "true"]`), 0, "apply", "-f", "-")
	kubectl(t, job("root", `[snapflow, mover, --cpu-profile, /profile.out, --work, /nowhere]`), 0, "apply", "-f", "-")
	kubectl(t, job("volume", `[snapflow, mover, --cpu-profile, /scratch/profile.out, --work, /nowhere]`), 0, "apply", "-f", "-")
	if msg := ended("shell"); !strings.Contains(msg, "/bin/sh") || !strings.Contains(msg, "no such file") {
		t.Errorf("shell: %q, want no /bin/sh in the image", msg)
	}
	if msg := ended("root"); !strings.Contains(msg, "/profile.out") || !strings.Contains(msg, "read-only file system") {
		t.Errorf("root: %q, want the read-only root refusing the write", msg)
	}
	// The write into the volume works; the mover then stops at its
	// missing work spec.
	if msg := ended("volume"); !strings.Contains(msg, "read the work spec") || strings.Contains(msg, "read-only") {
		t.Errorf("volume: %q, want the volume writable and the run stopped at its work spec", msg)
	}
	if msg := ended("ro-claim"); !strings.Contains(msg, "/vol/denied.out") || !strings.Contains(msg, "read-only file system") {
		t.Errorf("ro-claim: %q, want the read-only claim refusing the write", msg)
	}
	if msg := ended("as-user"); !strings.Contains(msg, "read the work spec") {
		t.Errorf("as-user: %q, want the write into the claim to work", msg)
	}
	fi, err := os.Stat(filepath.Join(env.Functions.Node.PVCDir(ns, "vol"), "profile.out"))
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 1000 || st.Gid != 1000 {
		t.Fatalf("the file the container wrote belongs to %d:%d, want the pod's user 1000:1000", st.Uid, st.Gid)
	}
}
