package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snapflow/snapflow/test/harness"
)

// Installed as krew installs it (kubectl-snapflow on PATH), the binary is
// a kubectl plugin: kubectl finds it, runs it, and its help names the
// command as the user types it.
func TestKubectlPlugin(t *testing.T) {
	bin, err := harness.Tool("snapflow")
	if err != nil {
		t.Fatal(err)
	}
	kubectlBin, err := harness.Tool("kubectl")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kubectl-snapflow"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(kubectlBin, args...)
		// PATH holds the plugin alone: other plugins of the machine (and
		// kubectl's warnings about them) stay out of the test.
		cmd.Env = append(os.Environ(), "PATH="+dir, "KUBECONFIG="+env.Kubeconfig)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	if out := run("plugin", "list", "--name-only"); !strings.Contains(out, "kubectl-snapflow") {
		t.Fatalf("kubectl does not find the plugin:\n%s", out)
	}
	if out := run("snapflow", "--help"); !strings.Contains(out, "kubectl snapflow [command]") {
		t.Errorf("the plugin's help does not read as kubectl snapflow:\n%s", out)
	}
	if out := run("snapflow", "version", "-o", "json"); !strings.Contains(out, `"version"`) {
		t.Errorf("kubectl snapflow version:\n%s", out)
	}
	// Run as itself, it is snapflow.
	out, err := exec.Command(bin, "--help").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "snapflow [command]") || strings.Contains(string(out), "kubectl snapflow") {
		t.Errorf("snapflow --help (%v):\n%s", err, out)
	}
}
