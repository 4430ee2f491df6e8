package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
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
	"github.com/snapflow/snapflow/internal/privilege"
	"github.com/snapflow/snapflow/test/harness"
)

// waitRestore waits until the Restore reaches want (failing fast on the
// other terminal phase) and is published, and returns it.
func waitRestore(t *testing.T, ns, name string, want snapv1.RestorePhase) *snapv1.Restore {
	t.Helper()
	var rs snapv1.Restore
	eventually(t, func() error {
		if err := env.Client.Get(testContext(t), clientKey(ns, name), &rs); err != nil {
			return err
		}
		if rs.Status.Phase.IsTerminal() && rs.Status.Phase != want {
			t.Fatalf("restore %s/%s ended %s, want %s: failure %+v conditions %+v", ns, name, rs.Status.Phase, want, rs.Status.Failure, rs.Status.Conditions)
		}
		if c := meta.FindStatusCondition(rs.Status.Conditions, wellknown.ConditionReady); rs.Status.Phase != want || c == nil || c.Reason != string(want) {
			return fmt.Errorf("restore %s/%s is %q, want %s published: %+v", ns, name, rs.Status.Phase, want, rs.Status.Conditions)
		}
		return nil
	})
	return &rs
}

func restoreOf(ns, name, source, target string) []byte {
	return []byte(fmt.Sprintf(`
apiVersion: kopiur.home-operations.com/v1alpha1
kind: Restore
metadata: {name: %s, namespace: %s}
spec:
  source: %s
  target: %s
`, name, ns, source, target))
}

// tree reads every regular file under dir: content, mode and mtime.
type fileState struct {
	body  []byte
	mode  os.FileMode
	mtime time.Time
}

