package kopia_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snapflow/snapflow/internal/kopia"
	"github.com/snapflow/snapflow/test/netfault"
)

// outage runs one backup of dir while the storage is down, bringing it back
// as soon as a file has failed for it, so the rest of the upload and the
// manifest could be written: what kopia alone would call a partial, or
// with ignored file errors a whole, snapshot. It must be neither.
func outage(t *testing.T, r *kopia.Repo, dir string, ignore bool, cut, restore func()) {
	t.Helper()
	ctx := context.Background()
	cut()
	var back sync.Once
	res, err := r.Snapshot(ctx, kopia.SnapshotRequest{Dir: dir, Source: src, Policy: kopia.Policy{IgnoreFileErrors: &ignore},
		ProgressInterval: time.Millisecond, Progress: func(p kopia.Progress) {
			if p.Errors+p.IgnoredErrors > 0 {
				back.Do(restore)
			}
		}})
	back.Do(restore)
	if err == nil {
		t.Fatalf("the snapshot succeeded through an outage: %+v", res)
	}
	if c := kopia.ClassOf(err); c != kopia.ClassUnreachable {
		t.Fatalf("class %s, want %s: %v", c, kopia.ClassUnreachable, err)
	}
	if strings.Contains(err.Error(), "ignoreFileErrors") {
		t.Fatalf("a storage outage must not suggest ignoring file errors: %v", err)
	}
}

// wholeAfterwards backs dir up once the storage is back and restores it.
func wholeAfterwards(t *testing.T, r *kopia.Repo, dir string) {
	t.Helper()
	ctx := context.Background()
	res, err := r.Snapshot(ctx, kopia.SnapshotRequest{Dir: dir, Source: src})
	if err != nil {
		t.Fatalf("after the storage came back: %v", err)
	}
	restored := t.TempDir()
	if _, err := r.Restore(ctx, res.ID, restored, kopia.RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	sameTree(t, dir, restored)
}

func outageSource(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for i := range 4 {
		b := make([]byte, 1<<20)
		_, _ = rand.Read(b)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("file-%d", i)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// A filesystem repository that goes away mid-run (an NFS export lost) is
// the storage's failure: Unreachable, never a partial snapshot with a hint
// to ignore file errors, never a Succeeded one when file errors are
// ignored; once it is back the same backup succeeds whole.
func TestFilesystemOutageIsUnreachable(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "repo")
	r, err := kopia.Open(ctx, kopia.OpenOptions{Backend: kopia.Backend{Filesystem: &kopia.FilesystemBackend{Path: path}}, Password: "pw", Create: &kopia.CreateOptions{}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close(ctx) }()
	dir := outageSource(t)
	// Gone: the directory moved away and a file in its place, so kopia can
	// neither write into it nor make it again.
	cut := func() {
		if err := os.Rename(path, path+".away"); err != nil {
			t.Error(err)
		}
		if err := os.WriteFile(path, nil, 0o600); err != nil {
			t.Error(err)
		}
	}
	restore := func() {
		if err := os.Remove(path); err != nil {
			t.Error(err)
		}
		if err := os.Rename(path+".away", path); err != nil {
			t.Error(err)
		}
	}
	for _, ignore := range []bool{false, true} {
		t.Run(fmt.Sprintf("ignoreFileErrors=%v", ignore), func(t *testing.T) { outage(t, r, dir, ignore, cut, restore) })
	}
	wholeAfterwards(t, r, dir)
}

// The same over the network: S3 behind a connection that is cut (each
// failing write takes kopia's whole retry budget, about a minute and a
// half, so only the case that would lose data runs here).
func TestS3OutageIsUnreachable(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out kopia's retries")
	}
	s := startBucket(t, "outage")
	ctx := context.Background()
	proxy, err := netfault.New(s.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Cut)
	backend := kopia.Backend{S3: &kopia.S3Backend{Bucket: "outage", Endpoint: proxy.Addr, Region: s.Region,
		DisableTLS: true, AccessKeyID: s.AccessKey, SecretAccessKey: s.SecretKey}}
	r, err := kopia.Open(ctx, kopia.OpenOptions{Backend: backend, Password: "pw", Create: &kopia.CreateOptions{}, WorkDir: t.TempDir(), ConfigDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close(ctx) }()
	dir := outageSource(t)
	outage(t, r, dir, true, proxy.Cut, func() {
		if err := proxy.Restore(); err != nil {
			t.Error(err)
		}
	})
	wholeAfterwards(t, r, dir)
}
