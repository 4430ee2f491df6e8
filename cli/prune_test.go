package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/snapflow/snapflow/internal/prune"
	"github.com/snapflow/snapflow/internal/prune/execute"
)

// runPruneCLI runs `snapflow prune ...` through the root command, adding
// the prune command when the root does not carry it yet.
func runPruneCLI(t *testing.T, env map[string]string, args ...string) (string, string, int) {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	var out, errOut bytes.Buffer
	root := NewRoot(&out, &errOut)
	if c, _, err := root.Find([]string{"prune"}); err != nil || c == root {
		root.AddCommand(newPruneCmd(newKubeFlags()))
	}
	root.SetArgs(args)
	if err := root.Execute(); err != nil {
		errOut.WriteString("error: " + err.Error() + "\n")
		var coded interface{ ExitCode() int }
		if errors.As(err, &coded) {
			return out.String(), errOut.String(), coded.ExitCode()
		}
		return out.String(), errOut.String(), 1
	}
	return out.String(), errOut.String(), 0
}

// A kubeconfig that cannot be loaded: any test that gets past validation
// fails on it, so a validation error proves no network call was made.
const noCluster = "/nonexistent/kubeconfig"

// Flag validation, including the --confirm words, fails before any network
// access.
func TestPruneFlagValidation_10_2(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"missing --backup-repo", []string{"prune", "plan"}, "--backup-repo is required"},
		{"timeout 0", []string{"prune", "plan", "--backup-repo=r", "--timeout=0"}, "invalid --timeout"},
		{"negative min-age", []string{"prune", "plan", "--backup-repo=r", "--min-age=-1h"}, "invalid --min-age"},
		{"request-timeout 0", []string{"prune", "plan", "--backup-repo=r", "--request-timeout=0"}, "invalid --request-timeout"},
		{"namespace", []string{"prune", "plan", "--backup-repo=r", "--namespace=../x"}, "invalid --namespace"},
		{"bucket-versioning", []string{"prune", "plan", "--backup-repo=r", "--bucket-versioning=x"}, "invalid --bucket-versioning"},
		{"concurrency", []string{"prune", "prune", "--backup-repo=r", "--concurrency=0"}, "invalid --concurrency"},
		{"path-style false", []string{"prune", "plan", "--backup-repo=r", "--path-style", "false"}, `unknown command "false"`},
		{"output", []string{"prune", "plan", "--backup-repo=r", "-o", "yaml"}, "invalid --output"},
		{"manifest-name", []string{"prune", "plan", "--backup-repo=r", "--manifest-name=a/b"}, "invalid --manifest-name"},
		{"kube-mode", []string{"prune", "plan", "--backup-repo=r", "--kube-mode=x"}, "invalid --kube-mode"},
		{"endpoint", []string{"prune", "plan", "--backup-repo=r", "--endpoint=s3.example.test"}, "invalid S3 endpoint"},
		{"positional", []string{"prune", "plan", "--backup-repo=r", "extra"}, `unknown command "extra"`},
		{"no word", []string{"prune", "prune", "--backup-repo=r", "--dry-run=false"}, "live deletion requires --confirm DELETE"},
		{"wrong word", []string{"prune", "prune", "--backup-repo=r", "--dry-run=false", "--confirm=delete"}, "requires --confirm DELETE"},
		{"stray word", []string{"prune", "prune", "--backup-repo=r", "--dry-run=false", "--delete-repository-stray", "--confirm=DELETE"}, "--confirm DELETE-STRAY"},
		{"retained word", []string{"prune", "prune", "--backup-repo=r", "--dry-run=false", "--include-retained", "--confirm=DELETE"}, "--confirm DELETE-RETAINED"},
		{"both words", []string{"prune", "prune", "--backup-repo=r", "--dry-run=false", "--include-retained", "--delete-repository-stray", "--confirm=DELETE-STRAY"}, "--confirm DELETE-RETAINED-AND-STRAY"},
		// Flags before the subcommand are accepted too.
		{"flag before subcommand", []string{"prune", "--backup-repo=r", "--timeout=0", "plan"}, "invalid --timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, errOut, code := runPruneCLI(t, nil, append([]string{"--kubeconfig", noCluster}, tt.args...)...)
			if code != 1 || !strings.Contains(errOut, tt.want) {
				t.Fatalf("exit %d, stderr %q, want %q", code, errOut, tt.want)
			}
		})
	}
	// The right word passes validation and only then reaches the cluster.
	for _, words := range [][]string{
		{"--confirm=DELETE"},
		{"--delete-repository-stray", "--confirm=DELETE-STRAY"},
		{"--include-retained", "--confirm=DELETE-RETAINED"},
		{"--include-retained", "--delete-repository-stray", "--confirm=DELETE-RETAINED-AND-STRAY"},
	} {
		args := append([]string{"--kubeconfig", noCluster, "prune", "prune", "--backup-repo=r", "--dry-run=false"}, words...)
		if _, errOut, _ := runPruneCLI(t, nil, args...); !strings.Contains(errOut, "kubeconfig") {
			t.Fatalf("%v: %q", words, errOut)
		}
	}
}