func tree(t *testing.T, dir string) map[string]fileState {
	t.Helper()
	out := map[string]fileState{}
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		b, err := os.ReadFile(p)
		out[rel] = fileState{body: b, mode: info.Mode().Perm(), mtime: info.ModTime()}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// sameFiles compares two trees; times says whether mtimes must match too.
func sameFiles(t *testing.T, want, got map[string]fileState, times bool) {
	t.Helper()
	if len(want) == 0 {
		t.Fatal("nothing to compare")
	}
	for rel, w := range want {
		g, ok := got[rel]
		switch {
		case !ok:
			t.Errorf("%s was not restored", rel)
		case !bytes.Equal(w.body, g.body):
			t.Errorf("%s came back with other content", rel)
		case w.mode != g.mode:
			t.Errorf("%s came back with mode %v, want %v", rel, g.mode, w.mode)
		case times && !w.mtime.Equal(g.mtime):
			t.Errorf("%s came back with mtime %v, want %v", rel, g.mtime, w.mtime)
		}
	}
	if len(got) != len(want) {
		t.Errorf("restored %d files, want %d", len(got), len(want))
	}
}

func TestRestoreToANewPVCAndBackIntoTheSamePVC(t *testing.T) {
	const ns = "restore-basic"
	ctx := testContext(t)
	backupNamespace(t, ns, 6, "")
	data := env.Functions.Node.PVCDir(ns, "app-data")
	// Permissions and times the restore must bring back, on a file only
	// the mover's user may read.
	secret := filepath.Join(data, "docs", "f01.txt")
	if err := os.Chmod(secret, 0o600); err != nil {
		t.Fatal(err)
	}
	if env.Functions.Node.RunsAsPodUsers() {
		if err := os.Chown(secret, int(privilege.DefaultUID), int(privilege.DefaultUID)); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	if err := os.Chtimes(secret, old, old); err != nil {
		t.Fatal(err)
	}
	kubectl(t, policy(ns, "app", ""), 0, "apply", "-f", "-")
	kubectl(t, snapshotOf(ns, "before-loss", "app"), 0, "apply", "-f", "-")
	snap := waitSnapshot(t, ns, "before-loss", snapv1.SnapshotSucceeded)
	want := tree(t, data)

	// The data is lost.
	if err := os.RemoveAll(filepath.Join(data, "docs")); err != nil {
		t.Fatal(err)
	}

	kubectl(t, restoreOf(ns, "to-new", "{snapshotRef: {name: before-loss}}", "{pvc: {name: recovered, capacity: 1Gi, storageClassName: fast, accessModes: [ReadWriteOncePod]}}"), 0, "apply", "-f", "-")
	rs := waitRestore(t, ns, "to-new", snapv1.RestoreCompleted)
	sameFiles(t, want, tree(t, env.Functions.Node.PVCDir(ns, "recovered")), true)
	// The new claim is made as the target asked.
	var recovered corev1.PersistentVolumeClaim
	if err := env.Client.Get(ctx, clientKey(ns, "recovered"), &recovered); err != nil {
		t.Fatal(err)
	}
	if sc := recovered.Spec.StorageClassName; sc == nil || *sc != "fast" || len(recovered.Spec.AccessModes) != 1 || recovered.Spec.AccessModes[0] != corev1.ReadWriteOncePod {
		t.Errorf("restored claim: class %v, modes %v; want fast and ReadWriteOncePod", recovered.Spec.StorageClassName, recovered.Spec.AccessModes)
	}
	if r := rs.Status.Resolved; r == nil || r.KopiaSnapshotID != snap.Status.Snapshot.KopiaSnapshotID || r.Resolution != "Snapshot" || r.PinnedAt == nil {
		t.Errorf("status.resolved = %+v, want the Snapshot's kopia id pinned", rs.Status.Resolved)
	}
	if p := rs.Status.Progress; p == nil || p.FilesRestored == nil || *p.FilesRestored != 6 || *p.BytesRestored == 0 {
		t.Errorf("status.progress = %+v, want 6 files and their bytes", rs.Status.Progress)
	}
	if rs.Status.SourceKind != "snapshotRef" || rs.Status.Target == nil || rs.Status.Target.PVCRef != "recovered" {
		t.Errorf("sourceKind %q target %+v", rs.Status.SourceKind, rs.Status.Target)
	}
	var pvc corev1.PersistentVolumeClaim
	if err := env.Client.Get(ctx, clientKey(ns, "recovered"), &pvc); err != nil {
		t.Fatal(err)
	}
	if len(pvc.OwnerReferences) != 0 || pvc.Labels[wellknown.LabelRestoreUID] != string(rs.UID) {
		t.Errorf("the created PVC must outlive the Restore and name it: owners %v labels %v", pvc.OwnerReferences, pvc.Labels)
	}
	var data0 events.RestoreResult
	eventually(t, func() error {
		ev, ok := env.Functions.Emitted.Find(events.RestoreCompleted, ns+"/to-new")
		if !ok {
			return fmt.Errorf("no %s event among %v", events.RestoreCompleted, env.Functions.Emitted.Types())
		}
		return ev.DataAs(&data0)
	})
	if data0.KopiaSnapshotID == "" || data0.KopiaSnapshotID != snap.Status.Snapshot.KopiaSnapshotID || data0.FilesRestored != 6 || data0.TargetPVC != "recovered" {
		t.Errorf("restore completed event data %+v", data0)
	}

	// Back into the PVC the data was lost from.
	kubectl(t, restoreOf(ns, "in-place", "{snapshotRef: {name: before-loss}}", "{pvcRef: {name: app-data}}"), 0, "apply", "-f", "-")
	waitRestore(t, ns, "in-place", snapv1.RestoreCompleted)
	sameFiles(t, want, tree(t, data), true)

	// skipTimes: content and modes come back, the old mtime does not.
	kubectl(t, restoreOf(ns, "no-times", "{snapshotRef: {name: before-loss}}", "{pvc: {name: no-times, capacity: 1Gi}}\n  options: {skipTimes: true}"), 0, "apply", "-f", "-")
	waitRestore(t, ns, "no-times", snapv1.RestoreCompleted)
	got := tree(t, env.Functions.Node.PVCDir(ns, "no-times"))
	sameFiles(t, want, got, false)
	if got[filepath.Join("docs", "f01.txt")].mtime.Equal(old) {
		t.Error("skipTimes restored the original mtime")
	}

	// A target PVC that exists and is not the Restore's own is never written.
	kubectl(t, restoreOf(ns, "clash", "{snapshotRef: {name: before-loss}}", "{pvc: {name: app-data, capacity: 1Gi}}"), 0, "apply", "-f", "-")
	clash := waitRestore(t, ns, "clash", snapv1.RestoreFailed)
	if clash.Status.Failure == nil || clash.Status.Failure.Class != "TargetConflict" || !strings.Contains(clash.Status.Failure.Message, "pvcRef") {
		t.Errorf("failure %+v, want TargetConflict pointing at target.pvcRef", clash.Status.Failure)
	}
}

func TestRestoreFromPolicyPicksBySnapshotTime(t *testing.T) {
	const ns = "restore-asof"
	backupNamespace(t, ns, 1, "")
	data := env.Functions.Node.PVCDir(ns, "app-data")
	kubectl(t, policy(ns, "app", ""), 0, "apply", "-f", "-")
	var taken []time.Time
	for i := 1; i <= 3; i++ {
		if err := os.WriteFile(filepath.Join(data, "version.txt"), []byte(fmt.Sprintf("version %d", i)), 0o644); err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("v%d", i)
		kubectl(t, snapshotOf(ns, name, "app"), 0, "apply", "-f", "-")
		s := waitSnapshot(t, ns, name, snapv1.SnapshotSucceeded)
		taken = append(taken, s.Status.Timing.StartTime.Time)
		time.Sleep(1100 * time.Millisecond) // status times have whole seconds
	}
	read := func(pvc string) string {
		b, err := os.ReadFile(filepath.Join(env.Functions.Node.PVCDir(ns, pvc), "version.txt"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	cases := []struct{ name, source, want, snapshot string }{
		{"latest", "{fromPolicy: {name: app}}", "version 3", "v3"},
		{"as-of-second", fmt.Sprintf("{fromPolicy: {name: app, asOf: %q}}", taken[1].UTC().Format(time.RFC3339)), "version 2", "v2"},
		{"offset-two", "{fromPolicy: {name: app, offset: 2}}", "version 1", "v1"},
	}
	for _, c := range cases {
		kubectl(t, restoreOf(ns, c.name, c.source, fmt.Sprintf("{pvc: {name: %s, capacity: 1Gi}}", c.name)), 0, "apply", "-f", "-")
		rs := waitRestore(t, ns, c.name, snapv1.RestoreCompleted)
		if got := read(c.name); got != c.want {
			t.Errorf("%s restored %q, want %q", c.name, got, c.want)
		}
		if r := rs.Status.Resolved; r == nil || r.SnapshotRef == nil || r.SnapshotRef.Name != c.snapshot {
			t.Errorf("%s pinned %+v, want Snapshot %s", c.name, rs.Status.Resolved, c.snapshot)
		}
	}
	// Before the first snapshot there is nothing: fromPolicy defaults to
	// Continue, which completes with an empty PVC; Fail fails.
	early := taken[0].Add(-time.Hour).UTC().Format(time.RFC3339)
	kubectl(t, restoreOf(ns, "too-early", fmt.Sprintf("{fromPolicy: {name: app, asOf: %q}}", early), "{pvc: {name: too-early, capacity: 1Gi}}"), 0, "apply", "-f", "-")
	rs := waitRestore(t, ns, "too-early", snapv1.RestoreCompleted)
	if rs.Status.Resolved == nil || rs.Status.Resolved.Resolution != "NoSnapshot" {
		t.Errorf("resolved %+v, want NoSnapshot", rs.Status.Resolved)
	}
	kubectl(t, restoreOf(ns, "too-early-fail", fmt.Sprintf("{fromPolicy: {name: app, asOf: %q}}", early), "{pvc: {name: too-early-fail, capacity: 1Gi}}\n  policy: {onMissingSnapshot: Fail}"), 0, "apply", "-f", "-")
	failed := waitRestore(t, ns, "too-early-fail", snapv1.RestoreFailed)
	if failed.Status.Failure == nil || failed.Status.Failure.Class != "SnapshotMissing" {
		t.Errorf("failure %+v, want SnapshotMissing", failed.Status.Failure)
	}
	// An exact source that does not exist fails by default.
	kubectl(t, restoreOf(ns, "no-such", "{snapshotRef: {name: no-such}}", "{pvc: {name: no-such, capacity: 1Gi}}"), 0, "apply", "-f", "-")
	missing := waitRestore(t, ns, "no-such", snapv1.RestoreFailed)
	if missing.Status.Failure == nil || !strings.Contains(missing.Status.Failure.Message, "no-such does not exist") {
		t.Errorf("failure %+v", missing.Status.Failure)
	}
}

func TestRestoreFromAMultiRepositoryPolicy(t *testing.T) {
	const ns = "restore-multi"
	backupNamespace(t, ns, 1, "")
	kubectl(t, []byte(`
apiVersion: kopiur.home-operations.com/v1alpha1
kind: Repository
metadata: {name: secondary, namespace: `+ns+`}
spec:
  backend: {filesystem: {path: /repository/secondary, volume: {pvc: {name: kopia-repo}}}}
  encryption: {passwordSecretRef: {name: kopia-password, key: KOPIA_PASSWORD}}
  create: {enabled: true}
`), 0, "apply", "-f", "-")
	waitRepository(t, ns, "secondary", snapv1.RepositoryReady)
	kubectl(t, []byte(`
apiVersion: kopiur.home-operations.com/v1alpha1
kind: SnapshotPolicy
metadata: {name: both, namespace: `+ns+`}
spec:
  repositories: [{name: primary}, {name: secondary}]
  sources: [{pvc: {name: app-data}}]
`), 0, "apply", "-f", "-")
	data := env.Functions.Node.PVCDir(ns, "app-data")
	for _, repo := range []string{"primary", "secondary"} {
		if err := os.WriteFile(filepath.Join(data, "where.txt"), []byte("written for "+repo), 0o644); err != nil {
			t.Fatal(err)
		}
		kubectl(t, []byte(fmt.Sprintf(`
apiVersion: kopiur.home-operations.com/v1alpha1
kind: Snapshot
metadata: {name: to-%[2]s, namespace: %[1]s}
spec: {policyRef: {name: both}, repository: {name: %[2]s}}
`, ns, repo)), 0, "apply", "-f", "-")
		waitSnapshot(t, ns, "to-"+repo, snapv1.SnapshotSucceeded)
	}

	res := kubectl(t, restoreOf(ns, "which", "{fromPolicy: {name: both}}", "{pvc: {name: which, capacity: 1Gi}}"), 1, "apply", "-f", "-")
	for _, want := range []string{"spec.repository", "Repository/" + ns + "/primary", "Repository/" + ns + "/secondary"} {
		if !strings.Contains(res.Stderr, want) {
			t.Errorf("refusal should name %q:\n%s", want, res.Stderr)
		}
	}
	kubectl(t, restoreOf(ns, "from-secondary", "{fromPolicy: {name: both}}", "{pvc: {name: from-secondary, capacity: 1Gi}}\n  repository: {name: secondary}"), 0, "apply", "-f", "-")
	rs := waitRestore(t, ns, "from-secondary", snapv1.RestoreCompleted)
	b, err := os.ReadFile(filepath.Join(env.Functions.Node.PVCDir(ns, "from-secondary"), "where.txt"))
	if err != nil || string(b) != "written for secondary" {
		t.Fatalf("restored %q (%v), want the secondary repository's data", b, err)
	}
	if r := rs.Status.Resolved; r == nil || r.Repository == nil || r.Repository.Name != "secondary" {
		t.Errorf("resolved %+v", rs.Status.Resolved)
	}
}

func TestRestoreRequestedEventCreatesOneRestore(t *testing.T) {
	const ns = "restore-event"
	backupNamespace(t, ns, 2, "")
	kubectl(t, policy(ns, "app", ""), 0, "apply", "-f", "-")
	kubectl(t, snapshotOf(ns, "s1", "app"), 0, "apply", "-f", "-")
	waitSnapshot(t, ns, "s1", snapv1.SnapshotSucceeded)

	spec, _ := json.Marshal(map[string]any{
		"source": map[string]any{"fromPolicy": map[string]any{"name": "app"}},
		"target": map[string]any{"pvc": map[string]any{"name": "from-event", "capacity": "1Gi"}},
	})
	e := cloudevents.NewEvent()
	e.SetID("restore-request-1")
	e.SetType(events.RestoreRequested)
	e.SetSource("tekton/pipeline-run/42")
	_ = e.SetData(cloudevents.ApplicationJSON, events.RestoreRequest{Namespace: ns, Spec: spec})
	body, _ := json.Marshal(e)
	for i := 0; i < 2; i++ { // at-least-once delivery
		if code := postEvent(t, env.Functions.Base+"/restore", "application/cloudevents+json", body); code/100 != 2 {
			t.Fatalf("delivery %d answered %d", i, code)
		}
	}
	var list snapv1.RestoreList
	if err := env.Client.List(testContext(t), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 {
		t.Fatalf("%d Restores after two deliveries, want 1", len(list.Items))
	}
	if by, want := list.Items[0].Annotations[wellknown.AnnotationRequestedBy], "system:serviceaccount:"+harness.WebhookNamespace+":"+pipelineSA; by != want {
		t.Errorf("the Restore records requested-by %q, want the sender %q", by, want)
	}
	waitRestore(t, ns, list.Items[0].Name, snapv1.RestoreCompleted)
	sameFiles(t, tree(t, env.Functions.Node.PVCDir(ns, "app-data")), tree(t, env.Functions.Node.PVCDir(ns, "from-event")), true)

	bad, _ := json.Marshal(map[string]any{"source": map[string]any{"fromPolicy": map[string]any{"name": "app"}}, "target": map[string]any{"pvc": map[string]any{"name": "x"}}})
	_ = e.SetData(cloudevents.ApplicationJSON, events.RestoreRequest{Namespace: ns, Spec: bad})
	e.SetID("restore-request-2")
	body, _ = json.Marshal(e)
	if code := postEvent(t, env.Functions.Base+"/restore", "application/cloudevents+json", body); code != http.StatusBadRequest {
		t.Fatalf("an invalid request answered %d, want 400 (no retry)", code)
	}
}

func TestRestoreCommand(t *testing.T) {
	const ns = "restore-cli"
	backupNamespace(t, ns, 4, "")
	kubectl(t, policy(ns, "app", ""), 0, "apply", "-f", "-")
	kubectl(t, snapshotOf(ns, "s1", "app"), 0, "apply", "-f", "-")
	waitSnapshot(t, ns, "s1", snapv1.SnapshotSucceeded)
	want := tree(t, env.Functions.Node.PVCDir(ns, "app-data"))

	stdout, stderr, code := runSnapflow(t, "restore", "from-cli", "-n", ns, "--policy", "app", "--to-pvc", "cli-copy", "--capacity", "1Gi", "--skip-owners", "-o", "json")
	if code != 0 {
		t.Fatalf("restore exited %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "created Restore "+ns+"/from-cli") || !strings.Contains(stderr, "Completed") {
		t.Errorf("progress on stderr should say what was created and how it ended:\n%s", stderr)
	}
	var row struct {
		Phase, TargetPVC, KopiaSnapshotID string
		FilesRestored                     int64
	}
	if err := json.Unmarshal([]byte(stdout), &row); err != nil {
		t.Fatalf("-o json: %v\n%s", err, stdout)
	}
	if row.Phase != "Completed" || row.TargetPVC != "cli-copy" || row.FilesRestored != 4 || row.KopiaSnapshotID == "" {
		t.Errorf("row %+v", row)
	}
	sameFiles(t, want, tree(t, env.Functions.Node.PVCDir(ns, "cli-copy")), true)
	var rs snapv1.Restore
	if err := env.Client.Get(testContext(t), clientKey(ns, "from-cli"), &rs); err != nil {
		t.Fatal(err)
	}
	if o := rs.Spec.Options; o == nil || o.SkipOwners == nil || !*o.SkipOwners || o.SkipTimes != nil {
		t.Errorf("only the flags given become options: %+v", rs.Spec.Options)
	}

	_, stderr, code = runSnapflow(t, "restore", "-n", ns, "--snapshot", "gone", "--to-pvc", "never", "--capacity", "1Gi")
	if code != 1 || !strings.Contains(stderr, "SnapshotMissing") || !strings.Contains(stderr, "gone does not exist") {
		t.Errorf("a missing snapshot should fail the command with the reason; exit %d:\n%s", code, stderr)
	}
	_, stderr, code = runSnapflow(t, "restore", "-n", ns, "--policy", "app")
	if code != 1 || !strings.Contains(stderr, "--to-pvc NAME --capacity SIZE") {
		t.Errorf("a restore without a target should say how to name one; exit %d:\n%s", code, stderr)
	}
}

func TestRestorePopulatesAPVCThatNamesIt(t *testing.T) {
	const ns = "restore-populator"
	ctx := testContext(t)
	backupNamespace(t, ns, 4, "")
	kubectl(t, policy(ns, "app", ""), 0, "apply", "-f", "-")
	kubectl(t, policy(ns, "never-ran", ""), 0, "apply", "-f", "-")
	kubectl(t, snapshotOf(ns, "s1", "app"), 0, "apply", "-f", "-")
	waitSnapshot(t, ns, "s1", snapv1.SnapshotSucceeded)
	want := tree(t, env.Functions.Node.PVCDir(ns, "app-data"))

	populated := func(pvc, restore string) []byte {
		return []byte(fmt.Sprintf(`
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: %s, namespace: %s}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
  dataSourceRef: {apiGroup: kopiur.home-operations.com, kind: Restore, name: %s}
`, pvc, ns, restore))
	}
	// The Restore first, then the PVC: the restore waits for it.
	kubectl(t, restoreOf(ns, "populate", "{fromPolicy: {name: app}}", "{populator: {}}"), 0, "apply", "-f", "-")
	eventually(t, func() error {
		var rs snapv1.Restore
		if err := env.Client.Get(ctx, clientKey(ns, "populate"), &rs); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(rs.Status.Conditions, wellknown.ConditionReady); c == nil || c.Reason != "TargetNotFound" || !strings.Contains(c.Message, "dataSourceRef") {
			return fmt.Errorf("conditions %+v, want TargetNotFound naming dataSourceRef", rs.Status.Conditions)
		}
		return nil
	})
	kubectl(t, populated("app-clone", "populate"), 0, "apply", "-f", "-")
	rs := waitRestore(t, ns, "populate", snapv1.RestoreCompleted)
	if tg := rs.Status.Target; tg == nil || tg.PVCRef != "app-clone" || tg.PVCPrime == "" {
		t.Fatalf("status.target %+v, want the prime and the populated PVC", rs.Status.Target)
	}
	var pvc corev1.PersistentVolumeClaim
	if err := env.Client.Get(ctx, clientKey(ns, "app-clone"), &pvc); err != nil {
		t.Fatal(err)
	}
	if pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.VolumeName == "" {
		t.Fatalf("the populated PVC is %s (volume %q), want Bound", pvc.Status.Phase, pvc.Spec.VolumeName)
	}
	dir, err := env.Functions.Node.VolumeDir(ctx, ns, "app-clone")
	if err != nil {
		t.Fatal(err)
	}
	sameFiles(t, want, tree(t, dir), true)
	eventually(t, func() error {
		var prime corev1.PersistentVolumeClaim
		if err := env.Client.Get(ctx, clientKey(ns, rs.Status.Target.PVCPrime), &prime); err == nil {
			return fmt.Errorf("the prime PVC %s is still there", prime.Name)
		}
		return nil
	})

	// Nothing to restore (the policy never ran): the PVC still gets a volume, empty.
	kubectl(t, restoreOf(ns, "fresh", "{fromPolicy: {name: never-ran}}", "{populator: {}}"), 0, "apply", "-f", "-")
	kubectl(t, populated("fresh-data", "fresh"), 0, "apply", "-f", "-")
	fresh := waitRestore(t, ns, "fresh", snapv1.RestoreCompleted)
	if fresh.Status.Resolved == nil || fresh.Status.Resolved.Resolution != "NoSnapshot" {
		t.Errorf("resolved %+v, want NoSnapshot", fresh.Status.Resolved)
	}
	eventually(t, func() error {
		if err := env.Client.Get(ctx, clientKey(ns, "fresh-data"), &pvc); err != nil {
			return err
		}
		if pvc.Status.Phase != corev1.ClaimBound {
			return fmt.Errorf("fresh-data is %s", pvc.Status.Phase)
		}
		return nil
	})
}
