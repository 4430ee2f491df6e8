package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/privilege"
)

// appUID owns the data of the workload in the inheritance test; only it
// may read its private files.
const appUID = 1000

// privateFiles writes files into dir that only appUID may read, in a
// directory only it may enter.
func privateFiles(t *testing.T, dir string) map[string]fileState {
	t.Helper()
	priv := filepath.Join(dir, "private")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(priv, 0o700))
	for _, name := range []string{"ledger.db", "wal.log"} {
		p := filepath.Join(priv, name)
		must(os.WriteFile(p, []byte(strings.Repeat(name+" belongs to uid 1000\n", 100)), 0o600))
		must(os.Chown(p, appUID, appUID))
	}
	must(os.Chown(priv, appUID, appUID))
	return tree(t, priv)
}

// A mover asked to inherit its workload's security context reads the
// volume as the workload does: files only the application's user may read
// are backed up, and a restore that inherits the identity the backup
// recorded brings them back owned by that user. Without inheritance the
// default mover (uid 65532) is refused them, which shows the local node
// runs it as that user.
func TestMoverInheritsTheWorkloadsIdentity(t *testing.T) {
	if !env.Functions.Node.RunsAsPodUsers() {
		t.Skip("the local node runs containers as their users only when it runs as root (make test does here): without it this test cannot tell which user read the data")
	}
	const ns = "inherit-identity"
	backupNamespace(t, ns, 2, "")
	want := privateFiles(t, env.Functions.Node.PVCDir(ns, "app-data"))

	// The default mover is refused the application's private files.
	kubectl(t, policy(ns, "plain", ""), 0, "apply", "-f", "-")
	kubectl(t, snapshotOf(ns, "as-default", "plain"), 0, "create", "-f", "-")
	s := waitSnapshot(t, ns, "as-default", snapv1.SnapshotFailed)
	if f := s.Status.Failure; f == nil || !strings.Contains(f.Message, "permission denied") {
		t.Fatalf("failure %+v, want the default mover refused the private directory", s.Status.Failure)
	}

	// No workload runs yet: the run falls back to the defaults and says so.
	kubectl(t, policy(ns, "app", "  mover: {inheritSecurityContextFrom: {pvcConsumer: {}}}\n"), 0, "apply", "-f", "-")
	kubectl(t, snapshotOf(ns, "no-workload", "app"), 0, "create", "-f", "-")
	s = waitSnapshot(t, ns, "no-workload", snapv1.SnapshotFailed)
	if c := meta.FindStatusCondition(s.Status.Conditions, wellknown.ConditionSecurityContextInherited); c == nil || c.Status != "False" || c.Reason != privilege.ReasonNoWorkloadPod || !strings.Contains(c.Message, "uid 65532") {
		t.Fatalf("condition %+v, want %s=False (%s) naming the fallback identity", c, wellknown.ConditionSecurityContextInherited, privilege.ReasonNoWorkloadPod)
	}
	if r := s.Status.Recorded; r == nil || r.Src != "default" {
		t.Fatalf("recorded %+v, want the default identity", s.Status.Recorded)
	}

	// The application runs as uid 1000: the mover inherits it.
	kubectl(t, []byte(`
apiVersion: v1
kind: Pod
metadata: {name: db-0, namespace: `+ns+`, labels: {app: db}}
spec:
  securityContext: {runAsUser: 1000, runAsGroup: 1000}
  containers: [{name: db, image: postgres:17, volumeMounts: [{name: data, mountPath: /var/lib/postgresql}]}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: app-data}}]
`), 0, "apply", "-f", "-")
	kubectl(t, nil, 0, "-n", ns, "patch", "pod", "db-0", "--subresource=status", "--type=merge", "-p", `{"status":{"phase":"Running"}}`)
	kubectl(t, snapshotOf(ns, "as-app", "app"), 0, "create", "-f", "-")
	s = waitSnapshot(t, ns, "as-app", snapv1.SnapshotSucceeded)
	c := meta.FindStatusCondition(s.Status.Conditions, wellknown.ConditionSecurityContextInherited)
	if c == nil || c.Status != "True" || !strings.Contains(c.Message, "uid 1000") || !strings.Contains(c.Message, "pod db-0") {
		t.Fatalf("condition %+v, want True naming uid 1000 and pod db-0", c)
	}
	if r := s.Status.Recorded; r == nil || r.Src != "inherited" || r.UID == nil || *r.UID != appUID || r.GID == nil || *r.GID != appUID {
		t.Fatalf("recorded %+v, want uid and gid 1000 inherited", s.Status.Recorded)
	}
	if sc := moverJobOf(t, ns, "as-app").Spec.Template.Spec.Containers[0].SecurityContext; sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != appUID {
		t.Fatalf("mover container security context %+v, want runAsUser 1000", sc)
	}

	// The restore runs as the recorded identity and the files come back
	// owned by it.
	kubectl(t, []byte(`
apiVersion: kopiur.home-operations.com/v1alpha1
kind: Restore
metadata: {name: back, namespace: `+ns+`}
spec:
  source: {snapshotRef: {name: as-app}}
  target: {pvc: {name: recovered, capacity: 1Gi}}
  mover: {inheritSecurityContextFrom: {snapshot: {}}}
`), 0, "apply", "-f", "-")
	rs := waitRestore(t, ns, "back", snapv1.RestoreCompleted)
	if c := meta.FindStatusCondition(rs.Status.Conditions, wellknown.ConditionSecurityContextInherited); c == nil || c.Status != "True" || !strings.Contains(c.Message, "it runs as uid 1000") {
		t.Fatalf("restore condition %+v, want True naming uid 1000", c)
	}
	priv := filepath.Join(env.Functions.Node.PVCDir(ns, "recovered"), "private")
	sameFiles(t, want, tree(t, priv), true)
	for rel := range want {
		info, err := os.Stat(filepath.Join(priv, rel))
		if err != nil {
			t.Fatal(err)
		}
		if st := info.Sys().(*syscall.Stat_t); st.Uid != appUID {
			t.Errorf("%s came back owned by uid %d, want %d", rel, st.Uid, appUID)
		}
	}

	// readOnly: false lets the kubelet give the source to the mover's
	// fsGroup (a read-only mount keeps its owners), so the default mover
	// reads it through its group, as the guide describes. Last: when the
	// mover reads the live volume (Direct), its group changes for good.
	kubectl(t, []byte(`
apiVersion: kopiur.home-operations.com/v1alpha1
kind: SnapshotPolicy
metadata: {name: writable, namespace: `+ns+`}
spec:
  repository: {name: primary}
  sources: [{pvc: {name: app-data}, readOnly: false}]
`), 0, "apply", "-f", "-")
	kubectl(t, snapshotOf(ns, "through-fsgroup", "writable"), 0, "create", "-f", "-")
	waitSnapshot(t, ns, "through-fsgroup", snapv1.SnapshotSucceeded)
	if m := moverJobOf(t, ns, "through-fsgroup").Spec.Template.Spec.Containers[0].VolumeMounts; !slices.ContainsFunc(m, func(v corev1.VolumeMount) bool { return v.Name == "source" && !v.ReadOnly }) {
		t.Fatalf("the source is mounted read-only with readOnly: false: %+v", m)
	}
}
