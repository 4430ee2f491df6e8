package e2e

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/events"
	"github.com/snapflow/snapflow/internal/repousage"
)

// waitMaintenanceRun waits until mode's run of Maintenance ns/name ended
// for a slot at or after since, and returns it with the Maintenance.
func waitMaintenanceRun(t *testing.T, ns, name, mode string, since time.Time) (snapv1.MaintenanceRun, *snapv1.Maintenance) {
	t.Helper()
	var m snapv1.Maintenance
	var got snapv1.MaintenanceRun
	eventually(t, func() error {
		if err := env.Client.Get(testContext(t), clientKey(ns, name), &m); err != nil {
			return err
		}
		for _, r := range m.Status.Runs {
			if r.Mode == mode && r.Phase != "Running" && !r.Slot.Time.Before(since) {
				got = r
				return nil
			}
		}
		return fmt.Errorf("no finished %s run of %s/%s since %s: %+v %+v", mode, ns, name, since, m.Status.Runs, m.Status.Conditions)
	})
	return got, &m
}

// requestMaintenance asks for a run now through the run-requested
// annotation, as `kubectl annotate` does, and returns the requested slot.
func requestMaintenance(t *testing.T, ns, name, mode string, extra ...string) time.Time {
	t.Helper()
	time.Sleep(1100 * time.Millisecond) // slots have whole seconds
	at := time.Now().UTC().Truncate(time.Second)
	args := []string{"annotate", "maintenance", name, "-n", ns, "--overwrite",
		wellknown.AnnotationMaintenanceRunReq + "=" + at.Format(time.RFC3339), wellknown.AnnotationMaintenanceRunMode + "=" + mode}
	kubectl(t, nil, 0, append(args, extra...)...)
	return at
}

// repositoryUsage is what `snapflow repository usage primary -o json` says
// of ns's repository.
func repositoryUsage(t *testing.T, ns string) repousage.Report {
	t.Helper()
	out, errOut, code := runSnapflow(t, "repository", "usage", "primary", "-n", ns, "-o", "json")
	var rep repousage.Report
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil {
		t.Fatalf("snapflow repository usage: exit %d\n%s\n%s", code, out, errOut)
	}
	return rep
}

// reclaimable waits until Repository primary in ns says want bytes of
// its storage are reclaimable, as its last full maintenance run found.
func reclaimable(t *testing.T, ns string, want int64) {
	t.Helper()
	eventually(t, func() error {
		var r snapv1.Repository
		if err := env.Client.Get(testContext(t), clientKey(ns, "primary"), &r); err != nil {
			return err
		}
		if ss := r.Status.StorageStats; ss == nil || ss.ReclaimableBytes == nil || *ss.ReclaimableBytes != want {
			return fmt.Errorf("repository storageStats %+v, want %d bytes reclaimable", ss, want)
		}
		return nil
	})
}

