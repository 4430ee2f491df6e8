package e2e

import (
	"fmt"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
)

// A runJob hook is a Job the snapshot function creates with its own
// rights. A user who may edit SnapshotPolicies but not create Jobs must
// not get one through a hook: the hook runs only while the user who last
// wrote the policy may create Jobs there, and that user is recorded by
// admission, not by the manifest.
func TestHooksRunWithTheirAuthorsRights(t *testing.T) {
	const ns, editor, runner = "hook-rights", "policy-editor", "job-runner"
	backupNamespace(t, ns, 1, "")
	kubectl(t, []byte(fmt.Sprintf(`
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: policies, namespace: %[1]s}
rules:
  - apiGroups: [kopiur.home-operations.com]
    resources: [snapshotpolicies, snapshots]
    verbs: [get, list, create, update, patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: jobs, namespace: %[1]s}
rules:
  - apiGroups: [batch]
    resources: [jobs]
    verbs: [create]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: policies, namespace: %[1]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: policies}
subjects:
  - {kind: User, apiGroup: rbac.authorization.k8s.io, name: %[2]s}
  - {kind: User, apiGroup: rbac.authorization.k8s.io, name: %[3]s}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: jobs, namespace: %[1]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: jobs}
subjects: [{kind: User, apiGroup: rbac.authorization.k8s.io, name: %[3]s}]
`, ns, editor, runner)), 0, "apply", "-f", "-")
	as := func(user string, stdin []byte, args ...string) (int, string) {
		t.Helper()
		res, err := env.Kubectl(testContext(t), stdin, append([]string{"--as", user, "-n", ns}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		return res.ExitCode, res.Stdout + res.Stderr
	}
	hookJobs := func(snap string) int {
		t.Helper()
		var l batchv1.JobList
		if err := env.Client.List(testContext(t), &l, client.InNamespace(ns), client.MatchingLabels{wellknown.LabelOp: "hook", wellknown.LabelSnapshot: snap}); err != nil {
			t.Fatal(err)
		}
		return len(l.Items)
	}
	// The editor claims the runner's authorship in the manifest: admission
	// records who actually wrote it.
	forged := strings.Replace(string(policy(ns, "app", `  copyMethod: Direct
  hooks:
    beforeSnapshot:
      - runJob: {jobSpec: {template: {spec: {restartPolicy: Never, containers: [{name: sync, image: busybox, command: [sh, -c, "echo flushed"]}]}}}}
`)), "metadata: {", `metadata: {annotations: {`+wellknown.AnnotationHooksAuthor+`: '{"username":"`+runner+`"}'}, `, 1)
	if code, out := as(editor, []byte(forged), "create", "-f", "-"); code != 0 {
		t.Fatalf("the editor may create the policy: %s", out)
	}
	author := kubectl(t, nil, 0, "-n", ns, "get", "snapshotpolicy", "app", "-o", "jsonpath={.metadata.annotations.snapflow\\.dev/hooks-author}").Stdout
	if !strings.Contains(author, `"username":"`+editor+`"`) {
		t.Fatalf("hooks author %q, want the editor who wrote the policy", author)
	}
	// Annotating it afterwards does not help either: admission writes the
	// annotating user back.
	as(editor, nil, "annotate", "snapshotpolicy", "app", "--overwrite", wellknown.AnnotationHooksAuthor+`={"username":"`+runner+`"}`)
	if a := kubectl(t, nil, 0, "-n", ns, "get", "snapshotpolicy", "app", "-o", "jsonpath={.metadata.annotations.snapflow\\.dev/hooks-author}").Stdout; !strings.Contains(a, `"username":"`+editor+`"`) {
		t.Fatalf("after the editor's annotate the hooks author is %q, want still the editor", a)
	}

	if code, out := as(editor, snapshotOf(ns, "by-editor", "app"), "create", "-f", "-"); code != 0 {
		t.Fatalf("the editor may create Snapshots: %s", out)
	}
	s := waitSnapshot(t, ns, "by-editor", snapv1.SnapshotFailed)
	if f := s.Status.Failure; f == nil || f.Class != "HookFailed" || !strings.Contains(f.Message, editor+" may not create jobs in namespace \""+ns+"\"") {
		t.Fatalf("failure %+v, want the hook refused for the editor's rights", s.Status.Failure)
	}
	if n := hookJobs("by-editor"); n != 0 {
		t.Fatalf("the refused hook created %d Jobs", n)
	}

	// The runner approves the hooks by writing the policy; they now run.
	if code, out := as(runner, nil, "annotate", "snapshotpolicy", "app", "reviewed-by="+runner); code != 0 {
		t.Fatalf("the runner may write the policy: %s", out)
	}
	kubectl(t, snapshotOf(ns, "by-runner", "app"), 0, "create", "-f", "-")
	waitSnapshot(t, ns, "by-runner", snapv1.SnapshotSucceeded)
	if n := hookJobs("by-runner"); n != 1 {
		t.Fatalf("%d hook Jobs after the runner's approval, want 1", n)
	}
}
