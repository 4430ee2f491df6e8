package kopia

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/kopia/kopia/repo/manifest"
)

// One batch, three kinds of member: the deletable snapshot goes, an id that
// names a policy manifest fails with a reason and stays, a gone one is
// reported missing. A bad member never stops the others.
func TestDeleteBatchWithAFailingMember(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "repo")
	r, err := Open(ctx, OpenOptions{Backend: Backend{Filesystem: &FilesystemBackend{Path: dir}}, Password: "pw", Create: &CreateOptions{}, WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	data := t.TempDir()
	if err := os.WriteFile(filepath.Join(data, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	src := Source{Username: "u", Hostname: "h", Path: "/p"}
	snap, err := r.Snapshot(ctx, SnapshotRequest{Dir: data, Source: src})
	if err != nil {
		t.Fatal(err)
	}
	policies, err := r.rep.FindManifests(ctx, map[string]string{manifest.TypeLabelKey: "policy"})
	if err != nil || len(policies) == 0 {
		t.Fatalf("find the policy manifest the snapshot wrote: %v (%d)", err, len(policies))
	}
	policyID := string(policies[0].ID)

	res, err := r.Delete(ctx, []string{policyID, snap.ID, "0123456789abcdef0123456789abcdef"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Deleted) != 1 || res.Deleted[0] != snap.ID || len(res.Missing) != 1 || len(res.Failed) != 1 || res.Failed[policyID] == nil {
		t.Fatalf("result %+v", res)
	}
	if ClassOf(res.Failed[policyID]) != ClassInvalidConfig {
		t.Errorf("failure class %s", ClassOf(res.Failed[policyID]))
	}
	if still, err := r.rep.FindManifests(ctx, map[string]string{manifest.TypeLabelKey: "policy"}); err != nil || len(still) != len(policies) {
		t.Fatalf("the policy manifest must survive a delete naming it: %v, %d left", err, len(still))
	}
}

// A session's guard and a batch's check both hold a foreign snapshot in
// place, whatever id the caller names; loads and listings refuse it too.
func TestGuardKeepsForeignSnapshots(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "repo")
	open := func(g SourceGuard) *Repo {
		r, err := Open(ctx, OpenOptions{Backend: Backend{Filesystem: &FilesystemBackend{Path: dir}}, Password: "pw", Create: &CreateOptions{}, WorkDir: t.TempDir(), Guard: g})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close(ctx) })
		return r
	}
	data := t.TempDir()
	if err := os.WriteFile(filepath.Join(data, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	w := open(nil)
	mine, err := w.Snapshot(ctx, SnapshotRequest{Dir: data, Source: Source{Username: "p", Hostname: "team-a", Path: "/pvc/d"}})
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := w.Snapshot(ctx, SnapshotRequest{Dir: data, Source: Source{Username: "p", Hostname: "team-b", Path: "/pvc/d"}})
	if err != nil {
		t.Fatal(err)
	}
	w.Close(ctx)

	onlyA := func(s Source) error {
		if s.Hostname != "team-a" {
			return errors.New("not team-a's")
		}
		return nil
	}
	r := open(onlyA)
	if _, err := r.Get(ctx, theirs.ID); ClassOf(err) != ClassSourceNotAllowed {
		t.Errorf("get of a foreign snapshot: class %q (%v)", ClassOf(err), err)
	}
	if _, err := r.Restore(ctx, theirs.ID, t.TempDir(), RestoreOptions{}); ClassOf(err) != ClassSourceNotAllowed {
		t.Errorf("restore of a foreign snapshot: class %q (%v)", ClassOf(err), err)
	}
	list, err := r.List(ctx, nil)
	if err != nil || len(list) != 1 || list[0].ID != mine.ID {
		t.Errorf("listing under the guard: %+v %v", list, err)
	}
	res, err := r.Delete(ctx, []string{theirs.ID}, nil)
	if err != nil || len(res.Deleted) != 0 || ClassOf(res.Failed[theirs.ID]) != ClassSourceNotAllowed {
		t.Errorf("guarded delete of a foreign snapshot: %+v %v", res, err)
	}

	// Without a session guard, the per-member check still holds.
	u := open(nil)
	res, err = u.Delete(ctx, []string{theirs.ID, mine.ID}, func(_ string, s Source) error { return onlyA(s) })
	if err != nil || len(res.Deleted) != 1 || res.Deleted[0] != mine.ID || ClassOf(res.Failed[theirs.ID]) != ClassSourceNotAllowed {
		t.Fatalf("checked delete: %+v %v", res, err)
	}
	if _, err := u.Get(ctx, theirs.ID); err != nil {
		t.Errorf("the foreign snapshot must survive: %v", err)
	}
}
