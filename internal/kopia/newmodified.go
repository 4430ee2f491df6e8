package kopia

import (
	"sync"
	"sync/atomic"

	"github.com/kopia/kopia/repo/logging"
	"github.com/kopia/kopia/snapshot/policy"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// newModified tells apart, among the files the upload read, those the
// previous snapshots had (modified) from those they did not (new). The
// previous snapshots are the ones kopia compares against: the latest
// complete one and any incomplete ones after it.
//
// kopia's uploader already looks every file up in the previous snapshots;
// when the name is there but the metadata differs, it logs a "cache miss"
// with the file's path, if the policy's cacheMiss log detail asks for it.
// Listening to that log costs the upload nothing. Reading the previous
// snapshot's directories a second time, as an earlier version did, cost a
// 1% incremental run several percent of its time.
//
// Files read and not missed are new: the snapshot takes them as the files
// hashed less the modified ones.
type newModified struct {
	mu sync.Mutex
	// missed holds the paths logged as cache misses whose hashing has not
	// finished yet; kopia logs the miss just before it reads the file.
	missed   map[string]struct{}
	modified atomic.Int64
}

// Names kopia's uploader uses; the kopia version is pinned and the engine
// tests fail if either changes.
const (
	uploaderModule   = "uploader"
	cacheMissMessage = "cache miss"
	cacheMissPathKey = "path"
)

func newNewModified() *newModified { return &newModified{missed: map[string]struct{}{}} }

// withCacheMissLog returns a copy of p with kopia's per-file cache-miss log
// switched on, for the in-memory policy tree of one upload; nothing is
// stored.
func withCacheMissLog(p policy.Policy) *policy.Policy {
	p.LoggingPolicy.Entries.CacheMiss = policy.NewLogDetail(policy.LogDetailNormal)
	return &p
}

// loggers is a kopia logger factory that hears the uploader's cache misses
// and discards everything else.
func (n *newModified) loggers(module string) logging.Logger {
	if module != uploaderModule {
		return logging.NullLogger
	}
	return zap.New(cacheMissCore{n}).Sugar()
}

func (n *newModified) cacheMiss(path string) {
	n.mu.Lock()
	n.missed[path] = struct{}{}
	n.mu.Unlock()
}

// hashed counts one file the upload read; kopia calls it from many goroutines.
func (n *newModified) hashed(path string) {
	n.mu.Lock()
	_, known := n.missed[path]
	delete(n.missed, path)
	n.mu.Unlock()
	if known {
		n.modified.Add(1)
	}
}

// cacheMissCore is a zap core that passes only cache-miss entries, so the
// uploader's other debug messages cost a level check and nothing more.
type cacheMissCore struct{ n *newModified }

func (c cacheMissCore) Enabled(l zapcore.Level) bool      { return l == zapcore.DebugLevel }
func (c cacheMissCore) With([]zapcore.Field) zapcore.Core { return c }
func (c cacheMissCore) Sync() error                       { return nil }

func (c cacheMissCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if e.Message == cacheMissMessage {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c cacheMissCore) Write(_ zapcore.Entry, fields []zapcore.Field) error {
	for _, f := range fields {
		if f.Key == cacheMissPathKey && f.Type == zapcore.StringType {
			c.n.cacheMiss(f.String)
		}
	}
	return nil
}
