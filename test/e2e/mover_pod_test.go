package e2e

import (
	"fmt"
	"strings"
	"testing"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/test/harness"
)

// A pod labelled as snapflow's is created, or made to look like a Job's
// pod, only by the Job controller: the functions trust what such pods
// report. The local node creates the movers' pods as the Job controller,
// so a backup still runs; anyone else (here the cluster admin) is refused,
// with the field, the reason and the fix.
func TestOnlyTheJobControllerMakesMoverPods(t *testing.T) {
	const ns = "sec-moverpod"
	backupNamespace(t, ns, 1, "")
	kubectl(t, policy(ns, "app", ""), 0, "apply", "-f", "-")
	kubectl(t, snapshotOf(ns, "first", "app"), 0, "create", "-f", "-")
	waitSnapshot(t, ns, "first", snapv1.SnapshotSucceeded)

	pod := func(name, labels, owner string) []byte {
		return []byte(fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: %s
  labels: {%s}
  %s
spec:
  restartPolicy: Never
  containers: [{name: mover, image: snapflow/snapflow, args: ["sh", "-c", "echo deleted"]}]
`, name, ns, labels, owner))
	}
	const ours = `app.kubernetes.io/managed-by: snapflow, job-name: first-mover, batch.kubernetes.io/job-name: first-mover, ` +
		`controller-uid: 0b8a9f2e-0000-4000-8000-000000000001, batch.kubernetes.io/controller-uid: 0b8a9f2e-0000-4000-8000-000000000001`
	const owner = `ownerReferences: [{apiVersion: batch/v1, kind: Job, name: first-mover, uid: 0b8a9f2e-0000-4000-8000-000000000001, controller: true}]`
	refused := func(res harness.KubectlResult, wants ...string) {
		t.Helper()
		out := res.Stdout + res.Stderr
		for _, want := range wants {
			if !strings.Contains(out, want) {
				t.Errorf("the refusal does not say %q:\n%s", want, out)
			}
		}
	}
	// Whom a refusal names, and the fix.
	who := []string{"only the Job controller (", harness.JobControllerUser + ")", "drop the label app.kubernetes.io/managed-by=snapflow"}
	by := func(field string) []string { return append([]string{field}, who...) }

	// A forged mover pod, with and without the Job's controller reference.
	refused(kubectl(t, pod("forged", ours, owner), 1, "create", "-f", "-"), by("metadata.labels: ")...)
	refused(kubectl(t, pod("forged-orphan", ours, ""), 1, "create", "-f", "-"), by("metadata.labels: ")...)
	// The Job controller may (dry run: no Job runs this pod).
	kubectl(t, pod("by-the-job-controller", ours, owner), 0, "create", "--dry-run=server", "--as", harness.JobControllerUser, "-f", "-")
	// But not for a Job whose template copies the labels of snapflow's:
	// the Job controller makes pods from any Job's template, a tenant's too.
	refused(kubectl(t, pod("by-a-copied-template", ours, strings.Replace(owner, "name: first-mover", "name: tenant-job", 1)), 1,
		"create", "--dry-run=server", "--as", harness.JobControllerUser, "-f", "-"),
		`metadata.labels[batch.kubernetes.io/job-name]`, `names "first-mover", but its controller is Job tenant-job`)

	// An ordinary pod is left alone, but may not be turned into a mover's.
	kubectl(t, pod("plain", "team: storage", owner), 0, "create", "-f", "-")
	refused(kubectl(t, nil, 1, "-n", ns, "label", "pod", "plain", "app.kubernetes.io/managed-by=snapflow"), "metadata.labels")
	// Also not through the status subresource, which keeps labels.
	refused(kubectl(t, nil, 1, "-n", ns, "patch", "pod", "plain", "--subresource=status", "--type=merge", "-p",
		`{"metadata":{"labels":{"app.kubernetes.io/managed-by":"snapflow","job-name":"first-mover","batch.kubernetes.io/job-name":"first-mover","controller-uid":"0b8a9f2e-0000-4000-8000-000000000001"}}}`),
		by("metadata.labels[app.kubernetes.io/managed-by]")...)
	kubectl(t, nil, 0, "-n", ns, "label", "pod", "plain", "team=backup", "--overwrite")

	// Nor may a pod that is snapflow's be pointed at another Job.
	kubectl(t, pod("theirs", ours, ""), 0, "create", "--as", harness.JobControllerUser, "-f", "-")
	refused(kubectl(t, nil, 1, "-n", ns, "label", "pod", "theirs", "job-name=other-mover", "--overwrite"), by("metadata.labels[job-name]")...)
	refused(kubectl(t, nil, 1, "-n", ns, "patch", "pod", "theirs", "--type=merge", "-p",
		`{"metadata":{"ownerReferences":[{"apiVersion":"batch/v1","kind":"Job","name":"other-mover","uid":"0b8a9f2e-0000-4000-8000-000000000002","controller":true}]}}`),
		`names "first-mover", but its controller is Job other-mover`)
	// Removing the label only makes it untrusted.
	kubectl(t, nil, 0, "-n", ns, "label", "pod", "theirs", "app.kubernetes.io/managed-by-")

	// A function finds its Job by a name anyone can work out, so only
	// snapflow's functions may create a Job labelled as snapflow's, or
	// label one so: a Job swapped in under a mover's name is not read.
	// (Suspended: the local node runs none of these.)
	job := func(name, labels string) []byte {
		return []byte(fmt.Sprintf(`apiVersion: batch/v1
kind: Job
metadata: {name: %s, namespace: %s, labels: {%s}}
spec:
  suspend: true
  template:
    metadata: {labels: {app.kubernetes.io/managed-by: snapflow}}
    spec:
      restartPolicy: Never
      containers: [{name: mover, image: snapflow/snapflow, args: ["sh", "-c", "echo deleted"]}]
`, name, ns, labels))
	}
	jobWho := "only snapflow's functions (the webhook's --controller-users) may"
	refused(kubectl(t, job("squatter", "app.kubernetes.io/managed-by: snapflow"), 1, "create", "-f", "-"),
		"metadata.labels: ", "may not create a Job labelled app.kubernetes.io/managed-by=snapflow", jobWho)
	kubectl(t, job("by-a-function", "app.kubernetes.io/managed-by: snapflow"), 0, "create", "--dry-run=server", "--as", chartIdentity("snapshot"), "-f", "-")
	kubectl(t, job("tenant-job", "team: storage"), 0, "create", "-f", "-")
	refused(kubectl(t, nil, 1, "-n", ns, "label", "job", "tenant-job", "app.kubernetes.io/managed-by=snapflow"),
		"metadata.labels[app.kubernetes.io/managed-by]: ", "may not label a Job snapflow", jobWho)
}
