package mover

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snapflow/snapflow/internal/kopia"
)

func TestVerifyRuns(t *testing.T) {
	root, data := newRepository(t), t.TempDir()
	for i := 0; i < 5; i++ {
		if err := os.WriteFile(filepath.Join(data, "f"+string(rune('a'+i))), []byte(strings.Repeat("x", 1000*(i+1))), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	id := backup(t, root, data, kopia.Source{Username: "app", Hostname: "ns", Path: "/pvc/data"})
	run := func(t *testing.T, w *VerifyWork, scratch string) (*Recorder, error) {
		w.SnapshotID, w.Slot = id, time.Now()
		spec := &WorkSpec{Operation: OpVerify, Target: Target{Kind: "SnapshotPolicy", Name: "p"}, Repository: repoSection(), Verify: w}
		rep := &Recorder{Path: filepath.Join(t.TempDir(), "s.json")}
		err := Run(context.Background(), Options{Spec: spec, SourceDir: scratch, RepositoryRoot: root, CacheDir: t.TempDir(), Getenv: env, Reporter: rep})
		return rep, err
	}
	t.Run("quick passes", func(t *testing.T) {
		rep, err := run(t, &VerifyWork{Tier: "quick", Quick: kopia.VerifyOptions{FilesPercent: 100}}, "")
		if err != nil || rep.r.Phase != "Passed" || rep.r.Verified.Outcome.Files != 5 {
			t.Fatalf("err %v report %+v", err, rep.r.Verified)
		}
	})
	t.Run("deep restores, passes and discards", func(t *testing.T) {
		scratch := t.TempDir()
		rep, err := run(t, &VerifyWork{Tier: "deep", SuccessExpr: "restored.files == 5 && restored.checksumMatches"}, scratch)
		if err != nil || rep.r.Phase != "Passed" || rep.r.Verified.Outcome.RestoredFiles != 5 {
			t.Fatalf("err %v report %+v", err, rep.r.Verified)
		}
		if ents, _ := os.ReadDir(scratch); len(ents) != 0 {
			t.Fatalf("the scratch copy was kept: %d entries", len(ents))
		}
	})
	t.Run("successExpr false fails the run with the result recorded", func(t *testing.T) {
		rep, err := run(t, &VerifyWork{Tier: "quick", SuccessExpr: "stats.files > 1000"}, "")
		if err == nil || rep.r.Phase != "Failed" || rep.r.Failure != nil || !strings.Contains(rep.r.Verified.Message, "returned false") {
			t.Fatalf("err %v phase %s failure %+v verified %+v", err, rep.r.Phase, rep.r.Failure, rep.r.Verified)
		}
	})
}
