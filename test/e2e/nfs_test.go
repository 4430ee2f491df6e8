package e2e

import (
	"fmt"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
)

// An nfs source backs up an export with no PVC, from the manifest the
// guide's example gives (no copyMethod). The node would mount the export
// with its own identity, so the run waits, refused, until the namespace
// opts in; then the mover reads it read-only under the export path's
// identity, and a restore gives its bytes back. An export beside another
// source is refused at admission.
func TestBackupFromAnNFSExport(t *testing.T) {
	const ns = "source-nfs"
	backupNamespace(t, ns, 0, "")
	export := env.Functions.Node.NFSDir("nas.example", "/exports/media")
	writeFiles(t, export, 9)
	applied := kubectl(t, []byte(fmt.Sprintf(`
apiVersion: kopiur.home-operations.com/v1alpha1
kind: SnapshotPolicy
metadata: {name: media, namespace: %s}
spec:
  repository: {name: primary}
  sources:
    - nfs: {server: nas.example, path: /exports/media}
`, ns)), 0, "apply", "-f", "-")
	if !strings.Contains(applied.Stderr, "NFS export nas.example:/exports/media") || !strings.Contains(applied.Stderr, wellknown.AnnotationPrivilegedMovers) {
		t.Fatalf("kubectl said %q, want a warning that runs need the namespace's opt-in to mount the export", applied.Stderr)
	}
	kubectl(t, snapshotOf(ns, "first", "media"), 0, "create", "-f", "-")
	eventually(t, func() error {
		var s snapv1.Snapshot
		if err := env.Client.Get(testContext(t), clientKey(ns, "first"), &s); err != nil {
			return err
		}
		c := meta.FindStatusCondition(s.Status.Conditions, wellknown.ConditionMoverPermitted)
		if s.Status.Phase != snapv1.SnapshotPending || c == nil || c.Status != "False" || !strings.Contains(c.Message, "NFS export nas.example:/exports/media") {
			return fmt.Errorf("phase %s MoverPermitted %+v: want Pending, refused naming the export", s.Status.Phase, c)
		}
		return nil
	})
	noJobs(t, ns, wellknown.LabelSnapshot, "first")

	kubectl(t, nil, 0, "annotate", "namespace", ns, wellknown.AnnotationPrivilegedMovers+"=true")
	resync(t, "snapshot")
	s := waitSnapshot(t, ns, "first", snapv1.SnapshotSucceeded)
	if r := s.Status.Snapshot; r == nil || r.Identity == nil || r.Identity.SourcePath != "/exports/media" || r.Identity.Hostname != ns {
		t.Fatalf("snapshot %+v: want the export path as the kopia source path", s.Status.Snapshot)
	}
	if st := s.Status.Stats; st == nil || st.FilesNew == nil || *st.FilesNew != 9 {
		t.Fatalf("stats %+v, want the export's 9 files", s.Status.Stats)
	}
	var job batchv1.Job
	if err := env.Client.Get(testContext(t), clientKey(ns, s.Status.Job.Name), &job); err != nil {
		t.Fatal(err)
	}
	var mounted bool
	for _, v := range job.Spec.Template.Spec.Volumes {
		if v.Name == "source" {
			mounted = v.NFS != nil && v.NFS.Server == "nas.example" && v.NFS.Path == "/exports/media" && v.NFS.ReadOnly
		}
	}
	if !mounted {
		t.Fatalf("mover volumes %+v: want the export mounted read-only", job.Spec.Template.Spec.Volumes)
	}

	if d := onlyDecision(t, s); d.Action != "fs-backup" || d.CopyMethod != snapv1.CopyDirect || d.PVC != "" {
		t.Fatalf("decision %+v: want the global baseline's fs-backup for the export", d)
	}

	kubectl(t, restoreOf(ns, "back", "{snapshotRef: {name: first}}", "{pvc: {name: restored, capacity: 1Gi}}"), 0, "apply", "-f", "-")
	waitRestore(t, ns, "back", snapv1.RestoreCompleted)
	sameFiles(t, tree(t, export), tree(t, env.Functions.Node.PVCDir(ns, "restored")), true)

	// A volume policy rule matching the export by its server and path that
	// asks for a CSI snapshot fails the run: never read live instead.
	export2 := env.Functions.Node.NFSDir("nas.example", "/exports/photos")
	writeFiles(t, export2, 2)
	kubectl(t, []byte(fmt.Sprintf(`
apiVersion: v1
kind: ConfigMap
metadata: {name: recipe-policies, namespace: %[1]s}
data:
  policies.yaml: |
    version: v1
    volumePolicies:
      - conditions: {nfs: {server: nas.example, path: /exports/photos}}
        action: {type: snapshot}
---
apiVersion: kopiur.home-operations.com/v1alpha1
kind: SnapshotPolicy
metadata: {name: photos, namespace: %[1]s}
spec:
  repository: {name: primary}
  resourcePolicy: {kind: configmap, name: recipe-policies}
  sources:
    - nfs: {server: nas.example, path: /exports/photos}
`, ns)), 0, "apply", "-f", "-")
	kubectl(t, snapshotOf(ns, "photos", "photos"), 0, "create", "-f", "-")
	failed := waitSnapshot(t, ns, "photos", snapv1.SnapshotFailed)
	if f := failed.Status.Failure; f == nil || !strings.Contains(f.Message, "nothing can snapshot") || !strings.Contains(f.Message, "nas.example:/exports/photos") {
		t.Fatalf("failure %+v, want the snapshot rule refused for the export", failed.Status.Failure)
	}
	noJobs(t, ns, wellknown.LabelSnapshot, "photos")

	out := kubectl(t, []byte(fmt.Sprintf(`
apiVersion: kopiur.home-operations.com/v1alpha1
kind: SnapshotPolicy
metadata: {name: mixed, namespace: %s}
spec:
  repository: {name: primary}
  sources:
    - pvc: {name: app-data}
    - nfs: {server: nas.example, path: /exports/media}
`, ns)), 1, "apply", "-f", "-")
	if !strings.Contains(out.Stderr, "spec.sources[1].nfs") || !strings.Contains(out.Stderr, "only source of its SnapshotPolicy") {
		t.Fatalf("kubectl said %q, want the export beside a PVC refused at spec.sources[1].nfs", out.Stderr)
	}
}
