package mover

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snapflow/snapflow/internal/kopia"
	"github.com/snapflow/snapflow/internal/restore"
)

// In a namespace-bound repository a run touches only its own namespace's
// snapshots, whatever ids its work spec names: the spec's ids come from
// status, which whoever may write status in the namespace can set.
func TestNamespaceBoundRuns(t *testing.T) {
	root, data := newRepository(t), t.TempDir()
	if err := os.WriteFile(filepath.Join(data, "a.txt"), []byte("payroll's"), 0o640); err != nil {
		t.Fatal(err)
	}
	theirs := backup(t, root, data, kopia.Source{Username: "pg", Hostname: "payroll", Path: "/pvc/data"})
	mine := backup(t, root, data, kopia.Source{Username: "pg", Hostname: "billing.prod", Path: "/pvc/data"})
	bound := repoSection()
	bound.Kind, bound.NamespaceBound = "ClusterRepository", true
	run := func(spec *WorkSpec, dir string) (*Recorder, error) {
		spec.Repository = bound
		rep := &Recorder{Path: filepath.Join(t.TempDir(), "r.json")}
		return rep, Run(context.Background(), Options{Spec: spec, SourceDir: dir, RepositoryRoot: root, CacheDir: t.TempDir(), Getenv: env, Reporter: rep})
	}
	refused := func(t *testing.T, rep *Recorder, err error) {
		t.Helper()
		if err == nil || rep.r.Failure == nil || rep.r.Failure.Class != kopia.ClassSourceNotAllowed {
			t.Fatalf("want a SourceNotAllowed failure, got %v (%+v)", err, rep.r.Failure)
		}
	}

	t.Run("restore of another namespace's snapshot", func(t *testing.T) {
		into := t.TempDir()
		rep, err := run(&WorkSpec{Operation: OpRestore, Target: Target{Kind: "Restore", Namespace: "billing", Name: "rs"},
			Restore: &RestoreWork{SnapshotID: theirs, OnMissing: "Fail", Options: restore.Options(nil)}}, into)
		refused(t, rep, err)
		if entries, _ := os.ReadDir(into); len(entries) != 0 {
			t.Fatalf("nothing may be written, found %d entries", len(entries))
		}
	})
	t.Run("restore by query sees only its own namespace", func(t *testing.T) {
		rep, err := run(&WorkSpec{Operation: OpRestore, Target: Target{Kind: "Restore", Namespace: "billing", Name: "rs"},
			Restore: &RestoreWork{Query: &restore.Query{Username: "pg", Hostname: "payroll"}, OnMissing: "Fail", Options: restore.Options(nil)}}, t.TempDir())
		if err == nil || rep.r.Failure == nil || rep.r.Failure.Class != kopia.ClassSnapshotMissing {
			t.Fatalf("want nothing found, got %v (%+v)", err, rep.r.Failure)
		}
	})
	t.Run("backup under another namespace's hostname", func(t *testing.T) {
		rep, err := run(&WorkSpec{Operation: OpSnapshot, Target: Target{Kind: "Snapshot", Namespace: "billing", Name: "s"},
			Snapshot: &SnapshotWork{Source: kopia.Source{Username: "pg", Hostname: "payroll", Path: "/pvc/data"}}}, data)
		refused(t, rep, err)
	})
	t.Run("pin of another namespace's snapshot", func(t *testing.T) {
		rep, err := run(&WorkSpec{Operation: OpPin, Target: Target{Kind: "Snapshot", Namespace: "billing", Name: "s"},
			Pin: &PinWork{SnapshotID: theirs, Pin: true}}, "")
		refused(t, rep, err)
	})
	t.Run("delete batch holds the foreign member and deletes its own", func(t *testing.T) {
		rep, err := run(&WorkSpec{Operation: OpDelete, Target: Target{Kind: "ClusterRepository", Name: "r"},
			Delete: &DeleteWork{Members: []DeleteMember{
				{Namespace: "billing", Name: "decoy", UID: "1", SnapshotID: theirs},
				{Namespace: "billing", Name: "mine", UID: "2", SnapshotID: mine},
			}}}, "")
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]MemberOutcome{}
		names := []string{"decoy", "mine"}
		for _, m := range rep.r.Members {
			got[names[m.Index]] = m
		}
		if d := got["decoy"]; d.Deleted || d.Class != kopia.ClassSourceNotAllowed || !strings.Contains(d.Message, `belongs to namespace "payroll"`) {
			t.Fatalf("decoy member: %+v", d)
		}
		if !got["mine"].Deleted {
			t.Fatalf("own member: %+v", got["mine"])
		}
		// The foreign snapshot is still there for its owner.
		into := t.TempDir()
		rep, err = run(&WorkSpec{Operation: OpRestore, Target: Target{Kind: "Restore", Namespace: "payroll", Name: "rs"},
			Restore: &RestoreWork{SnapshotID: theirs, OnMissing: "Fail", Options: restore.Options(nil)}}, into)
		if err != nil {
			t.Fatalf("its owner restores it: %v (%+v)", err, rep.r.Failure)
		}
	})
}
