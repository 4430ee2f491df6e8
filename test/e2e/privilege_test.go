package e2e

import (
	"fmt"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
)

// A tenant's Repository or policy cannot get a root, node-path, inline-NFS
// or extra-capability pod into its namespace without the namespace's opt-in:
// not through the backup, and not through the bootstrap Job, which used to
// run a Repository's moverDefaults unchecked. Admission says so up front.
func TestPrivilegeGateCoversEveryMover(t *testing.T) {
	const ns = "privilege-gate"
	backupNamespace(t, ns, 2, "")
	res := kubectl(t, []byte(`
apiVersion: kopiur.home-operations.com/v1alpha1
kind: Repository
metadata: {name: rooted, namespace: `+ns+`}
spec:
  backend: {filesystem: {path: /repository/rooted, volume: {pvc: {name: kopia-repo}}}}
  encryption: {passwordSecretRef: {name: kopia-password, key: KOPIA_PASSWORD}}
  create: {enabled: true}
  moverDefaults: {podSecurityContext: {runAsUser: 0}}
---
apiVersion: kopiur.home-operations.com/v1alpha1
kind: Repository
metadata: {name: node, namespace: `+ns+`}
spec:
  backend: {filesystem: {path: /}}
  encryption: {passwordSecretRef: {name: kopia-password, key: KOPIA_PASSWORD}}
---
apiVersion: kopiur.home-operations.com/v1alpha1
kind: Repository
metadata: {name: nas, namespace: `+ns+`}
spec:
  backend: {filesystem: {path: /kopia, volume: {nfs: {server: nas.example, path: /exports/all}}}}
  encryption: {passwordSecretRef: {name: kopia-password, key: KOPIA_PASSWORD}}
`), 0, "apply", "-f", "-")
	for _, want := range []string{"runs as root", "node path /", "NFS export nas.example:/exports/all"} {
		if !strings.Contains(res.Stderr, want) {
			t.Errorf("admission should warn about %q: %s", want, res.Stderr)
		}
	}
	for _, name := range []string{"rooted", "node", "nas"} {
		r := waitRepository(t, ns, name, snapv1.RepositoryFailed)
		c := meta.FindStatusCondition(r.Status.Conditions, wellknown.ConditionReady)
		if c == nil || c.Reason != "PrivilegedMoverNotPermitted" || !strings.Contains(c.Message, wellknown.AnnotationPrivilegedMovers) {
			t.Errorf("repository %s: Ready %+v, want PrivilegedMoverNotPermitted naming the opt-in", name, c)
		}
		noJobs(t, ns, wellknown.LabelRepository, name)
	}

	// An added capability used to be only warned about; the run went ahead.
	kubectl(t, policy(ns, "app", "  copyMethod: Direct\n  mover: {securityContext: {capabilities: {add: [SYS_ADMIN]}}}\n"), 0, "apply", "-f", "-")
	kubectl(t, snapshotOf(ns, "capable", "app"), 0, "create", "-f", "-")
	eventually(t, func() error {
		var s snapv1.Snapshot
		if err := env.Client.Get(testContext(t), clientKey(ns, "capable"), &s); err != nil {
			return err
		}
		c := meta.FindStatusCondition(s.Status.Conditions, wellknown.ConditionMoverPermitted)
		if s.Status.Phase != snapv1.SnapshotPending || c == nil || c.Status != "False" || !strings.Contains(c.Message, "SYS_ADMIN") {
			return fmt.Errorf("phase %s MoverPermitted %+v: want Pending, refused naming SYS_ADMIN", s.Status.Phase, c)
		}
		return nil
	})
	noJobs(t, ns, wellknown.LabelSnapshot, "capable")

	// A runJob hook is a pod snapflow creates too: same gate, same opt-in.
	kubectl(t, policy(ns, "hooked", `  copyMethod: Direct
  hooks:
    beforeSnapshot:
      - runJob: {jobSpec: {template: {spec: {containers: [{name: hook, image: busybox, command: [/bin/true], securityContext: {privileged: true}}]}}}}
`), 0, "apply", "-f", "-")
	kubectl(t, snapshotOf(ns, "hooked", "hooked"), 0, "create", "-f", "-")
	hooked := waitSnapshot(t, ns, "hooked", snapv1.SnapshotFailed)
	if f := hooked.Status.Failure; f == nil || f.Class != "HookFailed" || !strings.Contains(f.Message, "container hook is privileged") {
		t.Fatalf("failure %+v, want the privileged runJob hook refused", hooked.Status.Failure)
	}
	var hookJobs batchv1.JobList
	if err := env.Client.List(testContext(t), &hookJobs, client.InNamespace(ns), client.MatchingLabels{wellknown.LabelSnapshot: "hooked"}); err != nil || len(hookJobs.Items) != 0 {
		t.Fatalf("the refused hook created %d Jobs (%v)", len(hookJobs.Items), err)
	}

	// The opt-in lets the root repository connect, with the hardened drop
	// list kept for the capability-adding backup.
	kubectl(t, nil, 0, "annotate", "namespace", ns, wellknown.AnnotationPrivilegedMovers+"=true")
	resync(t, "snapshot")
	waitRepository(t, ns, "rooted", snapv1.RepositoryReady)
	s := waitSnapshot(t, ns, "capable", snapv1.SnapshotSucceeded)
	var job batchv1.Job
	if err := env.Client.Get(testContext(t), clientKey(ns, s.Status.Job.Name), &job); err != nil {
		t.Fatal(err)
	}
	caps := job.Spec.Template.Spec.Containers[0].SecurityContext.Capabilities
	if caps == nil || len(caps.Drop) != 1 || caps.Drop[0] != "ALL" || len(caps.Add) != 1 || caps.Add[0] != "SYS_ADMIN" {
		t.Fatalf("capabilities %+v: want SYS_ADMIN added and ALL still dropped", caps)
	}
}

// noJobs fails if any Job in ns carries label=value.
func noJobs(t *testing.T, ns, label, value string) {
	t.Helper()
	var jobs batchv1.JobList
	if err := env.Client.List(testContext(t), &jobs, client.InNamespace(ns), client.MatchingLabels{label: value}); err != nil {
		t.Fatal(err)
	}
	if len(jobs.Items) > 0 {
		t.Fatalf("the privilege gate should have created no Job for %s=%s, found %s", label, value, jobs.Items[0].Name)
	}
}
