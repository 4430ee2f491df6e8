package kopia

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kopia/kopia/fs"
	"github.com/kopia/kopia/fs/localfs"
	"github.com/kopia/kopia/fs/virtualfs"
	"github.com/kopia/kopia/repo"
	"github.com/kopia/kopia/repo/logging"
	"github.com/kopia/kopia/snapshot"
	"github.com/kopia/kopia/snapshot/policy"
	"github.com/kopia/kopia/snapshot/upload"
)

// Source is a kopia snapshot identity: username@hostname:path.
type Source struct {
	Username string `json:"username"`
	Hostname string `json:"hostname"`
	Path     string `json:"path"`
}

func (s Source) info() snapshot.SourceInfo {
	return snapshot.SourceInfo{UserName: s.Username, Host: s.Hostname, Path: s.Path}
}

func (s Source) String() string { return s.info().String() }

// Meta is the mover identity recorded on every snapshot (the kopiur-meta tag),
// so a restore can write files back as the same user.
type Meta struct {
	UID     *int64 `json:"uid,omitempty"`
	GID     *int64 `json:"gid,omitempty"`
	FSGroup *int64 `json:"fsGroup,omitempty"`
	Src     string `json:"src,omitempty"`
}

// Reserved tag keys, as kopia stores them ("tag:" + key).
const (
	tagPrefix   = "tag:"
	tagConfig   = tagPrefix + "kopiur"
	tagMeta     = tagPrefix + "kopiur-meta"
	configPfx   = "config:"
	pinSnapflow = "snapflow"
)

// SnapshotRequest is one snapshot to take.
type SnapshotRequest struct {
	// Dir is the directory to back up (the mounted source volume).
	Dir string
	// Stream, when set, is backed up instead of Dir: one file read from
	// a command's output, never touching disk.
	Stream *Stream
	Source Source
	Policy Policy
	// PolicyName becomes the reserved kopiur:config tag.
	PolicyName  string
	Meta        *Meta
	Tags        map[string]string
	Description string
	Pin         bool
	// Prefetch, when set, is the source listed ahead (StartPrefetch of Dir).
	Prefetch *Prefetch
	// Progress, when set, is called at most every ProgressInterval with the running totals.
	Progress         func(Progress)
	ProgressInterval time.Duration
}

// Stream is a stream source's file: Reader delivers the command's output
// and Result, called once Reader is drained, whether the command
// succeeded. A failed command never leaves a snapshot, whatever the
// error-handling policy says: its output may be cut anywhere.
type Stream struct {
	Name   string
	Reader io.ReadCloser
	Result func() error
}

// Progress is the running state of an upload. Bytes count as they are
// read; files when they are done.
type Progress struct {
	FilesHashed, FilesCached int64
	BytesHashed, BytesCached int64
	BytesUploaded            int64
	// Errors counts entries that failed the run; IgnoredErrors those the
	// error-handling policy let pass.
	Errors, IgnoredErrors int64
	// EstimatedBytes is the size of the source's previous snapshot, the
	// best guess of how much this run reads (0: no previous snapshot).
	EstimatedBytes int64
}

// Stats are the numbers a Snapshot's status reports.
type Stats struct {
	SizeBytes      int64 `json:"sizeBytes"`
	BytesNew       int64 `json:"bytesNew"`
	FilesNew       int64 `json:"filesNew"`
	FilesModified  int64 `json:"filesModified"`
	FilesUnchanged int64 `json:"filesUnchanged"`
	FilesFailed    int64 `json:"filesFailed"`
	Files          int64 `json:"files"`
	Dirs           int64 `json:"dirs"`
}

// SnapshotResult is what a snapshot produced.
type SnapshotResult struct {
	ID        string
	Unchanged bool // identical to the previous snapshot and not saved (ignoreIdenticalSnapshots)
	Stats     Stats
	Start     time.Time
	End       time.Time
	// Incomplete is kopia's reason when the snapshot is partial.
	Incomplete string
	// IgnoredErrors counts file errors the policy chose to tolerate.
	IgnoredErrors int64
	// Pinned says whether the saved (or, when Unchanged, the previous)
	// snapshot carries snapflow's pin.
	Pinned bool
}

