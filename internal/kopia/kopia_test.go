package kopia_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/internal/kopia"
	"github.com/snapflow/snapflow/test/harness"
)

func seed(t *testing.T, dir string, n int) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "docs"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		b := make([]byte, 4096)
		_, _ = rand.Read(b)
		if err := os.WriteFile(filepath.Join(dir, "docs", fmt.Sprintf("file-%d.txt", i)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// sameTree fails unless every regular file under want exists under got with the same bytes.
func sameTree(t *testing.T, want, got string) {
	t.Helper()
	n := 0
	err := filepath.Walk(want, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(want, p)
		a, _ := os.ReadFile(p)
		b, err := os.ReadFile(filepath.Join(got, rel))
		if err != nil {
			return fmt.Errorf("restored tree misses %s: %w", rel, err)
		}
		if !bytes.Equal(a, b) {
			return fmt.Errorf("%s differs after restore", rel)
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("compared no files")
	}
}

var src = kopia.Source{Username: "app-data", Hostname: "kopiur-tryit", Path: "/pvc/app-data"}

// exercise runs the lifecycle every backend must support.
func exercise(t *testing.T, backend kopia.Backend) {
	ctx := context.Background()
	data := t.TempDir()
	seed(t, data, 20)
	if err := os.MkdirAll(filepath.Join(data, "lost+found"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "lost+found", "junk"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}

	if _, err := kopia.Open(ctx, kopia.OpenOptions{Backend: backend, Password: "pw"}); kopia.ClassOf(err) != kopia.ClassNotInitialized {
		t.Fatalf("open of an empty location without create: class %s (%v), want %s", kopia.ClassOf(err), err, kopia.ClassNotInitialized)
	}
	r, err := kopia.Open(ctx, kopia.OpenOptions{Backend: backend, Password: "pw", Create: &kopia.CreateOptions{}, Username: src.Username, Hostname: src.Hostname})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	if !r.Created() || r.UniqueID() == "" {
		t.Fatalf("created=%v uniqueID=%q", r.Created(), r.UniqueID())
	}

	first, err := r.Snapshot(ctx, kopia.SnapshotRequest{Dir: data, Source: src, PolicyName: "app-data", Description: "first",
		Meta: &kopia.Meta{UID: ptr(int64(65532)), Src: "default"}, Tags: map[string]string{"env": "test"}})
	if err != nil {
		t.Fatal(err)
	}
	if first.Stats.FilesNew != 20 || first.Stats.FilesUnchanged != 0 || first.Stats.BytesNew <= 0 || first.ID == "" {
		t.Fatalf("first snapshot stats %+v id %q: want 20 new files, bytes uploaded and an id", first.Stats, first.ID)
	}
	if first.Stats.SizeBytes != 20*4096 {
		t.Fatalf("sizeBytes = %d, want %d (lost+found must be ignored by default)", first.Stats.SizeBytes, 20*4096)
	}

	second, err := r.Snapshot(ctx, kopia.SnapshotRequest{Dir: data, Source: src, PolicyName: "app-data"})
	if err != nil {
		t.Fatal(err)
	}
	if second.Stats.FilesUnchanged != 20 || second.Stats.FilesNew != 0 || second.Stats.Files != 20 || second.ID == first.ID || second.Unchanged {
		t.Fatalf("unchanged data: stats %+v unchanged=%v", second.Stats, second.Unchanged)
	}
	if second.Stats.BytesNew > first.Stats.BytesNew/10 {
		t.Fatalf("unchanged data uploaded %d bytes, the first run %d", second.Stats.BytesNew, first.Stats.BytesNew)
	}

	same, err := r.Snapshot(ctx, kopia.SnapshotRequest{Dir: data, Source: src, Policy: kopia.Policy{IgnoreIdenticalSnapshots: true}})
	if err != nil {
		t.Fatal(err)
	}
	if !same.Unchanged || same.ID != second.ID {
		t.Fatalf("ignoreIdenticalSnapshots: unchanged=%v id=%s, want the previous id %s", same.Unchanged, same.ID, second.ID)
	}

	// One modified file and one new file.
	if err := os.WriteFile(filepath.Join(data, "docs", "file-1.txt"), []byte("changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "docs", "new.txt"), []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	third, err := r.Snapshot(ctx, kopia.SnapshotRequest{Dir: data, Source: src, Policy: kopia.Policy{IgnoreRules: []string{}}})
	if err != nil {
		t.Fatal(err)
	}
	// With ignoreRules [] the lost+found file is backed up too: it is new.
	if third.Stats.FilesModified != 1 || third.Stats.FilesNew != 2 || third.Stats.FilesUnchanged != 19 {
		t.Fatalf("third snapshot stats %+v: want 1 modified, 2 new (new.txt, lost+found/junk), 19 unchanged", third.Stats)
	}

	list, err := r.List(ctx, &src)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 3 || list[0].ID != first.ID || list[0].PolicyName != "app-data" || list[0].Tags["env"] != "test" ||
		list[0].Meta == nil || *list[0].Meta.UID != 65532 || list[0].Description != "first" {
		t.Fatalf("list = %+v", list)
	}

	restored := t.TempDir()
	if _, err := r.Restore(ctx, first.ID, restored, kopia.RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	// The first snapshot holds file-1.txt as it was, and no new.txt.
	if b, _ := os.ReadFile(filepath.Join(restored, "docs", "file-1.txt")); len(b) != 4096 {
		t.Fatalf("restored file-1.txt has %d bytes, want the original 4096", len(b))
	}
	if _, err := os.Stat(filepath.Join(restored, "docs", "new.txt")); !os.IsNotExist(err) {
		t.Fatalf("new.txt must not be in the first snapshot: %v", err)
	}
	latest := t.TempDir()
	if _, err := r.Restore(ctx, third.ID, latest, kopia.RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	sameTree(t, data, latest)

	pinnedID, err := r.SetPin(ctx, first.ID, true)
	if err != nil {
		t.Fatal(err)
	}
	if in, err := r.Get(ctx, pinnedID); err != nil || !in.Pinned || in.Description != "first" {
		t.Fatalf("pin did not stick: %+v %v", in, err)
	}
	if again, err := r.SetPin(ctx, pinnedID, true); err != nil || again != pinnedID {
		t.Fatalf("pinning a pinned snapshot must change nothing: %s %v", again, err)
	}
	if first.ID, err = r.SetPin(ctx, pinnedID, false); err != nil {
		t.Fatal(err)
	}

	del, err := r.Delete(ctx, []string{first.ID, second.ID, "k0000000000000000000000000000000"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(del.Deleted) != 2 || len(del.Missing) != 1 || len(del.Failed) != 0 {
		t.Fatalf("delete result %+v", del)
	}
	again, err := r.Delete(ctx, []string{first.ID}, nil)
	if err != nil || len(again.Missing) != 1 {
		t.Fatalf("deleting twice must be a no-op: %+v %v", again, err)
	}
	if _, err := r.Get(ctx, first.ID); kopia.ClassOf(err) != kopia.ClassSnapshotMissing {
		t.Fatalf("get deleted: %v", err)
	}
	u, err := r.Usage(ctx)
	if err != nil || u.Snapshots != 1 {
		t.Fatalf("usage %+v %v", u, err)
	}

	// A second client with the wrong password is told so.
	if _, err := kopia.Open(ctx, kopia.OpenOptions{Backend: backend, Password: "wrong"}); kopia.ClassOf(err) != kopia.ClassWrongPassword {
		t.Fatalf("wrong password: class %s (%v)", kopia.ClassOf(err), err)
	}
	// Reconnecting with the right one sees the same repository.
	r2, err := kopia.Open(ctx, kopia.OpenOptions{Backend: backend, Password: "pw", Create: &kopia.CreateOptions{}})
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close(ctx)
	if r2.Created() || r2.UniqueID() != r.UniqueID() {
		t.Fatalf("reopen: created=%v id %s vs %s", r2.Created(), r2.UniqueID(), r.UniqueID())
	}
}

func ptr[T any](v T) *T { return &v }

// newFilesystemRepo creates a repository in a temporary directory, closed
// when the test ends.
func newFilesystemRepo(t *testing.T) *kopia.Repo {
	t.Helper()
	ctx := context.Background()
	b := kopia.Backend{Filesystem: &kopia.FilesystemBackend{Path: filepath.Join(t.TempDir(), "repo")}}
	r, err := kopia.Open(ctx, kopia.OpenOptions{Backend: b, Password: "pw", Create: &kopia.CreateOptions{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(ctx) })
	return r
}

func TestFilesystemRepository(t *testing.T) {
	exercise(t, kopia.Backend{Filesystem: &kopia.FilesystemBackend{Path: filepath.Join(t.TempDir(), "repo")}})
}

func TestCreateOptionsAndMissingSource(t *testing.T) {
	ctx := context.Background()
	b := kopia.Backend{Filesystem: &kopia.FilesystemBackend{Path: filepath.Join(t.TempDir(), "repo")}}
	r, err := kopia.Open(ctx, kopia.OpenOptions{Backend: b, Password: "pw", Create: &kopia.CreateOptions{
		Encryption: "CHACHA20-POLY1305-HMAC-SHA256", Hash: "BLAKE3-256", Splitter: "FIXED-1M", ECC: "REED-SOLOMON-CRC32", ECCOverheadPercent: 2}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	_, err = r.Snapshot(ctx, kopia.SnapshotRequest{Dir: filepath.Join(t.TempDir(), "absent"), Source: src})
	if kopia.ClassOf(err) != kopia.ClassSourceMissing {
		t.Fatalf("missing source: class %s (%v)", kopia.ClassOf(err), err)
	}
	if _, err := kopia.Open(ctx, kopia.OpenOptions{Backend: kopia.Backend{Filesystem: &kopia.FilesystemBackend{Path: filepath.Join(t.TempDir(), "x")}}, Password: "pw", Create: &kopia.CreateOptions{Hash: "NOPE"}}); err == nil {
		t.Fatal("an unknown hash must be refused")
	}
}

// startBucket starts versitygw for the test with one bucket in it.
func startBucket(t *testing.T, bucket string) *harness.S3 {
	t.Helper()
	harness.RequireTool(t, "versitygw")
	s, err := harness.StartS3(harness.S3Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop() })
	cli := s3.New(s3.Options{Region: s.Region, BaseEndpoint: aws.String(s.URL), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, "")})
	if _, err := cli.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestS3Repository(t *testing.T) {
	s := startBucket(t, "kopia-repo")
	ctx := context.Background()
	backend := kopia.Backend{S3: &kopia.S3Backend{Bucket: "kopia-repo", Prefix: "tryit/", Endpoint: s.Endpoint, Region: s.Region,
		DisableTLS: true, AccessKeyID: s.AccessKey, SecretAccessKey: s.SecretKey}}
	exercise(t, backend)
	keysStayOffTheCache(t, backend, s.SecretKey)

	missing := backend
	missing.S3 = &kopia.S3Backend{Bucket: "no-such-bucket", Endpoint: s.Endpoint, DisableTLS: true, AccessKeyID: s.AccessKey, SecretAccessKey: s.SecretKey, Region: s.Region}
	if _, err := kopia.Open(ctx, kopia.OpenOptions{Backend: missing, Password: "pw", Create: &kopia.CreateOptions{}}); kopia.ClassOf(err) != kopia.ClassBucketMissing {
		t.Fatalf("missing bucket: class %s (%v)", kopia.ClassOf(err), err)
	}
	bad := *backend.S3
	bad.SecretAccessKey = "wrong-secret"
	if _, err := kopia.Open(ctx, kopia.OpenOptions{Backend: kopia.Backend{S3: &bad}, Password: "pw"}); kopia.ClassOf(err) != kopia.ClassAccessDenied {
		t.Fatalf("bad credentials: class %s (%v)", kopia.ClassOf(err), err)
	}
	down := *backend.S3
	down.Endpoint = "127.0.0.1:1"
	if _, err := kopia.Open(ctx, kopia.OpenOptions{Backend: kopia.Backend{S3: &down}, Password: "pw"}); kopia.ClassOf(err) != kopia.ClassUnreachable {
		t.Fatalf("unreachable endpoint: class %s (%v)", kopia.ClassOf(err), err)
	}
}

// keysStayOffTheCache: a Persistent cache is a PVC that outlives the run,
// so the connection config (with the storage's secret key) goes to
// ConfigDir, and one an earlier version left in the cache is removed.
func keysStayOffTheCache(t *testing.T, backend kopia.Backend, secret string) {
	t.Helper()
	ctx := context.Background()
	cache, config := t.TempDir(), t.TempDir()
	stale := filepath.Join(cache, "repository.config")
	if err := os.WriteFile(stale, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := kopia.Open(ctx, kopia.OpenOptions{Backend: backend, Password: "pw", WorkDir: cache, ConfigDir: config})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Snapshot(ctx, kopia.SnapshotRequest{Dir: t.TempDir(), Source: src}); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(filepath.Join(config, "repository.config"))
	if err != nil || !bytes.Contains(cfg, []byte(secret)) {
		t.Fatalf("the connection config belongs in ConfigDir (%v)", err)
	}
	files := 0
	err = filepath.WalkDir(cache, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		files++
		b, err := os.ReadFile(path)
		if err == nil && bytes.Contains(b, []byte(secret)) {
			t.Errorf("%s on the cache holds the storage secret key", path)
		}
		return err
	})
	if err != nil || files == 0 {
		t.Fatalf("walk the cache: %d files, %v", files, err)
	}
}

// upload.limitMb is kopia's --upload-limit-mb: the upload stops after that
// much and no snapshot is saved; a run without the limit then completes.
func TestUploadLimitAbortsTheSnapshot(t *testing.T) {
	ctx := context.Background()
	r := newFilesystemRepo(t)
	data := t.TempDir()
	for i := range 4 {
		buf := make([]byte, 1<<20) // incompressible, so each file writes its size
		if _, err := rand.Read(buf); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(data, fmt.Sprintf("f%d", i)), buf, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err := r.Snapshot(ctx, kopia.SnapshotRequest{Dir: data, Source: src, Policy: kopia.Policy{UploadLimitMB: 1}})
	if kopia.ClassOf(err) != kopia.ClassUploadLimit {
		t.Fatalf("4 MB under a 1 MB limit: class %s (%v)", kopia.ClassOf(err), err)
	}
	if list, err := r.List(ctx, &src); err != nil || len(list) != 0 {
		t.Fatalf("an aborted upload saved %d snapshots (%v)", len(list), err)
	}
	if _, err := r.Snapshot(ctx, kopia.SnapshotRequest{Dir: data, Source: src}); err != nil {
		t.Fatalf("without the limit: %v", err)
	}
}

// spec.extraArgs reach kopia's uploader: --force-hash=100 hashes every
// unchanged file again instead of taking it from the previous snapshot,
// and the parsed policy carries each option.
func TestExtraArgsReachTheUploader(t *testing.T) {
	ctx := context.Background()
	r := newFilesystemRepo(t)
	data := t.TempDir()
	for i := range 5 {
		if err := os.WriteFile(filepath.Join(data, fmt.Sprintf("f%d", i)), []byte(strings.Repeat("x", 100+i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pol := kopia.PolicyFromSpec(&snapv1.SnapshotPolicySpec{ExtraArgs: []string{"--force-hash=100", "--parallel", "2", "--checkpoint-interval=5m"}})
	if pol.ForceHashPercentage != 100 || pol.ParallelUploads != 2 || pol.CheckpointInterval != 5*time.Minute {
		t.Fatalf("policy %+v misses the extraArgs", pol)
	}
	if _, err := r.Snapshot(ctx, kopia.SnapshotRequest{Dir: data, Source: src}); err != nil {
		t.Fatal(err)
	}
	plain, err := r.Snapshot(ctx, kopia.SnapshotRequest{Dir: data, Source: src})
	if err != nil || plain.Stats.FilesUnchanged != 5 {
		t.Fatalf("an unchanged second run: %d files unchanged (%v), want 5", plain.Stats.FilesUnchanged, err)
	}
	forced, err := r.Snapshot(ctx, kopia.SnapshotRequest{Dir: data, Source: src, Policy: pol})
	if err != nil || forced.Stats.FilesUnchanged != 0 {
		t.Fatalf("with --force-hash=100: %d files taken unchanged (%v), want every file hashed again", forced.Stats.FilesUnchanged, err)
	}
}

// moverDefaults.throttle reaches kopia's storage throttler: the limits are
// in the connection config the repository is opened from.
func TestThrottleReachesTheStorage(t *testing.T) {
	ctx := context.Background()
	config := t.TempDir()
	b := kopia.Backend{Filesystem: &kopia.FilesystemBackend{Path: filepath.Join(t.TempDir(), "repo")}}
	r, err := kopia.Open(ctx, kopia.OpenOptions{Backend: b, Password: "pw", Create: &kopia.CreateOptions{}, ConfigDir: config,
		Throttle: kopia.Throttle{UploadBytesPerSecond: 5e6, DownloadBytesPerSecond: 7e6, ReadsPerSecond: 11, WritesPerSecond: 13}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	cfg, err := os.ReadFile(filepath.Join(config, "repository.config"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"maxUploadSpeedBytesPerSecond":5000000`, `"maxDownloadSpeedBytesPerSecond":7000000`, `"readsPerSecond":11`, `"writesPerSecond":13`} {
		if !bytes.Contains(cfg, []byte(want)) {
			t.Errorf("connection config lacks %s: %s", want, cfg)
		}
	}
}
