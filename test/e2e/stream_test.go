package e2e

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/internal/moverjob"
)

func streamPolicy(ns, name, command string) []byte {
	return []byte(fmt.Sprintf(`
apiVersion: kopiur.home-operations.com/v1alpha1
kind: SnapshotPolicy
metadata: {name: %s, namespace: %s}
spec:
  repository: {name: primary}
  sources:
    - stream:
        fileName: pg.sql
        workloadExec:
          podSelector: {matchLabels: {app: pg}}
          container: db
          command: [sh, -c, %q]
          timeout: 5m
`, name, ns, command))
}

// A stream source backs up what a command in the workload prints: the
// mover runs it through pods/exec, as a ServiceAccount of its own that may
// exec into that one pod for the run, and uploads its stdout as one file
// without touching disk. A command that fails leaves no snapshot and puts
// its stderr in the failure.
func TestStreamSourceBacksUpACommandsOutput(t *testing.T) {
	const ns = "stream-source"
	backupNamespace(t, ns, 1, "")
	runningPod(t, ns, "pg-0", map[string]string{"app": "pg"})
	// The "database": 3 MiB of random bytes the command prints.
	dump := make([]byte, 3<<20)
	if _, err := rand.Read(dump); err != nil {
		t.Fatal(err)
	}
	podDir := env.Functions.Node.PodDir(ns, "pg-0")
	if err := os.MkdirAll(podDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(podDir, "db.bin"), dump, 0o644); err != nil {
		t.Fatal(err)
	}
	kubectl(t, streamPolicy(ns, "pg", "cat db.bin; echo dumped >&2"), 0, "apply", "-f", "-")
	kubectl(t, snapshotOf(ns, "dump", "pg"), 0, "create", "-f", "-")
	s := waitSnapshot(t, ns, "dump", snapv1.SnapshotSucceeded)
	if st := s.Status.Stats; st == nil || st.SizeBytes == nil || *st.SizeBytes != int64(len(dump)) {
		t.Fatalf("stats %+v, want sizeBytes %d", s.Status.Stats, len(dump))
	}
	if id := s.Status.Snapshot.Identity; id == nil || id.SourcePath != "/stream/pg.sql" {
		t.Fatalf("identity %+v, want source path /stream/pg.sql", s.Status.Snapshot.Identity)
	}
	noGrant(t, ns, s.Status.Job.Name)

	// The file restores byte for byte.
	kubectl(t, restoreOf(ns, "back", "{snapshotRef: {name: dump}}", "{pvc: {name: restored, capacity: 1Gi}}"), 0, "apply", "-f", "-")
	waitRestore(t, ns, "back", snapv1.RestoreCompleted)
	got, err := os.ReadFile(filepath.Join(env.Functions.Node.PVCDir(ns, "restored"), "pg.sql"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, dump) {
		t.Fatalf("restored %d bytes, not the %d the command printed", len(got), len(dump))
	}

	// A streamExec restore pipes the file into a command in another
	// workload, which reads it to the end.
	runningPod(t, ns, "pg-new-0", map[string]string{"app": "pg-new"})
	kubectl(t, streamRestore(ns, "into-pg", "cat > loaded.sql"), 0, "apply", "-f", "-")
	rs := waitRestore(t, ns, "into-pg", snapv1.RestoreCompleted)
	loaded, err := os.ReadFile(filepath.Join(env.Functions.Node.PodDir(ns, "pg-new-0"), "loaded.sql"))
	if err != nil || !bytes.Equal(loaded, dump) {
		t.Fatalf("the command read %d bytes (%v), not the %d backed up", len(loaded), err, len(dump))
	}
	if c := meta.FindStatusCondition(rs.Status.Conditions, "Ready"); c == nil || !strings.Contains(c.Message, "piped pg.sql") {
		t.Fatalf("conditions %+v, want the piped file named", rs.Status.Conditions)
	}
	noGrant(t, ns, moverjob.Name(rs.Name, string(rs.UID)))
	// A command that fails fails the restore, with its stderr.
	kubectl(t, streamRestore(ns, "refused", "head -c 10 >/dev/null; echo relation already exists >&2; exit 3"), 0, "apply", "-f", "-")
	bad := waitRestore(t, ns, "refused", snapv1.RestoreFailed)
	if fl := bad.Status.Failure; fl == nil || fl.Class != "CommandFailed" || !strings.Contains(fl.Message, "code 3") || !strings.Contains(fl.Message, "relation already exists") {
		t.Fatalf("failure %+v, want CommandFailed with the exit code and stderr", bad.Status.Failure)
	}

	// A command that prints part of its output and fails saves nothing.
	kubectl(t, streamPolicy(ns, "broken", "head -c 100000 db.bin; echo disk full >&2; exit 4"), 0, "apply", "-f", "-")
	kubectl(t, snapshotOf(ns, "cut", "broken"), 0, "create", "-f", "-")
	f := waitSnapshot(t, ns, "cut", snapv1.SnapshotFailed)
	if fl := f.Status.Failure; fl == nil || fl.Class != "CommandFailed" || !strings.Contains(fl.Message, "code 4") || !strings.Contains(fl.Message, "disk full") {
		t.Fatalf("failure %+v, want CommandFailed with the exit code and stderr", f.Status.Failure)
	}
	if f.Status.Snapshot != nil && f.Status.Snapshot.KopiaSnapshotID != "" {
		t.Fatalf("a failed command left kopia snapshot %s", f.Status.Snapshot.KopiaSnapshotID)
	}

	// No running pod: the run waits for one instead of failing.
	kubectl(t, []byte(strings.Replace(string(streamPolicy(ns, "nobody", "true")), "app: pg", "app: absent", 1)), 0, "apply", "-f", "-")
	kubectl(t, snapshotOf(ns, "waits", "nobody"), 0, "create", "-f", "-")
	eventually(t, func() error {
		var w snapv1.Snapshot
		if err := env.Client.Get(testContext(t), clientKey(ns, "waits"), &w); err != nil {
			return err
		}
		for _, c := range w.Status.Conditions {
			if c.Reason == "WaitingForWorkload" && strings.Contains(c.Message, "app=absent") {
				return nil
			}
		}
		return fmt.Errorf("phase %s, conditions %+v", w.Status.Phase, w.Status.Conditions)
	})
}

func streamRestore(ns, name, command string) []byte {
	return []byte(fmt.Sprintf(`
apiVersion: kopiur.home-operations.com/v1alpha1
kind: Restore
metadata: {name: %s, namespace: %s}
spec:
  source: {snapshotRef: {name: dump}}
  target:
    streamExec:
      podSelector: {matchLabels: {app: pg-new}}
      container: db
      command: [sh, -c, %q]
      timeout: 5m
`, name, ns, command))
}

// noGrant waits for a run's right to exec into its workload to end.
func noGrant(t *testing.T, ns, job string) {
	t.Helper()
	eventually(t, func() error {
		for _, o := range []client.Object{&rbacv1.RoleBinding{}, &rbacv1.Role{}, &corev1.ServiceAccount{}} {
			if err := env.Client.Get(testContext(t), clientKey(ns, job), o); !apierrors.IsNotFound(err) {
				return fmt.Errorf("%T %s still there (%v)", o, job, err)
			}
		}
		return nil
	})
}
