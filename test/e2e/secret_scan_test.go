package e2e

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/events"
)

// A backup, a restore, a failed run and orphan prunes (one failing) with
// recognisable credentials; then
// everything snapflow writes where others can read it is scanned for them:
// every log, Event, status, emitted CloudEvent, ConfigMap, Job and Pod
// spec, file the node keeps (container logs, volumes other than the Secret
// volumes themselves) and the CLI's output. The S3 secret key is the
// suite's, so the scan also covers every other test's runs up to now.
func TestSecretsNeverLeak(t *testing.T) {
	const ns = "secret-scan"
	password := "pw-canary-" + randomHex(t)
	wrong := "pw-wrong-canary-" + randomHex(t)
	secrets := map[string]string{"repository password": password, "wrong password": wrong, "S3 secret key": env.S3.SecretKey}

	createBucket(t, "secret-scan")
	s3RepoNamespace(t, ns, "secret-scan", "", password)
	writeFiles(t, env.Functions.Node.PVCDir(ns, "app-data"), 5)
	waitRepository(t, ns, "primary", snapv1.RepositoryReady)
	kubectl(t, policy(ns, "app", "  copyMethod: Direct\n  retention: {keepLatest: 5}\n"), 0, "apply", "-f", "-")

	// Backup and restore through the CLI, as a user would.
	var cliOut strings.Builder
	cliOut.WriteString(snapflowCLI(t, 0, "snapshot", "now", "-n", ns, "--policy", "app", "-o", "yaml"))
	var snaps snapv1.SnapshotList
	if err := env.Client.List(testContext(t), &snaps); err != nil {
		t.Fatal(err)
	}
	name := ""
	for _, s := range snaps.Items {
		if s.Namespace == ns && s.Status.Phase == snapv1.SnapshotSucceeded {
			name = s.Name
		}
	}
	if name == "" {
		t.Fatalf("snapshot now left no Succeeded Snapshot in %s:\n%s", ns, cliOut.String())
	}
	cliOut.WriteString(snapflowCLI(t, 0, "restore", "-n", ns, "--snapshot", name, "--to-pvc", "restored", "--capacity", "1Gi"))
	cliOut.WriteString(snapflowCLI(t, 0, "describe", "snapshot", "-n", ns, name, "-o", "yaml"))
	cliOut.WriteString(snapflowCLI(t, 0, "retention", "preview", "-n", ns, "--policy", "app"))

	// A failed run: the password no longer opens the repository, and the
	// failure (log tail, message, Events) must not echo either password.
	kubectl(t, nil, 0, "-n", ns, "patch", "secret", "s3-creds", "--type=merge", "-p", fmt.Sprintf(`{"stringData":{"KOPIA_PASSWORD":%q}}`, wrong))
	kubectl(t, snapshotOf(ns, "fails", "app"), 0, "create", "-f", "-")
	failed := waitSnapshot(t, ns, "fails", snapv1.SnapshotFailed)
	if failed.Status.LogTail == "" {
		t.Error("the failed run left no log tail, so the scan of status proves little")
	}

	// Orphan pruning through the prune function: a dry run with the
	// suite's S3 keys, and a run whose session token (a canary) the
	// gateway refuses, so its failure path is scanned too.
	token := "tok-canary-" + randomHex(t)
	secrets["S3 session token"] = token
	pw := newPruneWorld(t, false, "")
	pw.seedBackup("b-orphan", "Delete", true)
	if code := sendPruneRequest(t, env.Functions.Base+"/prune", "scan-"+pw.repo, events.PruneRequest{BackupRepo: pw.repo}); code != http.StatusOK {
		t.Fatalf("dry-run prune: status %d", code)
	}
	if ex := executedOf(t, pw.repo); !ex.DryRun || ex.DeletedCandidates == 0 {
		t.Fatalf("the dry-run prune found nothing, so the scan of its outputs proves little: %+v", ex)
	}
	tw := newPruneWorld(t, false, token)
	code := sendPruneRequest(t, env.Functions.Base+"/prune", "scan-"+tw.repo, events.PruneRequest{BackupRepo: tw.repo})
	if code == http.StatusOK {
		t.Fatalf("a prune whose session token the gateway refuses answered %d, want a failure", code)
	}
	if !strings.Contains(env.Functions.Log(), tw.repo) {
		t.Fatal("the failed prune left no log line, so the scan of the log proves little")
	}

	places := map[string][]byte{
		"functions log": []byte(env.Functions.Log()),
		"webhook log":   []byte(env.Webhook.Log()),
		"CLI output":    []byte(cliOut.String()),
	}
	for _, what := range []string{"events", "configmaps", "jobs", "pods", "persistentvolumeclaims", "snapshots.kopiur.home-operations.com",
		"restores.kopiur.home-operations.com", "repositories.kopiur.home-operations.com", "snapshotpolicies.kopiur.home-operations.com",
		"clusterrepositories.kopiur.home-operations.com"} {
		places["kubectl get "+what] = []byte(kubectl(t, nil, 0, "get", what, "--all-namespaces", "-o", "json").Stdout)
	}
	for i, e := range env.Functions.Emitted.Events() {
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		places[fmt.Sprintf("emitted CloudEvent %d (%s)", i, e.Type())] = b
	}
	// The node: container logs, PVCs, work directories; a Secret volume is
	// the one place the credentials belong.
	root := env.Functions.Node.RootDir()
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // a pod's directory may go while we walk
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), "secret-") {
			return filepath.SkipDir
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		files++
		rel, _ := filepath.Rel(root, path)
		places["node file "+rel] = b
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files == 0 {
		t.Fatal("the node holds no files: the scan would prove nothing")
	}
	for where, b := range places {
		for what, s := range secrets {
			if i := bytes.Index(b, []byte(s)); i >= 0 {
				lo, hi := max(0, i-120), min(len(b), i+len(s)+40)
				t.Errorf("the %s is in the %s: ...%s...", what, where, strings.ReplaceAll(string(b[lo:hi]), s, "<"+what+">"))
			}
		}
	}
	t.Logf("scanned %d places (%d node files) for %d credentials", len(places), files, len(secrets))
}

func randomHex(t *testing.T) string {
	t.Helper()
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
