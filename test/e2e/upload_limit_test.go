package e2e

import (
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
)

// upload.limitMb aborts a snapshot that would upload more, as the guide and
// kopia's --upload-limit-mb say (it used to throttle the rate instead).
func TestUploadLimitAbortsTheBackup(t *testing.T) {
	const ns = "upload-limit"
	backupNamespace(t, ns, 1, "")
	dir := env.Functions.Node.PVCDir(ns, "app-data")
	for i := range 3 {
		buf := make([]byte, 1<<20)
		if _, err := rand.Read(buf); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("blob%d", i)), buf, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	kubectl(t, policy(ns, "app", "  copyMethod: Direct\n  upload: {limitMb: 1}\n"), 0, "apply", "-f", "-")
	kubectl(t, snapshotOf(ns, "capped", "app"), 0, "create", "-f", "-")
	s := waitSnapshot(t, ns, "capped", snapv1.SnapshotFailed)
	if f := s.Status.Failure; f == nil || f.Class != "UploadLimitReached" || !strings.Contains(f.Message, "spec.upload.limitMb") {
		t.Fatalf("failure %+v, want UploadLimitReached naming spec.upload.limitMb", s.Status.Failure)
	}
	if s.Status.Snapshot != nil && s.Status.Snapshot.KopiaSnapshotID != "" {
		t.Fatalf("an aborted upload recorded kopia snapshot %s", s.Status.Snapshot.KopiaSnapshotID)
	}
}

// extraArgs: a kopia flag snapflow maps does what kopia's does (here
// --upload-limit-mb stops the upload), and one it does not map is refused
// at apply time, naming the argument and the flags that work.
func TestExtraArgsAreMappedOrRefused(t *testing.T) {
	const ns = "extra-args"
	backupNamespace(t, ns, 1, "")
	res, err := env.Kubectl(testContext(t), policy(ns, "tuned", "  extraArgs: [--parallel=2, --compression=zstd]\n"), "apply", "-f", "-")
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode == 0 || !strings.Contains(res.Stderr, "spec.extraArgs[1]") || !strings.Contains(res.Stderr, "supported: --parallel") {
		t.Fatalf("an unmapped flag: exit %d\n%s%s\nwant a refusal naming spec.extraArgs[1] and the supported flags", res.ExitCode, res.Stdout, res.Stderr)
	}

	dir := env.Functions.Node.PVCDir(ns, "app-data")
	for i := range 3 {
		buf := make([]byte, 1<<20)
		if _, err := rand.Read(buf); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("blob%d", i)), buf, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	kubectl(t, policy(ns, "app", "  copyMethod: Direct\n  extraArgs: [--parallel, \"2\", --upload-limit-mb=1]\n"), 0, "apply", "-f", "-")
	kubectl(t, snapshotOf(ns, "capped", "app"), 0, "create", "-f", "-")
	s := waitSnapshot(t, ns, "capped", snapv1.SnapshotFailed)
	if f := s.Status.Failure; f == nil || f.Class != "UploadLimitReached" || !strings.Contains(f.Message, "--upload-limit-mb") {
		t.Fatalf("failure %+v, want UploadLimitReached naming --upload-limit-mb", s.Status.Failure)
	}
}