// Snapshot uploads req.Dir as a snapshot of req.Source.
func (r *Repo) Snapshot(ctx context.Context, req SnapshotRequest) (SnapshotResult, error) {
	var res SnapshotResult
	defer req.Prefetch.Stop()
	dir, err := sourceRoot(req)
	if err != nil {
		return res, err
	}
	if req.Stream != nil {
		// What the messages below name as the source.
		req.Dir = "stream " + req.Stream.Name
	}
	tags, err := snapshotTags(req)
	if err != nil {
		return res, err
	}
	si := req.Source.info()
	prog := &progress{report: req.Progress, interval: req.ProgressInterval, source: req.Dir}
	if prog.interval <= 0 {
		prog.interval = 2 * time.Second
	}
	if req.Progress != nil {
		// Events alone leave gaps: a final flush of packs, or one large
		// file, reports nothing for as long as it takes.
		stop, ticking := make(chan struct{}), make(chan struct{})
		go func() { defer close(ticking); prog.tick(stop) }()
		defer func() { close(stop); <-ticking }()
	}

	err = repo.WriteSession(ctx, r.rep, repo.WriteSessionOptions{
		Purpose: "snapflow:snapshot",
		// Packs are written as they fill and at the final flush, after the
		// upload returns: count bytes here so bytesNew includes the flush.
		OnUpload: func(n int64) { prog.bytesUploaded.Add(n) },
	}, func(ctx context.Context, w repo.RepositoryWriter) error {
		// Write the policy only when it changed: each write is a manifest.
		want := req.Policy.kopiaPolicy()
		if have, err := policy.GetDefinedPolicy(ctx, w, si); err != nil || !samePolicy(have, want) {
			if err := policy.SetPolicy(ctx, w, si, want); err != nil {
				return fmt.Errorf("set the kopia policy of %s: %w", si, err)
			}
		}
		// The tree is the stored policy plus kopia's cache-miss log, which
		// tells modified files from new ones (newModified).
		tree, err := policy.TreeForSourceWithOverride(ctx, w, si, withCacheMissLog(*want))
		if err != nil {
			return fmt.Errorf("read the kopia policy of %s: %w", si, err)
		}
		previous, err := snapshot.FindPreviousManifests(ctx, w, si, nil)
		if err != nil {
			return fmt.Errorf("find previous snapshots of %s: %w", si, err)
		}
		if len(previous) > 0 && previous[0].IncompleteReason == "" {
			// The last complete snapshot comes first.
			prog.estimate.Store(previous[0].Stats.TotalFileSize)
		}
		counter := newNewModified()
		prog.onHashed = counter.hashed
		u := upload.NewUploader(w)
		u.Progress = prog
		u.FailFast = req.Policy.FailFast
		// kopia's --upload-limit-mb: stop once this much is written.
		u.MaxUploadBytes = int64(req.Policy.UploadLimitMB) << 20
		// spec.extraArgs: zero leaves kopia's default.
		u.ParallelUploads = req.Policy.ParallelUploads
		u.ForceHashPercentage = req.Policy.ForceHashPercentage
		if d := req.Policy.CheckpointInterval; d > 0 {
			u.CheckpointInterval = d
		}
		// A stream's one file is the snapshot: no ignore rule may drop it.
		u.DisableIgnoreRules = req.Stream != nil
		// The prefetch walks until here: the lookups above leave a core idle too.
		entry := req.Prefetch.source(dir)
		man, err := u.Upload(logging.WithAdditionalLogger(ctx, counter.loggers), entry, tree, si, previous...)
		if err != nil {
			return fmt.Errorf("upload %s: %w", req.Dir, err)
		}
		man.Description = req.Description
		man.Tags = tags
		if req.Pin {
			man.UpdatePins([]string{pinSnapflow}, nil)
		}
		res.Pinned = req.Pin
		res.Start, res.End = man.StartTime.ToTime(), man.EndTime.ToTime()
		res.Incomplete = man.IncompleteReason
		res.Stats = prog.stats(man)
		if man.IncompleteReason == upload.IncompleteReasonLimitReached {
			// No manifest: an incomplete tree is not a restore point. What
			// was uploaded stays as content the next run need not send.
			return &Error{Class: ClassUploadLimit, Err: fmt.Errorf("the upload of %s stopped after %d MB, the limit spec.upload.limitMb (or --upload-limit-mb in spec.extraArgs) sets, before the snapshot was complete (%d bytes new); raise the limit or remove it, and the next run sends only what is still missing",
				req.Dir, req.Policy.UploadLimitMB, res.Stats.BytesNew)}
		}
		if req.Stream != nil {
			// Closing stops a command whose output was not read to its
			// end (the upload stopped early), so Result never waits on it.
			_ = req.Stream.Reader.Close()
			if err := req.Stream.Result(); err != nil {
				return &Error{Class: ClassCommandFailed, Err: fmt.Errorf("the command of stream %s failed, so its output may be cut anywhere and no snapshot was saved: %w", req.Stream.Name, err)}
			}
		}
		if n, first := prog.storageFailed(); n > 0 {
			// Not the source's fault, so never a partial snapshot and never
			// a hint to ignore file errors (which would turn the next outage
			// into a Succeeded snapshot with files missing): the storage
			// failed, and the run is retried like any unreachable storage.
			return &Error{Class: ClassUnreachable, Err: fmt.Errorf("the repository's storage failed while %d file(s) of %s were uploaded (first: %s); nothing is wrong with the source, and no snapshot was saved", n, req.Dir, first)}
		}
		if ds := man.RootEntry.DirSummary; ds != nil {
			res.IgnoredErrors = int64(ds.IgnoredErrorCount)
			if ds.FatalErrorCount > 0 {
				return &Error{Class: ClassPartial, Err: fmt.Errorf("%d file(s) could not be read from %s (first: %s); set errorHandling.ignoreFileErrors to tolerate them", ds.FatalErrorCount, req.Dir, firstError(ds))}
			}
		}
		if len(previous) > 0 {
			res.Stats.FilesModified = counter.modified.Load()
			res.Stats.FilesNew -= res.Stats.FilesModified
			if req.Policy.IgnoreIdenticalSnapshots && previous[0].RootObjectID() == man.RootObjectID() {
				res.Unchanged, res.ID = true, string(previous[0].ID)
				res.Pinned = len(previous[0].Pins) > 0
				return nil
			}
		}
		id, err := snapshot.SaveSnapshot(ctx, w, man)
		if err != nil {
			return fmt.Errorf("save the snapshot manifest: %w", err)
		}
		res.ID = string(id)
		return nil
	})
	if err != nil {
		return SnapshotResult{}, classify(err)
	}
	res.Stats.BytesNew = prog.bytesUploaded.Load()
	return res, nil
}

