package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/internal/kopia"
	"github.com/snapflow/snapflow/test/harness"
)

func testContext(t *testing.T) context.Context {
	t.Helper()
	quietAfter(t)
	ctx, cancel := context.WithTimeout(context.Background(), harness.Timeout(3*time.Minute))
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

// waitSnapshot waits until the Snapshot reaches want (failing fast on another
// terminal phase) and returns it.
func waitSnapshot(t *testing.T, ns, name string, want snapv1.SnapshotPhase) *snapv1.Snapshot {
	t.Helper()
	ctx := testContext(t)
	var s snapv1.Snapshot
	for {
		if err := env.Client.Get(ctx, clientKey(ns, name), &s); err != nil {
			t.Fatalf("get snapshot %s/%s: %v", ns, name, err)
		}
		if s.Status.Phase == want {
			return &s
		}
		if s.Status.Phase.IsTerminal() {
			t.Fatalf("snapshot %s/%s ended %s, want %s: failure %+v conditions %+v", ns, name, s.Status.Phase, want, s.Status.Failure, s.Status.Conditions)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("snapshot %s/%s still %q after waiting, want %s: conditions %+v", ns, name, s.Status.Phase, want, s.Status.Conditions)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// sameAsSource restores a kopia snapshot with the kopia library and checks
// every file of src came back byte for byte.
func sameAsSource(t *testing.T, repoDir, password, id, src string) {
	t.Helper()
	ctx := testContext(t)
	r, err := kopia.Open(ctx, kopia.OpenOptions{Backend: kopia.Backend{Filesystem: &kopia.FilesystemBackend{Path: repoDir}}, Password: password, ReadOnly: true})
	if err != nil {
		t.Fatalf("open the repository the backup wrote: %v", err)
	}
	defer r.Close(ctx)
	sameRestore(t, r, id, src)
}

func sameRestore(t *testing.T, r *kopia.Repo, id, src string) {
	t.Helper()
	out := t.TempDir()
	if _, err := r.Restore(testContext(t), id, out, kopia.RestoreOptions{}); err != nil {
		t.Fatalf("restore %s: %v", id, err)
	}
	n := 0
	err := filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		want, _ := os.ReadFile(p)
		got, err := os.ReadFile(filepath.Join(out, rel))
		if err != nil || !bytes.Equal(want, got) {
			return fmt.Errorf("%s did not come back from snapshot %s intact (%v)", rel, id, err)
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatalf("the source %s holds no files to compare", src)
	}
}

// eventually retries check until it passes or the test context ends.
func eventually(t *testing.T, check func() error) {
	t.Helper()
	ctx := testContext(t)
	for {
		err := check()
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal(err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
