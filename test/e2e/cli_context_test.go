package e2e

import (
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/snapflow/snapflow/cli"
)

// Every cluster command resolves the cluster and namespace as kubectl
// does: --context picks the context, whose namespace is the default for
// -n, and an explicit -n wins.
func TestCLITakesTheNamespaceFromTheContext(t *testing.T) {
	const nsA, nsB = "cli-context-a", "cli-context-b"
	ensureNamespace(t, nsA, "")
	ensureNamespace(t, nsB, "")
	kubectl(t, []byte(`
apiVersion: kopiur.home-operations.com/v1alpha1
kind: SnapshotPolicy
metadata: {name: only-in-b, namespace: `+nsB+`}
spec:
  repository: {name: primary}
  sources: [{pvc: {name: app-data}}]
  copyMethod: Direct
  retention: {keepLatest: 3}
`), 0, "apply", "-f", "-")

	cfg, err := clientcmd.LoadFromFile(env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	base := cfg.Contexts[cfg.CurrentContext]
	for name, ns := range map[string]string{"ctx-a": nsA, "ctx-b": nsB} {
		c := base.DeepCopy()
		c.Namespace = ns
		cfg.Contexts[name] = c
	}
	cfg.CurrentContext = "ctx-a"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, int) {
		var out, errOut strings.Builder
		code := cli.Execute(append([]string{"--kubeconfig", path}, args...), &out, &errOut)
		return out.String() + errOut.String(), code
	}
	for _, tc := range []struct {
		name  string
		args  []string
		code  int
		wants string
	}{
		{"the current context's namespace", []string{"retention", "preview", "--policy", "only-in-b"}, 2, nsA + "/only-in-b"},
		{"--context picks another namespace", []string{"--context", "ctx-b", "retention", "preview", "--policy", "only-in-b"}, 0, "nothing was deleted"},
		{"-n wins over the context", []string{"--context", "ctx-b", "retention", "preview", "--policy", "only-in-b", "-n", nsA}, 2, nsA + "/only-in-b"},
		{"describe reads the context too", []string{"--context", "ctx-b", "describe", "snapshot", "nothing-here"}, 1, nsB + "/nothing-here"},
		{"an unknown context is named", []string{"--context", "nope", "describe", "snapshot", "x"}, 1, "nope"},
	} {
		out, code := run(tc.args...)
		if code != tc.code || !strings.Contains(out, tc.wants) {
			t.Errorf("%s: snapflow %s exited %d, want %d with %q:\n%s", tc.name, strings.Join(tc.args, " "), code, tc.code, tc.wants, out)
		}
	}
}
