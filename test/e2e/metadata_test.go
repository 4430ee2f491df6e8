package e2e

import (
	"fmt"
	"strings"
	"testing"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
)

// A tenant with full rights on its Snapshots still cannot write the labels
// and annotations only snapflow's functions write: marking its own
// deletions pruned-by=retention would slip them past the mass-deletion
// breaker. The functions themselves still can (every retention and
// schedule test prunes through them under the chart's identities).
func TestTenantCannotForgeControllerMetadata(t *testing.T) {
	const ns, tenant = "sec-meta", "meta-tenant"
	backupNamespace(t, ns, 1, "")
	kubectl(t, policy(ns, "app", ""), 0, "apply", "-f", "-")
	kubectl(t, []byte(fmt.Sprintf(`
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: snapshots-edit, namespace: %[1]s}
rules:
  - apiGroups: [kopiur.home-operations.com]
    resources: [snapshots]
    verbs: [get, list, watch, create, update, patch, delete]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: snapshots-edit, namespace: %[1]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: snapshots-edit}
subjects: [{kind: User, apiGroup: rbac.authorization.k8s.io, name: %[2]s}]
`, ns, tenant)), 0, "apply", "-f", "-")

	as := func(stdin []byte, args ...string) (int, string) {
		t.Helper()
		res, err := env.Kubectl(testContext(t), stdin, append([]string{"--as", tenant, "-n", ns}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		return res.ExitCode, res.Stdout + res.Stderr
	}
	refused := func(what, want string, code int, out string) {
		t.Helper()
		if code == 0 || !strings.Contains(out, want) {
			t.Fatalf("%s: want a refusal containing %q, got exit %d: %s", what, want, code, out)
		}
	}

	marked := strings.Replace(string(snapshotOf(ns, "marked", "app")), "metadata: {", "metadata: {annotations: {"+wellknown.AnnotationPrunedBy+": retention}, ", 1)
	code, out := as([]byte(marked), "create", "-f", "-")
	refused("create a Snapshot marked pruned-by", "metadata.annotations["+wellknown.AnnotationPrunedBy+"]: may be set only by snapflow's functions", code, out)

	if code, out := as(snapshotOf(ns, "mine", "app"), "create", "-f", "-"); code != 0 {
		t.Fatalf("the tenant may create its own Snapshot: %s", out)
	}
	code, out = as(nil, "annotate", "snapshot", "mine", wellknown.AnnotationPrunedBy+"=retention")
	refused("annotate pruned-by", "mass-deletion breaker", code, out)
	code, out = as(nil, "label", "snapshot", "mine", wellknown.LabelSchedule+"=nightly")
	refused("label as a schedule's run", "schedule's history limits", code, out)
	code, out = as(nil, "annotate", "snapshot", "mine", wellknown.AnnotationRequestedBy+"=someone-else")
	refused("claim another sender", "who sent the request event", code, out)
	code, out = as(nil, "annotate", "snapshot", "mine", wellknown.AnnotationVolumePolicies+"={}", "--overwrite")
	refused("rewrite the stamped volume policies", "volume policies", code, out)
	if code, out := as(nil, "annotate", "snapshot", "mine", "team=billing"); code != 0 {
		t.Fatalf("an annotation of the tenant's own stays the tenant's: %s", out)
	}
	waitSnapshot(t, ns, "mine", snapv1.SnapshotSucceeded)
}
