package e2e

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/test/harness"
)

// projectedCopies lists the credential copies left in ns.
func projectedCopies(t *testing.T, ns string) []string {
	t.Helper()
	var names []string
	var secrets corev1.SecretList
	if err := env.Client.List(testContext(t), &secrets, client.InNamespace(ns), client.HasLabels{wellknown.LabelProjectedFor}); err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets.Items {
		names = append(names, "Secret/"+s.Name)
	}
	var cms corev1.ConfigMapList
	if err := env.Client.List(testContext(t), &cms, client.InNamespace(ns), client.HasLabels{wellknown.LabelProjectedFor}); err != nil {
		t.Fatal(err)
	}
	for _, c := range cms.Items {
		names = append(names, "ConfigMap/"+c.Name)
	}
	return names
}

// A ClusterRepository keeps its Secrets in the namespaces its references
// name; a backup's mover runs beside its PVC in the tenant's namespace and
// reads copies made for the run, only when the ClusterRepository's owner
// allows it and the tenant's policy asks for them.
func TestClusterRepositoryBackupProjectsCredentials(t *testing.T) {
	const credsNS = "shared-creds"
	ctx := testContext(t)
	createBucket(t, "snapflow-shared")
	// The credentials live in a namespace of their own, neither snapflow's
	// (where the bootstrap runs) nor a tenant's.
	kubectl(t, []byte(fmt.Sprintf(`
apiVersion: v1
kind: Namespace
metadata: {name: %[1]s}
---
apiVersion: v1
kind: Secret
metadata: {name: shared-s3, namespace: %[1]s}
stringData: {AWS_ACCESS_KEY_ID: %[2]s, AWS_SECRET_ACCESS_KEY: %[3]s}
---
apiVersion: v1
kind: Secret
metadata: {name: shared-password, namespace: %[1]s}
stringData: {password: shared-horse}
---
apiVersion: kopiur.home-operations.com/v1alpha1
kind: ClusterRepository
metadata:
  name: shared
  # The owner's consent to copy these credentials into tenants' namespaces.
  annotations: {snapflow.dev/allow-credential-projection: "true"}
spec:
  backend:
    s3:
      bucket: snapflow-shared
      endpoint: %[4]s
      region: %[5]s
      auth: {secretRef: {name: shared-s3, namespace: %[1]s}}
      tls: {disableTls: true}
  encryption: {passwordSecretRef: {name: shared-password, key: password, namespace: %[1]s}}
  create: {enabled: true}
  allowedNamespaces: {list: [tenant-a, tenant-b]}
`, credsNS, env.S3.AccessKey, env.S3.SecretKey, env.S3.Endpoint, env.S3.Region)), 0, "apply", "-f", "-")
	eventually(t, func() error {
		var cr snapv1.ClusterRepository
		if err := env.Client.Get(ctx, client.ObjectKey{Name: "shared"}, &cr); err != nil {
			return err
		}
		if cr.Status.Phase != snapv1.RepositoryReady {
			return fmt.Errorf("ClusterRepository phase %q, conditions %+v", cr.Status.Phase, cr.Status.Conditions)
		}
		return nil
	})
	tenant := func(ns, projection string) {
		kubectl(t, []byte(fmt.Sprintf(`
apiVersion: v1
kind: Namespace
metadata: {name: %[1]s}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: app-data, namespace: %[1]s}
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
---
apiVersion: kopiur.home-operations.com/v1alpha1
kind: SnapshotPolicy
metadata: {name: app, namespace: %[1]s}
spec:
  repository: {kind: ClusterRepository, name: shared}
  sources: [{pvc: {name: app-data}}]
%[2]s`, ns, projection)), 0, "apply", "-f", "-")
		writeFiles(t, env.Functions.Node.PVCDir(ns, "app-data"), 12)
	}

	t.Run("with consent the run reads copies, which go when it ends", func(t *testing.T) {
		const ns = "tenant-a"
		tenant(ns, "  credentialProjection: {enabled: true}\n")
		kubectl(t, snapshotOf(ns, "first", "app"), 0, "create", "-f", "-")
		s := waitSnapshot(t, ns, "first", snapv1.SnapshotSucceeded)
		if *s.Status.Stats.FilesNew != 12 {
			t.Fatalf("stats %+v", s.Status.Stats)
		}
		if r := s.Status.Resolved; r == nil || r.CredentialProjection == nil || !r.CredentialProjection.Enabled {
			t.Errorf("status.resolved.credentialProjection not pinned: %+v", r)
		}
		eventually(t, func() error {
			if left := projectedCopies(t, ns); len(left) != 0 {
				return fmt.Errorf("copies left after the run: %v", left)
			}
			var got snapv1.Snapshot
			if err := env.Client.Get(ctx, clientKey(ns, "first"), &got); err != nil {
				return err
			}
			if got.Status.Cleanup == nil || got.Status.Cleanup.CredsReapedAt == nil {
				return fmt.Errorf("status.cleanup.credsReapedAt not stamped")
			}
			return nil
		})
		// The repository's own Secrets never moved, and the bootstrap's
		// copies in snapflow's namespace are gone too.
		var pw corev1.Secret
		if err := env.Client.Get(ctx, clientKey(credsNS, "shared-password"), &pw); err != nil {
			t.Fatal(err)
		}
		if left := projectedCopies(t, harness.WebhookNamespace); len(left) != 0 {
			t.Errorf("bootstrap copies left in %s: %v", harness.WebhookNamespace, left)
		}

		// A restore from the same tenant projects for its own run.
		kubectl(t, []byte(strings.Replace(string(restoreOf(ns, "back", "{snapshotRef: {name: first}}", "{pvc: {name: restored, capacity: 1Gi}}")),
			"spec:\n", "spec:\n  credentialProjection: {enabled: true}\n", 1)), 0, "apply", "-f", "-")
		waitRestore(t, ns, "back", snapv1.RestoreCompleted)
		sameFiles(t, tree(t, env.Functions.Node.PVCDir(ns, "app-data")), tree(t, env.Functions.Node.PVCDir(ns, "restored")), true)
		eventually(t, func() error {
			if left := projectedCopies(t, ns); len(left) != 0 {
				return fmt.Errorf("copies left after the restore: %v", left)
			}
			return nil
		})
	})

	t.Run("without consent the run fails before anything is copied", func(t *testing.T) {
		const ns = "tenant-b"
		tenant(ns, "")
		kubectl(t, snapshotOf(ns, "first", "app"), 0, "create", "-f", "-")
		s := waitSnapshot(t, ns, "first", snapv1.SnapshotFailed)
		msg := ""
		if s.Status.Failure != nil {
			msg = s.Status.Failure.Message
		}
		for _, c := range s.Status.Conditions {
			msg += " " + c.Message
		}
		for _, want := range []string{"ClusterRepository/shared", "namespace " + credsNS, "spec.credentialProjection.enabled: true on SnapshotPolicy app"} {
			if !strings.Contains(msg, want) {
				t.Errorf("the failure does not say %q: %s", want, msg)
			}
		}
		if left := projectedCopies(t, ns); len(left) != 0 {
			t.Errorf("copies were made without consent: %v", left)
		}
	})

	// Both tenants may use the repository; neither may write under, read or
	// delete the other's snapshots in it, whatever its status says.
	t.Run("a tenant cannot reach another tenant's snapshots", func(t *testing.T) {
		const owner, attacker = "tenant-a", "tenant-b"
		var first snapv1.Snapshot
		if err := env.Client.Get(ctx, clientKey(owner, "first"), &first); err != nil || first.Status.Snapshot == nil {
			t.Fatalf("tenant-a's backup from the first subtest: %v", err)
		}
		id := first.Status.Snapshot.KopiaSnapshotID

		res, err := env.Kubectl(ctx, []byte(fmt.Sprintf(`
apiVersion: kopiur.home-operations.com/v1alpha1
kind: SnapshotPolicy
metadata: {name: impostor, namespace: %s}
spec:
  repository: {kind: ClusterRepository, name: shared}
  identity: {username: app, hostname: %s}
  sources: [{pvc: {name: app-data}}]
`, attacker, owner)), "apply", "-f", "-")
		if err != nil {
			t.Fatal(err)
		}
		if res.ExitCode == 0 || !strings.Contains(res.Stderr, `kopia hostname "tenant-a" belongs to namespace "tenant-a", not "tenant-b"`) {
			t.Fatalf("a policy writing under another tenant's hostname was not refused: %s %s", res.Stdout, res.Stderr)
		}

		// A decoy: tenant-b's failed Snapshot, its status forged (by someone
		// who may write status in tenant-b) to name tenant-a's kopia snapshot.
		forged := fmt.Sprintf(`{"status":{"phase":"Succeeded","resolved":{"repository":{"kind":"ClusterRepository","name":"shared"}},"snapshot":{"kopiaSnapshotID":%q}}}`, id)
		forgeStatus(t, attacker, "first", forged)
		kubectl(t, nil, 0, "-n", attacker, "delete", "snapshot", "first", "--wait=false")
		eventually(t, func() error {
			var s snapv1.Snapshot
			if err := env.Client.Get(ctx, clientKey(attacker, "first"), &s); err != nil {
				return err
			}
			c := meta.FindStatusCondition(s.Status.Conditions, wellknown.ConditionDeletionHeld)
			if c == nil || c.Reason != "SnapshotNotOwned" || !strings.Contains(c.Message, `belongs to namespace "tenant-a"`) {
				return fmt.Errorf("want DeletionHeld SnapshotNotOwned, got %+v", s.Status.Conditions)
			}
			return nil
		})

		// A Restore in tenant-b naming tenant-a's Snapshot is read only with
		// the rights of whoever wrote it: a tenant-b user who may create
		// Restores but not read tenant-a's Snapshots learns nothing of it.
		const restorer = "tenant-b-restorer"
		kubectl(t, []byte(fmt.Sprintf(`
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: restores, namespace: %[1]s}
rules: [{apiGroups: [kopiur.home-operations.com], resources: [restores], verbs: [get, create]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: restores, namespace: %[1]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: restores}
subjects: [{kind: User, apiGroup: rbac.authorization.k8s.io, name: %[2]s}]
`, attacker, restorer)), 0, "apply", "-f", "-")
		steal := strings.Replace(string(restoreOf(attacker, "steal", fmt.Sprintf("{snapshotRef: {name: first, namespace: %s}}", owner), "{pvc: {name: stolen, capacity: 1Gi}}")),
			"spec:\n", "spec:\n  credentialProjection: {enabled: true}\n", 1)
		if res, err := env.Kubectl(ctx, []byte(steal), "--as", restorer, "create", "-f", "-"); err != nil || res.ExitCode != 0 {
			t.Fatalf("create the Restore as %s: %v %s", restorer, err, res.Stderr)
		}
		rs := waitRestore(t, attacker, "steal", snapv1.RestoreFailed)
		if f := rs.Status.Failure; f == nil || f.Class != "SourceNotAllowed" || !strings.Contains(f.Message, `may not get snapshots in namespace "tenant-a"`) || !strings.Contains(f.Message, restorer) {
			t.Errorf("a Restore reading another namespace's Snapshot without its author's rights: want SourceNotAllowed naming the author and the right, got %+v", f)
		}
		if rs.Status.Resolved != nil {
			t.Errorf("the refused Restore resolved tenant-a's Snapshot: %+v", rs.Status.Resolved)
		}

		// tenant-a's data is still there: it restores it again.
		kubectl(t, []byte(strings.Replace(string(restoreOf(owner, "again", "{snapshotRef: {name: first}}", "{pvc: {name: again, capacity: 1Gi}}")),
			"spec:\n", "spec:\n  credentialProjection: {enabled: true}\n", 1)), 0, "apply", "-f", "-")
		waitRestore(t, owner, "again", snapv1.RestoreCompleted)
		sameFiles(t, tree(t, env.Functions.Node.PVCDir(owner, "app-data")), tree(t, env.Functions.Node.PVCDir(owner, "again")), true)

		// The decoy is released the way its condition says.
		kubectl(t, nil, 0, "-n", attacker, "annotate", "snapshot", "first", wellknown.AnnotationSkipSnapshotCleanup+"=true")
		waitGone(t, attacker, "first")
	})
}
