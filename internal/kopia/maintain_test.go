package kopia_test

import (
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/snapflow/snapflow/internal/kopia"
)

// TestMaintainReclaimsDeletedData backs up 4 MiB, deletes the snapshot and
// runs full maintenance: storage must shrink by about that much.
func TestMaintainReclaimsDeletedData(t *testing.T) {
	ctx := context.Background()
	backend := kopia.Backend{Filesystem: &kopia.FilesystemBackend{Path: filepath.Join(t.TempDir(), "repo")}}
	open := func(user, host string) *kopia.Repo {
		t.Helper()
		r, err := kopia.Open(ctx, kopia.OpenOptions{Backend: backend, Password: "pw", Create: &kopia.CreateOptions{}, Username: user, Hostname: host})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = r.Close(ctx) })
		return r
	}
	data := t.TempDir()
	b := make([]byte, 4<<20)
	_, _ = rand.Read(b)
	if err := os.WriteFile(filepath.Join(data, "big"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	r := open("snapflow", "cluster-a")
	snap, err := r.Snapshot(ctx, kopia.SnapshotRequest{Dir: data, Source: src})
	if err != nil {
		t.Fatal(err)
	}

	// Quick maintenance claims the unowned repository and frees nothing
	// that a snapshot still references.
	q, err := r.Maintain(ctx, kopia.MaintainOptions{Mode: kopia.MaintainQuick})
	if err != nil {
		t.Fatal(err)
	}
	if q.Owner != "snapflow@cluster-a" || q.PreviousOwner != "" || !q.TookOver || q.Skipped {
		t.Fatalf("first run: %+v, want snapflow@cluster-a taking over an unowned repository", q)
	}
	if q.Counted || q.Before.Bytes != 0 {
		t.Fatalf("a quick run counted the blobs: %+v", q)
	}

	// Another cluster is refused and changes nothing.
	other := open("snapflow", "cluster-b")
	s, err := other.Maintain(ctx, kopia.MaintainOptions{Mode: kopia.MaintainFull, Safety: kopia.SafetyNone})
	if !errors.Is(err, kopia.ErrNotOwner) || !s.Skipped || s.PreviousOwner != "snapflow@cluster-a" {
		t.Fatalf("second owner: %+v, %v; want skipped with ErrNotOwner naming snapflow@cluster-a", s, err)
	}

	if _, err := r.Delete(ctx, []string{snap.ID}, nil); err != nil {
		t.Fatal(err)
	}
	// kopia's default safety keeps content for a day: nothing goes yet.
	kept, err := r.Maintain(ctx, kopia.MaintainOptions{Mode: kopia.MaintainFull})
	if err != nil {
		t.Fatal(err)
	}
	if !kept.Counted || kept.After.Bytes < 4<<20 {
		t.Fatalf("full maintenance with safety full freed fresh data: %d bytes left", kept.After.Bytes)
	}
	// What it kept is what a later run can free: no snapshot needs it.
	if rec, ok := kept.Reclaimable(); !ok || rec < 4<<20 || rec > kept.After.Bytes {
		t.Fatalf("reclaimable after deleting the only snapshot: %d (%v) of %d stored, want the 4 MiB it held", rec, ok, kept.After.Bytes)
	}
	if _, ok := q.Reclaimable(); ok {
		t.Fatal("a quick run claims to know what is reclaimable")
	}
	// kopia dates contents and the maintenance start in whole seconds and
	// keeps a content of the start's second even with no margins: let
	// one pass since the backup, as any real deletion has.
	time.Sleep(1100 * time.Millisecond)
	full, err := r.Maintain(ctx, kopia.MaintainOptions{Mode: kopia.MaintainFull, Safety: kopia.SafetyNone})
	if err != nil {
		t.Fatal(err)
	}
	if full.TookOver || full.Before.Bytes-full.After.Bytes < 4<<20-(256<<10) {
		t.Fatalf("full maintenance with safety none: %+v, want about 4 MiB reclaimed", full)
	}
	if rec, ok := full.Reclaimable(); !ok || rec > 256<<10 {
		t.Fatalf("reclaimable after freeing it: %d (%v), want next to nothing", rec, ok)
	}

	// An alias hands over silently; takeover takes it from anyone.
	renamed := open("snapflow", "cluster-a2")
	if res, err := renamed.Maintain(ctx, kopia.MaintainOptions{Mode: kopia.MaintainQuick, Aliases: []string{"snapflow@cluster-a"}}); err != nil || !res.TookOver {
		t.Fatalf("alias: %+v, %v; want a takeover", res, err)
	}
	if res, err := other.Maintain(ctx, kopia.MaintainOptions{Mode: kopia.MaintainQuick, Takeover: true}); err != nil || !res.TookOver || res.PreviousOwner != "snapflow@cluster-a2" {
		t.Fatalf("takeover: %+v, %v; want cluster-b taking over from cluster-a2", res, err)
	}
	if _, err := r.Maintain(ctx, kopia.MaintainOptions{Mode: kopia.MaintainQuick, Safety: "some"}); kopia.ClassOf(err) != kopia.ClassInvalidConfig {
		t.Fatalf("unknown safety: %v, want %s", err, kopia.ClassInvalidConfig)
	}
}

// What is reclaimable is known only from a counted run whose garbage
// collection left its statistics; a report from an older mover has none.
func TestReclaimable(t *testing.T) {
	n := func(v int64) *int64 { return &v }
	after := kopia.StorageUsage{Blobs: 3, Bytes: 1000}
	for _, tc := range []struct {
		name string
		res  kopia.MaintainResult
		want int64
		ok   bool
	}{
		{"counted", kopia.MaintainResult{Counted: true, After: after, Referenced: n(600), Unreferenced: n(350)}, 350, true},
		{"bounded by what is stored", kopia.MaintainResult{Counted: true, After: after, Referenced: n(600), Unreferenced: n(900)}, 400, true},
		{"all referenced", kopia.MaintainResult{Counted: true, After: after, Referenced: n(1200), Unreferenced: n(0)}, 0, true},
		{"no statistics", kopia.MaintainResult{Counted: true, After: after}, 0, false},
		{"not counted", kopia.MaintainResult{Referenced: n(600), Unreferenced: n(1)}, 0, false},
	} {
		if got, ok := tc.res.Reclaimable(); got != tc.want || ok != tc.ok {
			t.Errorf("%s: Reclaimable() = %d, %v; want %d, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}