// sourceRoot is the tree a run uploads: the source directory, or a
// directory holding only a stream's file.
func sourceRoot(req SnapshotRequest) (fs.Directory, error) {
	if st := req.Stream; st != nil {
		if st.Reader == nil || st.Result == nil || st.Name == "" {
			return nil, &Error{Class: ClassInternal, Err: fmt.Errorf("a stream needs a name, a reader and a result")}
		}
		return virtualfs.NewStaticDirectory(req.Source.Path, []fs.Entry{virtualfs.StreamingFileFromReader(st.Name, st.Reader)}), nil
	}
	st, err := os.Stat(req.Dir)
	if err != nil {
		return nil, &Error{Class: ClassSourceMissing, Err: fmt.Errorf("source %s: %w", req.Dir, err)}
	}
	if !st.IsDir() {
		return nil, &Error{Class: ClassSourceMissing, Err: fmt.Errorf("source %s is not a directory", req.Dir)}
	}
	dir, err := localfs.Directory(req.Dir)
	if err != nil {
		return nil, classify(fmt.Errorf("read source %s: %w", req.Dir, err))
	}
	return dir, nil
}

func samePolicy(a, b *policy.Policy) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(ja) == string(jb)
}

func snapshotTags(req SnapshotRequest) (map[string]string, error) {
	tags := map[string]string{}
	for k, v := range req.Tags {
		if strings.HasPrefix(k, "kopiur") || strings.Contains(k, ":") {
			return nil, &Error{Class: ClassInvalidConfig, Err: fmt.Errorf("tag %q is reserved or contains ':'", k)}
		}
		tags[tagPrefix+k] = v
	}
	if req.PolicyName != "" {
		tags[tagConfig] = configPfx + req.PolicyName
	}
	if req.Meta != nil {
		b, err := json.Marshal(req.Meta)
		if err != nil {
			return nil, err
		}
		tags[tagMeta] = string(b)
	}
	return tags, nil
}

