package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/events"
	"github.com/snapflow/snapflow/test/harness"
)

// moverOf is the identity a pod of ns gets when it runs as the chart's mover
// ServiceAccount, as every mover pod (and any pod of a tenant) can.
func moverOf(ns string) string { return "system:serviceaccount:" + ns + ":" + chartRelease + "-mover" }

// asMover runs kubectl as ns's mover and returns its result.
func asMover(t *testing.T, ns string, args ...string) (int, string) {
	t.Helper()
	res, err := env.Kubectl(testContext(t), nil, append([]string{"--as", moverOf(ns)}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	return res.ExitCode, res.Stdout + res.Stderr
}

// A mover reports through its pod's termination message, so its account
// holds no rights: a tenant's pod that takes it can write no snapflow
// status, not even its own namespace's, and the pod gets no token.
func TestMoverAccountHasNoRights(t *testing.T) {
	const a, b = "sec-rbac-a", "sec-rbac-b"
	repoNamespace(t, a, "/repository", "")
	repoNamespace(t, b, "/repository", "")
	patch := []string{"--subresource=status", "--type=merge", "--dry-run=server", "-p", `{"status":{"phase":"Failed"}}`}
	for _, args := range [][]string{
		append([]string{"-n", a, "patch", "repository", "primary"}, patch...),
		append([]string{"-n", b, "patch", "repository", "primary"}, patch...),
		append([]string{"patch", "clusterrepository", "shared"}, patch...),
		{"-n", a, "get", "repositories"},
	} {
		code, out := asMover(t, a, args...)
		if code == 0 || !strings.Contains(out, "forbidden") {
			t.Errorf("the mover of %s ran %v: exit %d, want forbidden:\n%s", a, args, code, out)
		}
	}
	var sa corev1.ServiceAccount
	if err := env.Client.Get(testContext(t), clientKey(a, chartRelease+"-mover"), &sa); err != nil {
		t.Fatal(err)
	}
	if m := sa.AutomountServiceAccountToken; m == nil || *m {
		t.Errorf("the mover ServiceAccount mounts a token: %v", m)
	}
}

// forgeStatus patches a Snapshot's status as someone who may write status
// in its namespace. Movers may not (they hold no rights); what the
// functions delete or release must not depend on status either way.
func forgeStatus(t *testing.T, ns, name, patch string) {
	t.Helper()
	kubectl(t, nil, 0, "-n", ns, "patch", "snapshot", name, "--subresource=status", "--type=merge", "-p", patch)
}

// Whoever can write a Snapshot's status must not be able to name what the
// snapshot function deletes when a run ends: a forged
// status.staged pointing at the application's PVC leaves it in place.
func TestForgedStagedStatusDeletesNothing(t *testing.T) {
	const ns = "sec-staged"
	ctx := testContext(t)
	backupNamespace(t, ns, 2, "")
	kubectl(t, policy(ns, "app", "  copyMethod: Direct\n"), 0, "apply", "-f", "-")
	kubectl(t, snapshotOf(ns, "first", "app"), 0, "create", "-f", "-")
	waitSnapshot(t, ns, "first", snapv1.SnapshotSucceeded)
	var before corev1.PersistentVolumeClaim
	if err := env.Client.Get(ctx, clientKey(ns, "app-data"), &before); err != nil {
		t.Fatal(err)
	}

	// Clearing the conditions makes the function finish the run again,
	// and unstage what status now names.
	forged := `{"status":{"conditions":null,"staged":{"pvcName":"app-data","copyMethod":"Clone","ready":true}}}`
	forgeStatus(t, ns, "first", forged)
	eventually(t, func() error {
		var s snapv1.Snapshot
		if err := env.Client.Get(ctx, clientKey(ns, "first"), &s); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(s.Status.Conditions, wellknown.ConditionReady); c == nil {
			return fmt.Errorf("the function has not finished the run again: %+v", s.Status.Conditions)
		}
		return nil
	})
	var after corev1.PersistentVolumeClaim
	if err := env.Client.Get(ctx, clientKey(ns, "app-data"), &after); err != nil || after.UID != before.UID || after.DeletionTimestamp != nil {
		t.Fatalf("the application's PVC must survive a forged status.staged: err %v, uid %s (was %s), deleting %v", err, after.UID, before.UID, after.DeletionTimestamp)
	}
}

// A tenant points its own Snapshot's status at another namespace's
// repository and kopia snapshot, then deletes it: the cleanup function
// refuses to use the other namespace's keys, and the victim's backup stays.
func TestDecoySnapshotCannotDeleteAnotherNamespacesBackup(t *testing.T) {
	const attacker, victim = "sec-decoy-a", "sec-decoy-b"
	backupNamespace(t, victim, 2, "")
	kubectl(t, policy(victim, "app", "  copyMethod: Direct\n"), 0, "apply", "-f", "-")
	ids := backups(t, victim, "app", "precious")
	backupNamespace(t, attacker, 1, "")
	kubectl(t, policy(attacker, "app", "  copyMethod: Direct\n"), 0, "apply", "-f", "-")
	backups(t, attacker, "app", "decoy")

	forged := fmt.Sprintf(`{"status":{"resolved":{"repository":{"kind":"Repository","name":"primary","namespace":%q}},"snapshot":{"kopiaSnapshotID":%q}}}`, victim, ids["precious"])
	forgeStatus(t, attacker, "decoy", forged)
	kubectl(t, nil, 0, "-n", attacker, "delete", "snapshot", "decoy", "--wait=false")
	eventually(t, func() error {
		var s snapv1.Snapshot
		if err := env.Client.Get(testContext(t), clientKey(attacker, "decoy"), &s); err != nil {
			return err
		}
		c := meta.FindStatusCondition(s.Status.Conditions, wellknown.ConditionDeletionHeld)
		if c == nil || c.Reason != "RepositoryNotAllowed" || !strings.Contains(c.Message, victim) {
			return fmt.Errorf("want DeletionHeld RepositoryNotAllowed naming %s, got %+v", victim, s.Status.Conditions)
		}
		return nil
	})
	if left := kopiaIDs(t, victim); !left[ids["precious"]] {
		t.Fatalf("the victim's kopia snapshot %s was deleted through a decoy: %v", ids["precious"], left)
	}
	// The decoy is released the way its condition says, keeping the data.
	kubectl(t, nil, 0, "-n", attacker, "annotate", "snapshot", "decoy", wellknown.AnnotationSkipSnapshotCleanup+"=true")
	waitGone(t, attacker, "decoy")
	if left := kopiaIDs(t, victim); !left[ids["precious"]] {
		t.Fatalf("releasing the decoy deleted the victim's kopia snapshot: %v", left)
	}

	// Naming the victim's Repository outright is refused when applied, not
	// when a run starts: its password never leaves the victim's namespace.
	for _, m := range []string{
		fmt.Sprintf("apiVersion: kopiur.home-operations.com/v1alpha1\nkind: SnapshotPolicy\nmetadata: {name: steal, namespace: %s}\nspec:\n  repository: {name: primary, namespace: %s}\n  sources: [{pvc: {name: app-data}}]\n", attacker, victim),
		string(restoreOf(attacker, "steal", fmt.Sprintf("{fromPolicy: {name: app}}\n  repository: {name: primary, namespace: %s}", victim), "{pvc: {name: stolen, capacity: 1Gi}}")),
	} {
		res := kubectl(t, []byte(m), 1, "apply", "-f", "-")
		for _, want := range []string{"spec.repository.namespace", "serves only its own namespace", "remove namespace"} {
			if !strings.Contains(res.Stderr, want) {
				t.Errorf("refusal does not say %q:\n%s", want, res.Stderr)
			}
		}
	}
	// Its own namespace, spelled out, is what the default means.
	kubectl(t, []byte(fmt.Sprintf("apiVersion: kopiur.home-operations.com/v1alpha1\nkind: SnapshotPolicy\nmetadata: {name: spelled, namespace: %s}\nspec:\n  repository: {name: primary, namespace: %s}\n  sources: [{pvc: {name: app-data}}]\n", attacker, attacker)), 0, "apply", "-f", "-")
}

// Every function checks who sends: no token or a token for another audience
// is 401; a tenant's token may only send request events, and those only for
// what the tenant's own RBAC lets it create; request events may not overwrite
// a live PVC or delete files. Nothing is created by a refused event.
func TestForgedEventsAreRefused(t *testing.T) {
	const a, b = "sec-events-a", "sec-events-b"
	ctx := testContext(t)
	backupNamespace(t, b, 1, "")
	kubectl(t, policy(b, "app", "  copyMethod: Direct\n"), 0, "apply", "-f", "-")
	repoNamespace(t, a, "/repository", "")
	var tenant string
	eventually(t, func() error {
		tok, err := env.Functions.Token(ctx, a, chartRelease+"-mover")
		tenant = tok
		return err
	})
	otherAudience, err := env.Functions.TokenFor(ctx, harness.WebhookNamespace, pipelineSA, "kubernetes")
	if err != nil {
		t.Fatal(err)
	}
	structured := func(typ string, data any) []byte {
		e := cloudevents.NewEvent()
		e.SetID(fmt.Sprintf("forged-%s-%d", typ, time.Now().UnixNano()))
		e.SetSource("attacker")
		e.SetType(typ)
		if err := e.SetData(cloudevents.ApplicationJSON, data); err != nil {
			t.Fatal(err)
		}
		body, _ := json.Marshal(e)
		return body
	}
	spec := func(target map[string]any, options map[string]any) json.RawMessage {
		m := map[string]any{"source": map[string]any{"fromPolicy": map[string]any{"name": "app"}}, "target": target}
		if options != nil {
			m["options"] = options
		}
		b, _ := json.Marshal(m)
		return b
	}
	restoreReq := func(name string, target, options map[string]any) []byte {
		return structured(events.RestoreRequested, events.RestoreRequest{Namespace: b, Name: name, Spec: spec(target, options)})
	}
	resync := structured(events.Resync, map[string]string{})
	const ce = "application/cloudevents+json"
	for _, tc := range []struct {
		name, token, fn string
		body            []byte
		want            int
	}{
		{"no token", "", "snapshot", resync, http.StatusUnauthorized},
		{"garbage token", "not-a-token", "cleanup", resync, http.StatusUnauthorized},
		{"token for another audience", otherAudience, "cleanup", resync, http.StatusUnauthorized},
		{"tenant sends an internal event", tenant, "cleanup", resync, http.StatusForbidden},
		{"tenant asks for another namespace's backup", tenant, "snapshot", structured(events.SnapshotRequested, events.SnapshotRequest{Namespace: b, Policy: "app"}), http.StatusForbidden},
		{"tenant restores in another namespace", tenant, "restore", restoreReq("by-tenant", map[string]any{"pvc": map[string]any{"name": "x", "capacity": "1Gi"}}, nil), http.StatusForbidden},
		{"tenant asks the prune function", tenant, "prune", structured(events.PruneRequested, events.PruneRequest{BackupRepo: "kb-repo"}), http.StatusForbidden},
		{"a request over a live PVC", senderToken(t), "restore", restoreReq("over-live", map[string]any{"pvcRef": map[string]any{"name": "app-data"}}, nil), http.StatusBadRequest},
		{"a request that deletes files", senderToken(t), "restore", restoreReq("deleting", map[string]any{"pvc": map[string]any{"name": "y", "capacity": "1Gi"}}, map[string]any{"enableFileDeletion": true}), http.StatusBadRequest},
		{"a request reading another namespace's policy", senderToken(t), "restore", structured(events.RestoreRequested, events.RestoreRequest{Namespace: b, Name: "elsewhere",
			Spec: json.RawMessage(`{"source":{"fromPolicy":{"name":"app","namespace":"kube-system"}},"target":{"pvc":{"name":"z","capacity":"1Gi"}}}`)}), http.StatusBadRequest},
	} {
		if code := postEventAs(t, tc.token, env.Functions.Base+"/"+tc.fn, ce, tc.body); code != tc.want {
			t.Errorf("%s: answered %d, want %d", tc.name, code, tc.want)
		}
	}
	var restores snapv1.RestoreList
	var snaps snapv1.SnapshotList
	if err := env.Client.List(ctx, &restores, client.InNamespace(b)); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.List(ctx, &snaps, client.InNamespace(b)); err != nil {
		t.Fatal(err)
	}
	if len(restores.Items) != 0 || len(snaps.Items) != 0 {
		t.Fatalf("refused events created %d Restores and %d Snapshots in %s", len(restores.Items), len(snaps.Items), b)
	}
}

// A PVC a user (or a tenant's pod) put under a run's staging name is never
// backed up as the run's copy, nor deleted when the run ends.
func TestForeignStagedPVCIsNotBackedUp(t *testing.T) {
	const ns = "sec-foreign-stage"
	backupNamespace(t, ns, 1, "")
	// A recipe rule asks for a CSI snapshot, so the run stages a copy
	// (the suite's baseline would read the live volume).
	kubectl(t, []byte(`
apiVersion: v1
kind: ConfigMap
metadata: {name: recipe, namespace: `+ns+`}
data:
  policies.yaml: |
    version: v1
    volumePolicies:
      - conditions: {}
        action: {type: snapshot}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: planted-src, namespace: `+ns+`}
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
---
apiVersion: kopiur.home-operations.com/v1alpha1
kind: SnapshotPolicy
metadata: {name: app, namespace: `+ns+`}
spec:
  repository: {name: primary}
  resourcePolicy: {kind: configmap, name: recipe}
  sources: [{pvc: {name: app-data}}]
`), 0, "apply", "-f", "-")
	kubectl(t, snapshotOf(ns, "planted", "app"), 0, "create", "-f", "-")
	s := waitSnapshot(t, ns, "planted", snapv1.SnapshotFailed)
	if c := meta.FindStatusCondition(s.Status.Conditions, wellknown.ConditionReady); c == nil || !strings.Contains(c.Message, "was not made by this Snapshot") {
		t.Fatalf("want a refusal naming the foreign PVC, got %+v", s.Status.Conditions)
	}
	var pvc corev1.PersistentVolumeClaim
	if err := env.Client.Get(testContext(t), clientKey(ns, "planted-src"), &pvc); err != nil || pvc.DeletionTimestamp != nil {
		t.Fatalf("the planted PVC must be left alone: %v %v", err, pvc.DeletionTimestamp)
	}
}