// Environment defaults: the flag overrides the environment; an empty variable
// is unset.
func TestPruneEnvDefaults_10_4(t *testing.T) {
	t.Setenv(envPruneBackupRepo, "a")
	t.Setenv(envPruneBucket, "")
	cmd := newPruneCmd(newKubeFlags())
	f := cmd.PersistentFlags()
	if v, _ := f.GetString("backup-repo"); v != "a" {
		t.Fatalf("env default %q", v)
	}
	if v, _ := f.GetString("bucket"); v != "" {
		t.Fatalf("empty env %q", v)
	}
	if err := f.Parse([]string{"--backup-repo=b"}); err != nil {
		t.Fatal(err)
	}
	if v, _ := f.GetString("backup-repo"); v != "b" {
		t.Fatalf("flag %q", v)
	}
}

// --kube-mode: auto picks in-cluster only with the service variables set
// and no --kubeconfig; an explicit mode is kept.
func TestResolveKubeMode_9_3(t *testing.T) {
	svc := func(k string) string {
		return map[string]string{"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}[k]
	}
	none := func(string) string { return "" }
	tests := []struct {
		mode, kubeconfig string
		env              func(string) string
		want             string
	}{
		{"auto", "", svc, kubeModeInCluster},
		{"auto", "/k", svc, kubeModeKubeconfig},
		{"auto", "", none, kubeModeKubeconfig},
		{"kubeconfig", "", svc, kubeModeKubeconfig},
		{"in-cluster", "", none, kubeModeInCluster},
	}
	for _, tt := range tests {
		if got := resolveKubeMode(tt.mode, tt.kubeconfig, tt.env); got != tt.want {
			t.Errorf("%s/%q: %s, want %s", tt.mode, tt.kubeconfig, got, tt.want)
		}
	}
}

var planAt = time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)

func outputPlan() prune.Plan {
	old := planAt.Add(-30 * 24 * time.Hour)
	pl := prune.Plan{GeneratedAt: planAt, Repository: "repo", Bucket: "bkt", Versioning: prune.VersioningDisabled,
		VersioningSource: prune.SourceOperatorOverride, VolumeDiscovery: true,
		VolumeRootCounts: prune.RootCounts{Total: 3, Repository: 1, ProtectedUser: 1, Unowned: 1},
		ScannedObjects:   4, ScannedBytes: 1536 + 10, DeleteObjects: 2, DeleteBytes: 1536,
		Candidates: []prune.Candidate{
			{Type: prune.TypeBackup, State: prune.StateOrphan, Prefix: "R/app/C/pg/b1", Backup: prune.BackupKey{Namespace: "app", Name: "b1"},
				CreatedAt: old, ObjectCount: 2, Bytes: 1536, Reason: "no Backup CR"},
			{Type: prune.TypeBackup, State: prune.StateLive, Prefix: "R/app/C/pg/b2", Backup: prune.BackupKey{Namespace: "app", Name: "b2"}, CreatedAt: old},
			{Type: prune.TypeRepositoryStray, State: prune.StateProtected, DeletionConfigurable: true, Prefix: "R", CreatedAt: old, ObjectCount: 1, Bytes: 10},
			{Type: prune.TypeProtectedUserVolume, State: prune.StateProtected, Prefix: "U", DeferredScan: true},
			{Type: prune.TypeOrphanRepositoryRoot, State: prune.StateOrphan, Prefix: "H", DeferredScan: true},
			{Type: prune.TypeBackup, State: prune.StateInvalidManifest, Prefix: "R/app/C/pg/b3", Backup: prune.BackupKey{Namespace: "app", Name: "b3"},
				CreatedAt: old, Reason: "invalid manifest: unexpected end of JSON input"},
		},
	}
	pl.StateCounts = map[prune.State]int{prune.StateOrphan: 2, prune.StateLive: 1, prune.StateProtected: 2, prune.StateInvalidManifest: 1}
	return pl
}

