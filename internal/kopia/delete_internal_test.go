package kopia

import (
	"context"
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

	res, err := r.Delete(ctx, []string{policyID, snap.ID, "0123456789abcdef0123456789abcdef"})
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
