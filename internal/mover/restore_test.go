package mover

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/snapflow/snapflow/internal/kopia"
	"github.com/snapflow/snapflow/internal/restore"
)

const testPassword = "correct horse battery staple"

func env(k string) string {
	if k == EnvPassword {
		return testPassword
	}
	return ""
}

func repoSection() Repository {
	return Repository{Kind: "Repository", Name: "r", Backend: kopia.Backend{Filesystem: &kopia.FilesystemBackend{Path: "repo"}},
		Create: &kopia.CreateOptions{}}
}

// newRepository bootstraps a filesystem repository and returns its root.
func newRepository(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "repo"), 0o700); err != nil {
		t.Fatal(err)
	}
	boot := &WorkSpec{Operation: OpBootstrap, Target: Target{Kind: "Repository", Name: "r"}, Repository: repoSection()}
	if err := Run(context.Background(), Options{Spec: boot, RepositoryRoot: root, CacheDir: t.TempDir(), Getenv: env, Reporter: &Recorder{Path: filepath.Join(t.TempDir(), "b.json")}}); err != nil {
		t.Fatal(err)
	}
	return root
}

// backup snapshots dir into the repository under root and returns its id.
func backup(t *testing.T, root, dir string, src kopia.Source) string {
	t.Helper()
	status := filepath.Join(t.TempDir(), "status.json")
	spec := &WorkSpec{Operation: OpSnapshot, Target: Target{Kind: "Snapshot", Name: "s"}, Repository: repoSection(),
		Snapshot: &SnapshotWork{Source: src, Policy: kopia.Policy{}}}
	rep := &Recorder{Path: status}
	if err := Run(context.Background(), Options{Spec: spec, SourceDir: dir, RepositoryRoot: root, CacheDir: t.TempDir(), Getenv: env, Reporter: rep}); err != nil {
		t.Fatal(err)
	}
	return rep.r.Snapshot.Snapshot.ID
}

func restoreRun(t *testing.T, root, into string, w *RestoreWork, rep *Recorder) error {
	t.Helper()
	spec := &WorkSpec{Operation: OpRestore, Target: Target{Kind: "Restore", Name: "rs"}, Repository: repoSection(), Restore: w}
	b, _ := json.Marshal(spec)
	if _, err := Parse(b); err != nil {
		t.Fatal(err)
	}
	return Run(context.Background(), Options{Spec: spec, SourceDir: into, RepositoryRoot: root, CacheDir: t.TempDir(), Getenv: env,
		Reporter: rep, PollInterval: 50 * time.Millisecond})
}

func TestRestoreRuns(t *testing.T) {
	root, data := newRepository(t), t.TempDir()
	src := kopia.Source{Username: "app", Hostname: "ns", Path: "/pvc/data"}
	if err := os.WriteFile(filepath.Join(data, "a.txt"), []byte("first"), 0o640); err != nil {
		t.Fatal(err)
	}
	first := backup(t, root, data, src)
	time.Sleep(1100 * time.Millisecond) // kopia orders snapshots by start time
	if err := os.WriteFile(filepath.Join(data, "a.txt"), []byte("second"), 0o640); err != nil {
		t.Fatal(err)
	}
	second := backup(t, root, data, src)

	read := func(dir string) string {
		b, err := os.ReadFile(filepath.Join(dir, "a.txt"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	opts := restore.Options(nil)

	t.Run("pinned id", func(t *testing.T) {
		into := t.TempDir()
		rep := &Recorder{Path: filepath.Join(t.TempDir(), "s.json")}
		if err := restoreRun(t, root, into, &RestoreWork{SnapshotID: first, OnMissing: "Fail", Options: opts}, rep); err != nil {
			t.Fatal(err)
		}
		if got := read(into); got != "first" {
			t.Fatalf("restored %q", got)
		}
		if rep.r.Phase != "Completed" || rep.r.Restored.SnapshotID != first || rep.r.Restored.Stats.Files != 1 {
			t.Fatalf("report: %+v", rep.r.Restored)
		}
	})
	t.Run("query picks by offset and pins", func(t *testing.T) {
		into := t.TempDir()
		rep := &Recorder{Path: filepath.Join(t.TempDir(), "s.json")}
		q := &restore.Query{Username: "app", Hostname: "ns", Offset: 1}
		if err := restoreRun(t, root, into, &RestoreWork{Query: q, OnMissing: "Fail", Options: opts}, rep); err != nil {
			t.Fatal(err)
		}
		if got := read(into); got != "first" || rep.r.Resolved == nil || rep.r.Resolved.SnapshotID != first {
			t.Fatalf("restored %q, resolved %+v", got, rep.r.Resolved)
		}
	})
	t.Run("an earlier pin wins over a new resolution", func(t *testing.T) {
		into := t.TempDir()
		rep := &Recorder{Path: filepath.Join(t.TempDir(), "s.json")}
		rep.r.Resolved = &RestoreResolution{SnapshotID: second}
		q := &restore.Query{Username: "app", Hostname: "ns", Offset: 1}
		if err := restoreRun(t, root, into, &RestoreWork{Query: q, OnMissing: "Fail", Options: opts}, rep); err != nil {
			t.Fatal(err)
		}
		if got := read(into); got != "second" {
			t.Fatalf("restored %q, want the pinned snapshot's content", got)
		}
	})
	t.Run("missing fails with SnapshotMissing", func(t *testing.T) {
		rep := &Recorder{Path: filepath.Join(t.TempDir(), "s.json")}
		q := &restore.Query{Username: "nobody", Hostname: "ns"}
		err := restoreRun(t, root, t.TempDir(), &RestoreWork{Query: q, OnMissing: "Fail", WaitTimeoutSeconds: 1, Options: opts}, rep)
		var ke *kopia.Error
		if !errors.As(err, &ke) || ke.Class != kopia.ClassSnapshotMissing || rep.r.Failure == nil {
			t.Fatalf("err = %v, report %+v", err, rep.r.Failure)
		}
	})
	t.Run("missing with Continue completes empty", func(t *testing.T) {
		into := t.TempDir()
		rep := &Recorder{Path: filepath.Join(t.TempDir(), "s.json")}
		q := &restore.Query{Username: "nobody", Hostname: "ns"}
		if err := restoreRun(t, root, into, &RestoreWork{Query: q, OnMissing: "Continue", Options: opts}, rep); err != nil {
			t.Fatal(err)
		}
		if rep.r.Phase != "Completed" || rep.r.Restored.SnapshotID != "" {
			t.Fatalf("report: %+v", rep.r)
		}
		if ents, _ := os.ReadDir(into); len(ents) != 0 {
			t.Fatalf("wrote %d entries for nothing", len(ents))
		}
	})
	t.Run("enableFileDeletion removes extra files only when asked", func(t *testing.T) {
		into := t.TempDir()
		_ = os.WriteFile(filepath.Join(into, "extra.txt"), []byte("x"), 0o644)
		rep := &Recorder{Path: filepath.Join(t.TempDir(), "s.json")}
		if err := restoreRun(t, root, into, &RestoreWork{SnapshotID: second, OnMissing: "Fail", Options: opts}, rep); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(into, "extra.txt")); err != nil {
			t.Fatal("extra file deleted without enableFileDeletion")
		}
		del := opts
		del.DeleteExtra = true
		if err := restoreRun(t, root, into, &RestoreWork{SnapshotID: second, OnMissing: "Fail", Options: del}, &Recorder{Path: filepath.Join(t.TempDir(), "s.json")}); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(into, "extra.txt")); !os.IsNotExist(err) {
			t.Fatalf("extra file survived enableFileDeletion: %v", err)
		}
	})
}
