package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The local node, like a kubelet, starts no pod before the claims it
// mounts are bound: a clone still being filled is never handed to a
// container half-copied.
func TestPodsWaitForTheirClaimsToBind(t *testing.T) {
	const ns = "late-binding"
	ensureNamespace(t, ns, "")
	kubectl(t, []byte(`
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: origin, namespace: `+ns+`}
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
`), 0, "apply", "-f", "-")
	writeFiles(t, env.Functions.Node.PVCDir(ns, "origin"), 12)
	kubectl(t, []byte(`
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: late, namespace: `+ns+`}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
  dataSource: {apiGroup: snapshot.storage.k8s.io, kind: VolumeSnapshot, name: origin-snap}
---
apiVersion: batch/v1
kind: Job
metadata: {name: count, namespace: `+ns+`}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: count
          image: busybox
          command: [sh, -c, "ls /data/docs | wc -l > /dev/termination-log"]
          volumeMounts: [{name: data, mountPath: /data}]
      volumes: [{name: data, persistentVolumeClaim: {claimName: late}}]
`), 0, "apply", "-f", "-")

	pods := func() []corev1.Pod {
		var list corev1.PodList
		if err := env.Client.List(testContext(t), &list, client.InNamespace(ns), client.MatchingLabels{"job-name": "count"}); err != nil {
			t.Fatal(err)
		}
		return list.Items
	}
	// The snapshot the claim is restored from does not exist yet, so the
	// claim cannot bind: the pod is created and stays Pending.
	eventually(t, func() error {
		if p := pods(); len(p) != 1 || p[0].Status.Phase != corev1.PodPending {
			return fmt.Errorf("want one Pending pod, have %d", len(p))
		}
		return nil
	})
	time.Sleep(2 * time.Second)
	if p := pods(); len(p) != 1 || p[0].Status.Phase != corev1.PodPending {
		t.Fatalf("the pod started before its claim was bound: %+v", p[0].Status)
	}

	// The snapshot is cut; the claim is filled from it and bound, then the
	// pod runs and sees every file.
	kubectl(t, []byte(`
apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshot
metadata: {name: origin-snap, namespace: `+ns+`}
spec: {source: {persistentVolumeClaimName: origin}}
`), 0, "apply", "-f", "-")
	eventually(t, func() error {
		p := pods()
		if len(p) != 1 || p[0].Status.Phase != corev1.PodSucceeded || len(p[0].Status.ContainerStatuses) != 1 {
			return fmt.Errorf("the pod has not succeeded: %d pods", len(p))
		}
		term := p[0].Status.ContainerStatuses[0].State.Terminated
		if term == nil || strings.TrimSpace(term.Message) != "12" {
			return fmt.Errorf("the pod saw %+v, want 12 files", term)
		}
		return nil
	})
}
