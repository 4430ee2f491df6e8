package e2e

import (
	"fmt"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/functions/snapshot"
	"github.com/snapflow/snapflow/test/localnode"
)

// workloadPod applies a Running pod bound to node that mounts claim,
// tolerating a dedicated=db taint, standing in for the application using
// the volume.
func workloadPod(t *testing.T, ns, name, node, claim string) {
	t.Helper()
	kubectl(t, []byte(`
apiVersion: v1
kind: Pod
metadata: {name: `+name+`, namespace: `+ns+`}
spec:
  nodeName: `+node+`
  tolerations: [{key: dedicated, operator: Equal, value: db, effect: NoSchedule}]
  containers: [{name: db, image: postgres:17}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: `+claim+`}}]
`), 0, "apply", "-f", "-")
	// As the kubelet of that node would report it.
	kubectl(t, nil, 0, "-n", ns, "patch", "pod", name, "--subresource=status", "--type=merge", "-p", `{"status":{"phase":"Running"}}`)
}

// moverJobOf is the mover Job of Snapshot name.
func moverJobOf(t *testing.T, ns, name string) *batchv1.Job {
	t.Helper()
	var jobs batchv1.JobList
	if err := env.Client.List(testContext(t), &jobs, client.InNamespace(ns), client.MatchingLabels{wellknown.LabelSnapshot: name}); err != nil {
		t.Fatal(err)
	}
	if len(jobs.Items) != 1 {
		t.Fatalf("%d mover Jobs for Snapshot %s/%s, want 1", len(jobs.Items), ns, name)
	}
	return &jobs.Items[0]
}

// pinnedTo is the node a Job's required node affinity names, "" for none.
func pinnedTo(j *batchv1.Job) string {
	a := j.Spec.Template.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return ""
	}
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, f := range term.MatchFields {
			if f.Key == "metadata.name" && f.Operator == corev1.NodeSelectorOpIn && len(f.Values) == 1 {
				return f.Values[0]
			}
		}
	}
	return ""
}

// copyMethod: Direct mounts the live volume, and a ReadWriteOnce volume
// attaches to one node: the mover runs on the node of the pod using it,
// with that pod's tolerations, wherever that pod is.
func TestDirectMoverJoinsTheWorkloadsNode(t *testing.T) {
	const ns = "direct-rwo"
	backupNamespace(t, ns, 2, "")
	workloadPod(t, ns, "db-0", localnode.NodeName, "app-data")
	kubectl(t, policy(ns, "app", "  copyMethod: Direct\n"), 0, "apply", "-f", "-")

	kubectl(t, snapshotOf(ns, "joined", "app"), 0, "create", "-f", "-")
	waitSnapshot(t, ns, "joined", snapv1.SnapshotSucceeded)
	job := moverJobOf(t, ns, "joined")
	if node := pinnedTo(job); node != localnode.NodeName {
		t.Fatalf("the mover is pinned to %q, want the workload's node %q: %+v", node, localnode.NodeName, job.Spec.Template.Spec.Affinity)
	}
	tolerated := false
	for _, tol := range job.Spec.Template.Spec.Tolerations {
		tolerated = tolerated || (tol.Key == "dedicated" && tol.Value == "db")
	}
	if !tolerated {
		t.Fatalf("the mover lacks the workload's toleration: %+v", job.Spec.Template.Spec.Tolerations)
	}

	// The workload moved to a node this cluster's only schedulable node is
	// not: the mover follows it there, so it waits unscheduled here and
	// the run fails saying why, instead of mounting the volume elsewhere.
	kubectl(t, nil, 0, "-n", ns, "delete", "pod", "db-0", "--grace-period=0", "--force")
	workloadPod(t, ns, "db-1", "node-b", "app-data")
	kubectl(t, []byte(`
apiVersion: kopiur.home-operations.com/v1alpha1
kind: Snapshot
metadata: {name: moved, namespace: `+ns+`}
spec:
  policyRef: {name: app}
  failurePolicy: {podStartupDeadlineSeconds: 8}
`), 0, "create", "-f", "-")
	// The failed run deletes its Job, so look while it waits.
	eventually(t, func() error {
		var jobs batchv1.JobList
		if err := env.Client.List(testContext(t), &jobs, client.InNamespace(ns), client.MatchingLabels{wellknown.LabelSnapshot: "moved"}); err != nil {
			return err
		}
		if len(jobs.Items) != 1 {
			return fmt.Errorf("%d mover Jobs for the second run", len(jobs.Items))
		}
		if node := pinnedTo(&jobs.Items[0]); node != "node-b" {
			t.Fatalf("the mover is pinned to %q, want node-b", node)
		}
		return nil
	})
	s := waitSnapshot(t, ns, "moved", snapv1.SnapshotFailed)
	if f := s.Status.Failure; f == nil || f.Class != snapshot.ReasonMoverPodWedged || !strings.Contains(f.Message, "didn't match Pod's node affinity") {
		t.Fatalf("failure %+v, want %s with the scheduler's reason", s.Status.Failure, snapshot.ReasonMoverPodWedged)
	}
}

// A ReadWriteOncePod volume a pod holds cannot be mounted by a second pod
// at all: a Direct backup of it fails at once, saying what to do.
func TestDirectOnAReadWriteOncePodVolumeInUseFails(t *testing.T) {
	const ns = "direct-rwop"
	backupNamespace(t, ns, 1, "")
	kubectl(t, []byte(`
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: exclusive, namespace: `+ns+`}
spec: {accessModes: [ReadWriteOncePod], resources: {requests: {storage: 1Gi}}}
`), 0, "apply", "-f", "-")
	workloadPod(t, ns, "db-0", localnode.NodeName, "exclusive")
	kubectl(t, []byte(`
apiVersion: kopiur.home-operations.com/v1alpha1
kind: SnapshotPolicy
metadata: {name: app, namespace: `+ns+`}
spec:
  repository: {name: primary}
  copyMethod: Direct
  sources: [{pvc: {name: exclusive}}]
`), 0, "apply", "-f", "-")
	kubectl(t, snapshotOf(ns, "held", "app"), 0, "create", "-f", "-")
	s := waitSnapshot(t, ns, "held", snapv1.SnapshotFailed)
	if f := s.Status.Failure; f == nil || f.Class != snapshot.ReasonSourceInUse || !strings.Contains(f.Message, "ReadWriteOncePod") || !strings.Contains(f.Message, "copyMethod: Snapshot") {
		t.Fatalf("failure %+v, want %s naming the access mode and the fix", s.Status.Failure, snapshot.ReasonSourceInUse)
	}
}