// Table and JSON output: the header lines, hidden live and user-volume
// candidates without --show-all, no snapshots, and the age column.
func TestPruneOutput_10_6(t *testing.T) {
	pl := outputPlan()
	var buf bytes.Buffer
	ex := execute.DryRun(pl)
	if err := printPrune(&buf, &pruneOptions{output: OutputTable, command: "prune", dryRun: true}, pl, &ex); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"Mode: dry-run  Repository: repo  Bucket: bkt  Versioning: Disabled (operator-override)",
		"Discovered PVC roots: 3 (repository: 1, protected user: 1, unowned: 1, other: 0)",
		"Scanned: 4 objects / 1.5 KiB  Eligible: 2 / 1.5 KiB",
		"STATE", "30d", "1.5 KiB", "deferred",
		"Would delete: 2 objects / 1.5 KiB across 1 candidates (plus 1 deferred roots",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "R/app/C/pg/b2") || strings.Contains(out, "protected-user-volume") {
		t.Errorf("live and user-volume candidates are hidden by default:\n%s", out)
	}
	// A kept candidate's reason shows without --show-all, below the table.
	if !strings.Contains(out, "Kept and not listed above (--show-all lists them): 2 live backups or user volumes, 1 held:") ||
		!strings.Contains(out, "- invalid-manifest backup R/app/C/pg/b3: invalid manifest: unexpected end of JSON input") {
		t.Errorf("the held candidates' reasons are missing:\n%s", out)
	}
	for showAll, want := range map[bool]int{false: 3, true: 6} {
		buf.Reset()
		if err := printPrune(&buf, &pruneOptions{output: OutputJSON, command: "plan", showAll: showAll}, pl, nil); err != nil {
			t.Fatal(err)
		}
		var rep struct {
			Plan struct {
				Candidates  []json.RawMessage `json:"candidates"`
				StateCounts map[string]int    `json:"stateCounts"`
				DeleteObj   int               `json:"deleteObjects"`
			} `json:"plan"`
			Execution *json.RawMessage `json:"execution"`
		}
		if err := json.Unmarshal(buf.Bytes(), &rep); err != nil {
			t.Fatal(err)
		}
		if len(rep.Plan.Candidates) != want || rep.Execution != nil || rep.Plan.DeleteObj != 2 {
			t.Fatalf("show-all=%v: %d candidates, execution %v", showAll, len(rep.Plan.Candidates), rep.Execution)
		}
		if _, live := rep.Plan.StateCounts["live"]; live != showAll {
			t.Fatalf("show-all=%v: stateCounts %v", showAll, rep.Plan.StateCounts)
		}
		if strings.Contains(buf.String(), `"objects"`) || strings.Contains(buf.String(), "fullScope") {
			t.Fatal("snapshots are never printed")
		}
	}
	for at, want := range map[time.Duration]string{-time.Minute: "0s", 90 * time.Second: "2m", 5 * time.Hour: "5h", 49 * time.Hour: "2d"} {
		if got := pruneAge(planAt, planAt.Add(-at)); got != want {
			t.Errorf("age %v: %s, want %s", at, got, want)
		}
	}
	if pruneAge(planAt, time.Time{}) != "unknown" {
		t.Error("zero createdAt is unknown")
	}
}

// --fail-on-orphans exits 2 when any candidate, shown or not, is an orphan.
func TestFailOnOrphans_10_5(t *testing.T) {
	tests := []struct {
		name   string
		counts map[prune.State]int
		want   int
	}{
		{"one orphan", map[prune.State]int{prune.StateOrphan: 1}, 2},
		{"only retained and too-young", map[prune.State]int{prune.StateRetained: 1, prune.StateTooYoung: 2}, 0},
		{"only a deferred orphan root", map[prune.State]int{prune.StateOrphan: 1}, 2},
	}
	for _, tt := range tests {
		err := failOnOrphans(prune.Plan{StateCounts: tt.counts}, true)
		code := 0
		var coded interface{ ExitCode() int }
		if errors.As(err, &coded) {
			code = coded.ExitCode()
		}
		if code != tt.want {
			t.Errorf("%s: exit %d, want %d", tt.name, code, tt.want)
		}
	}
	if failOnOrphans(prune.Plan{StateCounts: map[prune.State]int{prune.StateOrphan: 1}}, false) != nil {
		t.Error("without the flag orphans exit 0")
	}
}

// The debug writer scrubs credential values.
func TestDebugWriterRedacts_10_9(t *testing.T) {
	var buf bytes.Buffer
	d := newDebugWriter(&buf, true, []string{"ACCESSKEY1234", "secret-value", "tok", ""})
	_, _ = d.Write([]byte("debug: x=ACCESSKEY1234 y=secret-value z=tok\n"))
	if out := buf.String(); strings.Contains(out, "ACCESSKEY1234") || strings.Contains(out, "secret-value") {
		t.Fatal(out)
	}
	buf.Reset()
	_, _ = newDebugWriter(&buf, false, nil).Write([]byte("hidden"))
	if buf.Len() != 0 {
		t.Fatal("debug output without --debug")
	}
}