// dirBytes sums the sizes of the regular files under dir.
func dirBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() {
			n += info.Size()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A repository gets its default Maintenance; after a backup is deleted, a
// full run reclaims its bytes on disk and says how many; a second cluster's
// Maintenance of the same repository is skipped until it takes over.
func TestMaintenanceReclaimsDeletedBackups(t *testing.T) {
	const ns = "maintenance-gc"
	backupNamespace(t, ns, 2, "")
	ctx := testContext(t)

	// The default Maintenance: owned by the repository, on the
	// function's default crons.
	var def snapv1.Maintenance
	eventually(t, func() error { return env.Client.Get(ctx, clientKey(ns, "primary"), &def) })
	if def.Labels[wellknown.LabelMaintenanceDefault] != "true" || len(def.OwnerReferences) != 1 || def.OwnerReferences[0].Kind != "Repository" ||
		def.Spec.Repository.Name != "primary" || def.Spec.Schedule == nil || def.Spec.Schedule.Full == nil || def.Spec.Schedule.Full.Cron == "" {
		t.Fatalf("default Maintenance: %+v", def)
	}

	big := make([]byte, 3<<20)
	_, _ = rand.Read(big)
	if err := os.WriteFile(filepath.Join(env.Functions.Node.PVCDir(ns, "app-data"), "big.bin"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	kubectl(t, policy(ns, "app", "  defaultDeletionPolicy: Delete\n"), 0, "apply", "-f", "-")
	kubectl(t, snapshotOf(ns, "s1", "app"), 0, "apply", "-f", "-")
	waitSnapshot(t, ns, "s1", snapv1.SnapshotSucceeded)

	// A quick run claims the unowned repository for this cluster.
	var system corev1.Namespace
	if err := env.Client.Get(ctx, client.ObjectKey{Name: metav1.NamespaceSystem}, &system); err != nil {
		t.Fatal(err)
	}
	owner := "snapflow@" + string(system.UID)
	at := requestMaintenance(t, ns, "primary", "quick")
	run, m := waitMaintenanceRun(t, ns, "primary", "quick", at)
	if run.Phase != "Succeeded" || m.Status.Owner != owner || !meta.IsStatusConditionTrue(m.Status.Conditions, wellknown.ConditionMaintenanceOwned) {
		t.Fatalf("quick run %+v, status %+v", run, m.Status)
	}

	// Before any full run, `repository usage` knows the backup's share
	// but not what storage holds, and says how to learn it.
	use := repositoryUsage(t, ns)
	if len(use.Groups) != 1 || use.Groups[0].Snapshots != 1 || use.Groups[0].Added.Day < 5<<19 || use.Groups[0].Policy != ns+"/app" ||
		use.StoredBytes != nil || len(use.Notes) == 0 || !strings.Contains(use.Notes[0], "maintenance run") {
		t.Fatalf("repository usage before a full run: %+v", use)
	}

	// Delete the backup. A full run with kopia's default margins frees
	// nothing of it yet, but says what a later run will: its bytes, which
	// no snapshot references any more.
	kubectl(t, nil, 0, "delete", "snapshot", "s1", "-n", ns, "--wait=false")
	waitGone(t, ns, "s1")
	labels := []string{"repository_kind", "Repository", "namespace", ns, "repository", "primary"}
	at = requestMaintenance(t, ns, "primary", "full")
	kept, _ := waitMaintenanceRun(t, ns, "primary", "full", at)
	if kept.Phase != "Succeeded" || kept.Safety != "full" || kept.ReclaimableBytes == nil || kept.BytesAfter == nil ||
		*kept.ReclaimableBytes < 5<<19 || *kept.ReclaimableBytes > *kept.BytesAfter {
		t.Fatalf("full run with safety full %+v: want about 3 MiB reclaimable, at most what is stored", kept)
	}
	reclaimable(t, ns, *kept.ReclaimableBytes)
	if use = repositoryUsage(t, ns); len(use.Groups) != 0 || use.ReclaimableBytes == nil || *use.ReclaimableBytes != *kept.ReclaimableBytes {
		t.Fatalf("repository usage after the run: %+v, want no snapshot and %d bytes reclaimable", use, *kept.ReclaimableBytes)
	}
	if out, errOut, code := runSnapflow(t, "repository", "usage", "primary", "-n", ns); code != 0 || !strings.Contains(out, "reclaimable:") {
		t.Fatalf("snapflow repository usage: exit %d\n%s\n%s", code, out, errOut)
	}
	exported(t, map[string]float64{series("snapflow_repository_reclaimable_bytes", labels...): float64(*kept.ReclaimableBytes)})

	// A full run with safety none gives the bytes back.
	repoDir := filepath.Join(env.Functions.Node.PVCDir(ns, "kopia-repo"), "repository")
	before := dirBytes(t, repoDir)
	// As a user would: the CLI asks for the run and follows it.
	time.Sleep(1100 * time.Millisecond) // slots have whole seconds
	at = time.Now().UTC().Truncate(time.Second)
	stdout, stderr, code := runSnapflow(t, "maintenance", "run", "primary", "-n", ns, "--full", "--safety", "none", "--wait", "-o", "json")
	if code != 0 || !strings.Contains(stderr, "requested a full maintenance run") {
		t.Fatalf("snapflow maintenance run: exit %d\n%s\n%s", code, stdout, stderr)
	}
	var printed snapv1.MaintenanceRun
	if err := json.Unmarshal([]byte(stdout), &printed); err != nil || printed.Phase != "Succeeded" {
		t.Fatalf("snapflow maintenance run printed %q (%v)", stdout, err)
	}
	run, m = waitMaintenanceRun(t, ns, "primary", "full", at)
	after := dirBytes(t, repoDir)
	if run.Phase != "Succeeded" || run.ReclaimedBytes == nil || *run.ReclaimedBytes < 5<<19 || run.Safety != "none" {
		t.Fatalf("full run %+v: want about 3 MiB reclaimed with safety none", run)
	}
	if run.ReclaimableBytes == nil || *run.ReclaimableBytes >= 5<<19 {
		t.Fatalf("full run %+v: want next to nothing left reclaimable", run)
	}
	reclaimable(t, ns, *run.ReclaimableBytes)
	if before-after < 5<<19 {
		t.Fatalf("the repository holds %d bytes on disk after full maintenance, %d before: want about 3 MiB less", after, before)
	}
	if m.Status.LastFullSucceeded == nil || m.Status.LastReclaimedBytes == nil || *m.Status.LastReclaimedBytes != *run.ReclaimedBytes {
		t.Fatalf("status after the full run: %+v", m.Status)
	}
	// The repository says what its storage holds now, as the run counted
	// it, and so does the exporter.
	if run.BytesAfter == nil || run.BlobsAfter == nil || *run.BytesAfter <= 0 || *run.BytesAfter > after {
		t.Fatalf("full run counted %v bytes in %v blobs; the directory holds %d", run.BytesAfter, run.BlobsAfter, after)
	}
	eventually(t, func() error {
		var r snapv1.Repository
		if err := env.Client.Get(ctx, clientKey(ns, "primary"), &r); err != nil {
			return err
		}
		ss := r.Status.StorageStats
		if ss == nil || ss.StoredBytes == nil || *ss.StoredBytes != *run.BytesAfter || ss.BlobCount == nil || *ss.BlobCount != *run.BlobsAfter ||
			ss.StoredObservedAt == nil || !ss.StoredObservedAt.Equal(run.CompletedAt) {
			return fmt.Errorf("repository storageStats %+v, want the full run's %d bytes in %d blobs", ss, *run.BytesAfter, *run.BlobsAfter)
		}
		return nil
	})
	if wide := kubectl(t, nil, 0, "get", "repository", "primary", "-n", ns, "-o", "wide").Stdout; !strings.Contains(wide, "STORED") || !strings.Contains(wide, "RECLAIMABLE") || !strings.Contains(wide, fmt.Sprint(*run.BytesAfter)) {
		t.Fatalf("kubectl get repository -o wide shows no stored bytes:\n%s", wide)
	}
	exported(t, map[string]float64{series("snapflow_repository_stored_bytes", labels...): float64(*run.BytesAfter),
		series("snapflow_repository_blobs", labels...): float64(*run.BlobsAfter)})
	eventually(t, func() error {
		if _, ok := env.Functions.Emitted.Find(events.MaintenanceSucceeded, ns+"/primary"); !ok {
			return fmt.Errorf("no %s event among %v", events.MaintenanceSucceeded, env.Functions.Emitted.Types())
		}
		return nil
	})
	res := kubectl(t, nil, 0, "get", "maintenance", "-n", ns, "primary")
	if !strings.Contains(res.Stdout, owner) || !strings.Contains(res.Stdout, fmt.Sprint(*run.ReclaimedBytes)) {
		t.Fatalf("kubectl get maintenance shows no owner or reclaimed bytes:\n%s", res.Stdout)
	}

	// The default follows the repository's spec.maintenance.
	kubectl(t, nil, 0, "patch", "repository", "primary", "-n", ns, "--type=merge", "-p", `{"spec":{"maintenance":{"schedule":{"full":{"cron":"0 4 * * 0"},"quick":{"cron":"30 * * * *"}}}}}`)
	eventually(t, func() error {
		if err := env.Client.Get(ctx, clientKey(ns, "primary"), &def); err != nil {
			return err
		}
		if s := def.Spec.Schedule; s == nil || s.Full == nil || s.Full.Cron != "0 4 * * 0" || s.Quick == nil || s.Quick.Cron != "30 * * * *" {
			return fmt.Errorf("the default Maintenance's schedule did not follow the repository: %+v", def.Spec.Schedule)
		}
		return nil
	})

	// Another cluster's Maintenance of the same repository: skipped, and
	// the default one steps aside for it.
	other := fmt.Sprintf(`
apiVersion: kopiur.home-operations.com/v1alpha1
kind: Maintenance
metadata: {name: dr-site, namespace: %s}
spec:
  repository: {name: primary}
  ownership: {owner: snapflow@dr-site, takeoverPolicy: %%s}
`, ns)
	kubectl(t, []byte(fmt.Sprintf(other, "Never")), 0, "apply", "-f", "-")
	eventually(t, func() error {
		err := env.Client.Get(ctx, clientKey(ns, "primary"), &snapv1.Maintenance{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("the default Maintenance is still there beside dr-site (%v)", err)
	})
	at = requestMaintenance(t, ns, "dr-site", "quick")
	run, m = waitMaintenanceRun(t, ns, "dr-site", "quick", at)
	if run.Phase != "Skipped" || m.Status.RepositoryOwner != owner || !meta.IsStatusConditionFalse(m.Status.Conditions, wellknown.ConditionMaintenanceOwned) ||
		!strings.Contains(run.Message, owner) {
		t.Fatalf("a second owner's run: %+v, status %+v", run, m.Status)
	}
	kubectl(t, []byte(fmt.Sprintf(other, "Always")), 0, "apply", "-f", "-")
	at = requestMaintenance(t, ns, "dr-site", "quick")
	run, m = waitMaintenanceRun(t, ns, "dr-site", "quick", at)
	if run.Phase != "Succeeded" || m.Status.Owner != "snapflow@dr-site" || !strings.Contains(run.Message, "took the maintenance ownership from "+owner) {
		t.Fatalf("takeover: %+v, status %+v", run, m.Status)
	}

	// Bad input is refused at admission, naming the field.
	res = kubectl(t, []byte(strings.Replace(fmt.Sprintf(other, "Always"), "snapflow@dr-site", "dr-site", 1)), 1, "apply", "-f", "-")
	if !strings.Contains(res.Stderr, "spec.ownership.owner") || !strings.Contains(res.Stderr, "user@host") {
		t.Fatalf("an owner without a host was not refused with the field: %s", res.Stderr)
	}
	res = kubectl(t, nil, 1, "annotate", "maintenance", "dr-site", "-n", ns, "--overwrite", wellknown.AnnotationMaintenanceRunReq+"=soon")
	if !strings.Contains(res.Stderr, "invalid maintenance run annotation") {
		t.Fatalf("a run request that is no time was not refused: %s", res.Stderr)
	}
}

// A tenant may not maintain a shared ClusterRepository: maintenance
// deletes every tenant's unreferenced data.
func TestTenantsMayNotMaintainAClusterRepository(t *testing.T) {
	const ns = "maintenance-tenant"
	kubectl(t, []byte(fmt.Sprintf(`
apiVersion: v1
kind: Namespace
metadata: {name: %[1]s}
---
apiVersion: kopiur.home-operations.com/v1alpha1
kind: ClusterRepository
metadata: {name: maintenance-shared}
spec:
  backend:
    s3:
      bucket: maintenance-shared
      endpoint: %[2]s
      auth: {secretRef: {name: shared-s3, namespace: %[1]s}}
      tls: {disableTls: true}
  encryption: {passwordSecretRef: {name: shared-password, key: password, namespace: %[1]s}}
  allowedNamespaces: {list: [%[1]s]}
`, ns, env.S3.Endpoint)), 0, "apply", "-f", "-")
	t.Cleanup(func() {
		kubectl(t, nil, 0, "delete", "clusterrepository", "maintenance-shared", "--wait=false", "--ignore-not-found")
	})
	res := kubectl(t, []byte(fmt.Sprintf(`
apiVersion: kopiur.home-operations.com/v1alpha1
kind: Maintenance
metadata: {name: steal, namespace: %s}
spec:
  repository: {kind: ClusterRepository, name: maintenance-shared}
  ownership: {takeoverPolicy: Always}
`, ns)), 1, "apply", "-f", "-")
	if !strings.Contains(res.Stderr, "is maintained only from namespace") {
		t.Fatalf("a tenant's Maintenance of a ClusterRepository was not refused: %s", res.Stderr)
	}
}
