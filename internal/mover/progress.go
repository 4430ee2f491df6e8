package mover

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/internal/kopia"
)

// ProgressPrefix starts the log line that carries a running mover's totals
// as JSON. The mover holds no Kubernetes credentials, so the functions read
// the newest such line from its pod's log into the target's status.
const ProgressPrefix = "snapflow-progress: "

// maxProgressLine bounds what a reader parses: the mover's lines are far
// shorter, and anything longer did not come from it.
const maxProgressLine = 1024

// Progress is one progress line.
type Progress struct {
	// Started is when the mover began the operation, At when it printed this.
	Started time.Time `json:"started"`
	At      time.Time `json:"at"`
	// Files and Bytes were read (a backup) or written (a restore).
	Files int64 `json:"files"`
	Bytes int64 `json:"bytes"`
	// FilesUnchanged and BytesUploaded are a backup's.
	FilesUnchanged int64 `json:"filesUnchanged,omitempty"`
	BytesUploaded  int64 `json:"bytesUploaded,omitempty"`
	Errors         int64 `json:"errors,omitempty"`
	// EstimatedBytes is what the run is expected to move (0: unknown).
	EstimatedBytes int64 `json:"estimatedBytes,omitempty"`
}

// BackupProgress is the line for a backup's running totals.
func BackupProgress(started, at time.Time, p kopia.Progress) Progress {
	return Progress{Started: started, At: at, Files: p.FilesHashed + p.FilesCached, Bytes: p.BytesHashed + p.BytesCached,
		FilesUnchanged: p.FilesCached, BytesUploaded: p.BytesUploaded, Errors: p.Errors, EstimatedBytes: p.EstimatedBytes}
}

// RestoreProgressLine is the line for a restore's running totals.
func RestoreProgressLine(started, at time.Time, st kopia.RestoreStats) Progress {
	return Progress{Started: started, At: at, Files: st.Files, Bytes: st.Bytes, Errors: st.Errors, EstimatedBytes: st.TotalBytes}
}

// String is the log line, without its newline.
func (p Progress) String() string {
	b, _ := json.Marshal(p)
	return ProgressPrefix + string(b)
}

// ProgressRefresh is the least time between two progress writes of one
// run: each write is an update event that every function receives.
const ProgressRefresh = 8 * time.Second

// Replaces says whether p should replace progress observed at old.
func (p Progress) Replaces(old *metav1.Time) bool {
	return old == nil || p.At.Sub(old.Time) >= ProgressRefresh
}

// LastProgress finds the newest well-formed progress line in a log. Only
// lines that start with the prefix count (logs are read without
// timestamps), and a line that does not parse, or whose counts or times
// make no sense (after notAfter among them), is passed over: the log is the
// mover's, but whoever may exec into its pod could print into it too.
func LastProgress(log string, notAfter time.Time) (Progress, bool) {
	var last Progress
	found := false
	for _, line := range strings.Split(log, "\n") {
		if !strings.HasPrefix(line, ProgressPrefix) || len(line) > maxProgressLine {
			continue
		}
		var p Progress
		if err := json.Unmarshal([]byte(line[len(ProgressPrefix):]), &p); err != nil {
			continue
		}
		if p.At.IsZero() || p.Started.IsZero() || p.At.Before(p.Started) || p.At.After(notAfter) ||
			p.Files < 0 || p.Bytes < 0 || p.FilesUnchanged < 0 || p.BytesUploaded < 0 || p.Errors < 0 || p.EstimatedBytes < 0 {
			continue
		}
		if !found || !p.At.Before(last.At) {
			last, found = p, true
		}
	}
	return last, found
}

// maxETA bounds the time left worth showing: beyond it the rate says more.
const maxETA = 30 * 24 * time.Hour

// Rate derives the average rate, share done and time left. A backup's
// estimate is only the previous snapshot's size, so its share is held
// below 100 until the run ends.
func (p Progress) Rate() snapv1.ProgressRate {
	at := metav1.NewTime(p.At)
	r := snapv1.ProgressRate{ObservedAt: &at}
	if secs := p.At.Sub(p.Started).Seconds(); secs >= 1 {
		r.BytesPerSecond = int64(float64(p.Bytes) / secs)
	}
	if p.EstimatedBytes > 0 {
		est := p.EstimatedBytes
		r.EstimatedBytes = &est
		pct := int32(min(99, float64(p.Bytes)*100/float64(est)))
		r.Percent = &pct
		if left := est - p.Bytes; left > 0 && r.BytesPerSecond > 0 {
			if eta := (left + r.BytesPerSecond - 1) / r.BytesPerSecond; eta <= int64(maxETA/time.Second) {
				r.ETASeconds = &eta
			}
		}
	}
	r.Summary = p.summary(r)
	return r
}

func (p Progress) summary(r snapv1.ProgressRate) string {
	s := fmt.Sprintf("%d files, %s", p.Files, humanBytes(p.Bytes))
	if r.EstimatedBytes != nil {
		s += fmt.Sprintf(" of ~%s (%d%%)", humanBytes(*r.EstimatedBytes), *r.Percent)
	}
	if r.BytesPerSecond > 0 {
		s += ", " + humanBytes(r.BytesPerSecond) + "/s"
	}
	if r.ETASeconds != nil {
		s += ", ETA " + (time.Duration(*r.ETASeconds) * time.Second).String()
	}
	return s
}

// SnapshotProgress is a backup's status.progress.
func (p Progress) SnapshotProgress() *snapv1.SnapshotProgress {
	return &snapv1.SnapshotProgress{FilesRead: p.Files, BytesRead: p.Bytes, FilesUnchanged: p.FilesUnchanged,
		BytesUploaded: p.BytesUploaded, Errors: p.Errors, ProgressRate: p.Rate()}
}

// RestoreProgress is a restore's status.progress.
func (p Progress) RestoreProgress() *snapv1.RestoreProgress {
	files, bytes := p.Files, p.Bytes
	return &snapv1.RestoreProgress{FilesRestored: &files, BytesRestored: &bytes, ProgressRate: p.Rate()}
}

// Done is a finished restore's status.progress: everything it restored.
func (p Progress) Done() *snapv1.RestoreProgress {
	if p.EstimatedBytes < p.Bytes {
		p.EstimatedBytes = p.Bytes
	}
	out := p.RestoreProgress()
	hundred := int32(100)
	out.Percent, out.ETASeconds = &hundred, nil
	out.Summary = p.summary(out.ProgressRate)
	return out
}

func humanBytes(n int64) string { return humanize.IBytes(uint64(max(n, 0))) }
