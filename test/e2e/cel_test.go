package e2e

import (
	"strings"
	"testing"
)

// The CRDs themselves refuse every "exactly one of" violation, so even a
// cluster without snapflow's webhook never stores an ambiguous object.
func TestCRDRejectsAmbiguousObjects(t *testing.T) {
	kubectl(t, []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"cel-rules"}}`), 0, "apply", "-f", "-")
	const policyHead = "apiVersion: kopiur.home-operations.com/v1alpha1\nkind: SnapshotPolicy\nmetadata: {name: p, namespace: cel-rules}\n"
	const scheduleHead = "apiVersion: kopiur.home-operations.com/v1alpha1\nkind: SnapshotSchedule\nmetadata: {name: s, namespace: cel-rules}\n"
	const restoreHead = "apiVersion: kopiur.home-operations.com/v1alpha1\nkind: Restore\nmetadata: {name: r, namespace: cel-rules}\n"
	const repoHead = "apiVersion: kopiur.home-operations.com/v1alpha1\nkind: Repository\nmetadata: {name: repo, namespace: cel-rules}\n"
	cases := []struct {
		name, manifest, want string
	}{
		{"policy with repository and repositories", policyHead + `spec:
  repository: {name: a}
  repositories: [{name: b}]
  sources: [{pvc: {name: data}}]`, "exactly one of repository, repositories"},
		{"policy with neither repository nor repositories", policyHead + `spec:
  sources: [{pvc: {name: data}}]`, "exactly one of repository, repositories"},
		{"source with two forms", policyHead + `spec:
  repository: {name: a}
  sources: [{pvc: {name: data}, nfs: {server: nas, path: /export}}]`, "exactly one of pvc, pvcSelector, nfs, stream"},
		{"source with no form", policyHead + `spec:
  repository: {name: a}
  sources: [{readOnly: true}]`, "exactly one of pvc, pvcSelector, nfs, stream"},
		{"hook with two forms", policyHead + `spec:
  repository: {name: a}
  sources: [{pvc: {name: data}}]
  hooks:
    beforeSnapshot:
      - httpRequest: {url: "http://x"}
        workloadExec: {podSelector: {}, command: [sync]}`, "exactly one of workloadExec, runJob, httpRequest"},
		{"schedule with policyRef and policySelector", scheduleHead + `spec:
  policyRef: {name: p}
  policySelector: {matchLabels: {tier: critical}}
  schedule: {cron: "0 2 * * *"}`, "exactly one of policyRef, policySelector"},
		{"schedule with neither", scheduleHead + `spec:
  schedule: {cron: "0 2 * * *"}`, "exactly one of policyRef, policySelector"},
		{"restore with two sources", restoreHead + `spec:
  source: {snapshotRef: {name: s}, fromPolicy: {name: p}}
  target: {pvcRef: {name: data}}`, "exactly one of snapshotRef, fromPolicy, identity"},
		{"restore with two targets", restoreHead + `spec:
  source: {snapshotRef: {name: s}}
  target: {pvcRef: {name: data}, populator: {}}`, "exactly one of pvc, pvcRef, populator, streamExec"},
		{"repository with two backends", repoHead + `spec:
  backend: {filesystem: {path: /r}, s3: {bucket: my-bucket}}
  encryption: {passwordSecretRef: {name: pw}}`, "exactly one of azure, b2, filesystem, gcs, gdrive, rclone, s3, sftp, webDav"},
		{"repository with no backend", repoHead + `spec:
  backend: {}
  encryption: {passwordSecretRef: {name: pw}}`, "exactly one of azure, b2, filesystem, gcs, gdrive, rclone, s3, sftp, webDav"},
		{"s3 auth with both forms", repoHead + `spec:
  backend: {s3: {bucket: my-bucket, auth: {secretRef: {name: c}, workloadIdentity: {}}}}
  encryption: {passwordSecretRef: {name: pw}}`, "exactly one of secretRef, workloadIdentity"},
		{"cluster repository tenancy with two forms", `apiVersion: kopiur.home-operations.com/v1alpha1
kind: ClusterRepository
metadata: {name: cel-two-tenancies}
spec:
  backend: {filesystem: {path: /r}}
  encryption: {passwordSecretRef: {name: pw, namespace: x}}
  allowedNamespaces: {list: [a], all: true}`, "exactly one of list, selector, all"},
		{"unknown copyMethod", policyHead + `spec:
  repository: {name: a}
  sources: [{pvc: {name: data}}]
  copyMethod: Rsync`, `Unsupported value: "Rsync"`},
		{"repositories over the limit of 8", policyHead + `spec:
  repositories: [{name: r1},{name: r2},{name: r3},{name: r4},{name: r5},{name: r6},{name: r7},{name: r8},{name: r9}]
  sources: [{pvc: {name: data}}]`, "must have at most 8 items"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := kubectl(t, []byte(tc.manifest), 1, "apply", "-f", "-")
			if !strings.Contains(res.Stderr, tc.want) {
				t.Fatalf("want the apiserver to say %q, got:\n%s", tc.want, res.Stderr)
			}
		})
	}
	// The valid shape of the same objects is accepted, so the refusals above
	// are about the ambiguity and nothing else.
	kubectl(t, []byte(policyHead+`spec:
  repository: {name: a}
  sources: [{pvc: {name: data}}]`), 0, "apply", "-f", "-")
	kubectl(t, []byte(scheduleHead+`spec:
  policyRef: {name: p}
  schedule: {cron: "0 2 * * *"}`), 0, "apply", "-f", "-")
}
