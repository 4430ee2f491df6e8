package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/snapflow/snapflow/test/harness"
)

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// kubectl runs kubectl and fails the test when it does not exit with want.
func kubectl(t *testing.T, stdin []byte, want int, args ...string) harness.KubectlResult {
	t.Helper()
	res, err := env.Kubectl(testContext(t), stdin, args...)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != want {
		t.Fatalf("kubectl %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), res.ExitCode, want, res.Stdout, res.Stderr)
	}
	return res
}

func repoPath(t *testing.T, parts ...string) string {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(append([]string{root}, parts...)...)
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func clientKey(ns, name string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: name} }
