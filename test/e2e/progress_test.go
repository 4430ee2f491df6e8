package e2e

import (
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/internal/mover"
)

// A running backup and restore say how far they have come. The mover prints
// progress lines; the functions read the newest through pods/log (which the
// local node serves as a kubelet does) into status.progress; kubectl shows
// it with -o wide, and the CLI prints it while it follows a run.
func TestProgressWhileRunning(t *testing.T) {
	const ns = "progress"
	// 10 MiB through a 512 KiB/s upload throttle: each backup takes about 20 s.
	backupNamespace(t, ns, 0, "  moverDefaults: {throttle: {uploadBytesPerSecond: 524288}}\n")
	dir := env.Functions.Node.PVCDir(ns, "app-data")
	randomFiles(t, dir, 20, 512<<10)
	kubectl(t, policy(ns, "app", "  copyMethod: Direct\n"), 0, "apply", "-f", "-")

	// The first backup has no previous snapshot, so no estimate.
	kubectl(t, snapshotOf(ns, "first", "app"), 0, "create", "-f", "-")
	var running snapv1.Snapshot
	eventually(t, func() error {
		if err := env.Client.Get(testContext(t), clientKey(ns, "first"), &running); err != nil {
			return err
		}
		if running.Status.Phase.IsTerminal() {
			t.Fatalf("the backup ended %s before any progress showed in its status", running.Status.Phase)
		}
		if p := running.Status.Progress; p == nil || p.FilesRead == 0 || p.Summary == "" || p.ObservedAt == nil {
			return fmt.Errorf("no progress in the running Snapshot's status yet: %+v", running.Status.Progress)
		}
		return nil
	})
	p := running.Status.Progress
	if p.BytesRead == 0 || p.EstimatedBytes != nil || p.Percent != nil {
		t.Errorf("progress of a first backup: %+v (bytes read, and no estimate without a previous snapshot)", p)
	}
	wide := kubectl(t, nil, 0, "get", "kopiasnap", "-n", ns, "first", "-o", "wide").Stdout
	if !strings.Contains(wide, "PROGRESS") || !strings.Contains(wide, "files, ") {
		t.Errorf("kubectl get -o wide shows no progress:\n%s", wide)
	}
	// What the functions read is in the mover's log, for anyone to follow.
	logs := kubectl(t, nil, 0, "logs", "-n", ns, "-l", "job-name="+running.Status.Job.Name, "-c", "mover", "--tail=20").Stdout
	if !strings.Contains(logs, mover.ProgressPrefix) {
		t.Errorf("kubectl logs of the running mover holds no progress line:\n%s", logs)
	}
	done := waitSnapshot(t, ns, "first", snapv1.SnapshotSucceeded)
	if done.Status.Progress != nil || done.Status.Stats == nil {
		t.Errorf("a finished backup keeps its totals in stats, not progress: progress %+v stats %+v", done.Status.Progress, done.Status.Stats)
	}

	// New content of the same size: the estimate is the previous snapshot's
	// size, and `snapshot now` prints the progress as it follows the run.
	randomFiles(t, dir, 20, 512<<10)
	out, stderr, code := runSnapflow(t, "snapshot", "now", "-n", ns, "--policy", "app", "-o", "json")
	if code != 0 {
		t.Fatalf("snapshot now exited %d\n%s%s", code, out, stderr)
	}
	if !regexp.MustCompile(`1 running \| app-manual-\S+: \d+ files, .* of ~10 MiB \(\d+%\)`).MatchString(stderr) {
		t.Errorf("snapshot now printed no progress against the previous snapshot's size:\n%s", stderr)
	}
	second := policySnapshots(t, ns, "app")
	var id string
	for _, s := range second {
		if s.Name != "first" && s.Status.Snapshot != nil {
			id = s.Name
		}
	}
	if id == "" {
		t.Fatalf("no second snapshot among %d", len(second))
	}

	// A finished restore's progress is everything it restored, against the
	// snapshot's size. (Its running progress comes from the same log lines
	// as a backup's; internal/kopia tests that a restore reports them as it
	// goes. A throttle cannot slow one down here: kopia reads whole pack
	// blobs first, so ten MiB in one pack arrive at once.)
	out, stderr, code = runSnapflow(t, "restore", "back", "-n", ns, "--snapshot", id, "--to-pvc", "copy", "--capacity", "1Gi", "-o", "json")
	if code != 0 {
		t.Fatalf("restore exited %d\n%s%s", code, out, stderr)
	}
	if !strings.Contains(stderr, "Completed: 20 files, 10 MiB of ~10 MiB (100%)") {
		t.Errorf("restore did not print what it restored against the snapshot's size:\n%s", stderr)
	}
	rs := waitRestore(t, ns, "back", snapv1.RestoreCompleted)
	if rp := rs.Status.Progress; rp == nil || rp.Percent == nil || *rp.Percent != 100 || *rp.FilesRestored != 20 || *rp.BytesRestored != 10<<20 {
		t.Errorf("a completed restore's progress: %+v", rs.Status.Progress)
	}
	sameFiles(t, tree(t, dir), tree(t, env.Functions.Node.PVCDir(ns, "copy")), false)
}

// randomFiles (re)writes n files of size random bytes in dir.
func randomFiles(t *testing.T, dir string, n, size int) {
	t.Helper()
	buf := make([]byte, size)
	for i := range n {
		if _, err := rand.Read(buf); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("blob%02d", i)), buf, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
