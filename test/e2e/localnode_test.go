package e2e

import (
	"fmt"
	"os"
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
metadata: {name: late, namespace: `+ns+`}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
  dataSource: {kind: PersistentVolumeClaim, name: origin}
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
	// The source of the clone does not exist yet, so the claim cannot bind:
	// the pod is created and stays Pending.
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

	// The source appears; the clone is filled and bound, then the pod runs
	// and sees every file.
	// Written aside and moved into place whole, so the node copies all or nothing.
	origin := env.Functions.Node.PVCDir(ns, "origin")
	writeFiles(t, origin+".tmp", 12)
	if err := os.Rename(origin+".tmp", origin); err != nil {
		t.Fatal(err)
	}
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