func firstError(ds *fs.DirectorySummary) string {
	if len(ds.FailedEntries) == 0 {
		return "unknown"
	}
	return ds.FailedEntries[0].EntryPath + ": " + ds.FailedEntries[0].Error
}

// progress counts what the uploader reports. kopia calls it from many goroutines.
type progress struct {
	upload.NullUploadProgress
	filesHashed, filesCached, bytesHashed, bytesCached, bytesUploaded, errs, ignored atomic.Int64
	estimate                                                                         atomic.Int64

	// onHashed, when set, is told each file the upload read.
	onHashed func(path string)

	mu       sync.Mutex
	report   func(Progress)
	interval time.Duration
	last     time.Time

	// source is the directory backed up: errors on paths under it are the
	// source's; storageErrs counts entries the storage failed instead.
	source          string
	storageErrs     int
	firstStorageErr string
}

// Enabled is false so kopia skips its size-estimation walk, a second pass
// over the whole tree that only feeds an ETA; the counters below are still
// called.
func (p *progress) Enabled() bool { return false }

func (p *progress) CachedFile(_ string, size int64) {
	p.filesCached.Add(1)
	p.bytesCached.Add(size)
	p.maybeReport()
}

func (p *progress) FinishedHashingFile(fname string, _ int64) {
	p.filesHashed.Add(1)
	if p.onHashed != nil {
		p.onHashed(fname)
	}
	p.maybeReport()
}

// HashedBytes is called as a file is read, so a large file shows progress
// before it is done.
func (p *progress) HashedBytes(n int64) {
	p.bytesHashed.Add(n)
	p.maybeReport()
}

func (p *progress) Error(path string, err error, isIgnored bool) {
	if isIgnored {
		p.ignored.Add(1)
	} else {
		p.errs.Add(1)
	}
	if entryFromStorage(err, p.source) {
		p.mu.Lock()
		if p.storageErrs == 0 {
			p.firstStorageErr = fmt.Sprintf("%s: %v", path, err)
			if len(p.firstStorageErr) > 600 {
				p.firstStorageErr = p.firstStorageErr[:600] + "…"
			}
		}
		p.storageErrs++
		p.mu.Unlock()
	}
	p.maybeReport()
}

// storageFailed reports the entries that failed because the repository's
// storage did, not the source.
func (p *progress) storageFailed() (int, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.storageErrs, p.firstStorageErr
}

func (p *progress) snapshot() Progress {
	return Progress{
		FilesHashed: p.filesHashed.Load(), FilesCached: p.filesCached.Load(),
		BytesHashed: p.bytesHashed.Load(), BytesCached: p.bytesCached.Load(),
		BytesUploaded: p.bytesUploaded.Load(), Errors: p.errs.Load(), IgnoredErrors: p.ignored.Load(),
		EstimatedBytes: p.estimate.Load(),
	}
}

func (p *progress) tick(stop <-chan struct{}) {
	t := time.NewTicker(max(p.interval, 100*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			p.maybeReport()
		}
	}
}

func (p *progress) maybeReport() {
	if p.report == nil {
		return
	}
	p.mu.Lock()
	now := time.Now()
	due := now.Sub(p.last) >= p.interval
	if due {
		p.last = now
	}
	p.mu.Unlock()
	if due {
		p.report(p.snapshot())
	}
}

func (p *progress) stats(man *snapshot.Manifest) Stats {
	s := Stats{
		SizeBytes:      man.Stats.TotalFileSize,
		BytesNew:       p.bytesUploaded.Load(),
		FilesNew:       p.filesHashed.Load(),
		FilesUnchanged: p.filesCached.Load(),
		Files:          int64(man.Stats.TotalFileCount),
		Dirs:           int64(man.Stats.TotalDirectoryCount),
	}
	if ds := man.RootEntry.DirSummary; ds != nil {
		s.FilesFailed = int64(ds.FatalErrorCount) + int64(ds.IgnoredErrorCount)
		// The manifest's own counts leave out files taken unchanged from
		// the previous snapshot; the root's summary counts the whole tree.
		s.Files, s.Dirs = ds.TotalFileCount, ds.TotalDirCount
	}
	return s
}

// errNoSnapshot is returned when an id names no snapshot.
var errNoSnapshot = errors.New("no such snapshot")
