package mover

import (
	"strings"
	"testing"
	"time"

	"github.com/snapflow/snapflow/internal/kopia"
)

func TestLastProgress(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 1, 0, 0, 0, time.UTC)
	line := func(at time.Duration, bytes int64) string {
		return Progress{Started: t0, At: t0.Add(at), Files: 3, Bytes: bytes}.String()
	}
	now := t0.Add(time.Hour + time.Minute) // the reader's clock plus a minute of skew
	for _, tc := range []struct {
		name      string
		log       string
		wantBytes int64
		wantFound bool
	}{
		{"no line", "mover: snapshot for Snapshot a/b\n", 0, false},
		{"the newest wins", line(2*time.Second, 10) + "\nmover: noise\n" + line(4*time.Second, 40) + "\n", 40, true},
		{"the newest by time, not by place", line(4*time.Second, 40) + "\n" + line(2*time.Second, 10) + "\n", 40, true},
		{"a prefix inside a line (an echoed file name) is not a line of the mover's", "mover: cannot read " + line(4*time.Second, 40) + "\n", 0, false},
		{"a minute's skew is allowed, more is not", line(time.Hour+59*time.Second, 59) + "\n" + line(time.Hour+61*time.Second, 61) + "\n", 59, true},
		{"garbage after the prefix", ProgressPrefix + "{not json\n" + line(2*time.Second, 10), 10, true},
		{"a line dated after now is forged", line(2*time.Second, 10) + "\n" + line(48*time.Hour, 1<<40) + "\n", 10, true},
		{"a line before its own start", ProgressPrefix + `{"started":"2026-12-06T01:00:00Z","at":"2026-12-06T00:00:00Z","files":1,"bytes":1}`, 0, false},
		{"negative counts", ProgressPrefix + `{"started":"2026-12-06T01:00:00Z","at":"2026-12-06T01:00:01Z","files":-1,"bytes":1}`, 0, false},
		{"negative uploads", ProgressPrefix + `{"started":"2026-12-06T01:00:00Z","at":"2026-12-06T01:00:01Z","files":1,"bytes":1,"bytesUploaded":-5}`, 0, false},
		{"an overlong line", ProgressPrefix + `{"started":"2026-12-06T01:00:00Z","at":"2026-12-06T01:00:01Z","files":1,"bytes":7,"x":"` + strings.Repeat("a", 2000) + `"}`, 0, false},
		{"an unterminated last line", line(2*time.Second, 10) + "\n" + line(3*time.Second, 30), 30, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := LastProgress(tc.log, now)
			if ok != tc.wantFound || got.Bytes != tc.wantBytes {
				t.Fatalf("LastProgress = %+v, %v; want bytes %d, found %v", got, ok, tc.wantBytes, tc.wantFound)
			}
		})
	}
}

func TestProgressRate(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 1, 0, 0, 0, time.UTC)
	mib := int64(1 << 20)
	for _, tc := range []struct {
		name               string
		p                  Progress
		wantRate           int64
		wantPercent        int32 // -1: none
		wantETA            int64 // -1: none
		wantSummaryContain string
	}{
		{"half way", Progress{Started: t0, At: t0.Add(10 * time.Second), Files: 5, Bytes: 10 * mib, EstimatedBytes: 20 * mib},
			mib, 50, 10, "5 files, 10 MiB of ~20 MiB (50%), 1.0 MiB/s, ETA 10s"},
		{"no estimate", Progress{Started: t0, At: t0.Add(4 * time.Second), Files: 2, Bytes: 8 * mib},
			2 * mib, -1, -1, "2 files, 8.0 MiB, 2.0 MiB/s"},
		{"past the estimate stays below 100", Progress{Started: t0, At: t0.Add(10 * time.Second), Bytes: 30 * mib, EstimatedBytes: 20 * mib},
			3 * mib, 99, -1, "(99%)"},
		{"forged huge counts stay in range", Progress{Started: t0, At: t0.Add(time.Second), Bytes: 1 << 62, EstimatedBytes: 3},
			1 << 62, 99, -1, "(99%)"},
		{"a stalled start shows no ETA of centuries", Progress{Started: t0, At: t0.Add(100 * time.Second), Bytes: 100, EstimatedBytes: 1 << 40},
			1, 0, -1, "1 B/s"},
		{"under a second has no rate", Progress{Started: t0, At: t0.Add(500 * time.Millisecond), Bytes: mib, EstimatedBytes: 2 * mib},
			0, 50, -1, "1.0 MiB of ~2.0 MiB (50%)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.p.Rate()
			if r.BytesPerSecond != tc.wantRate {
				t.Errorf("rate %d, want %d", r.BytesPerSecond, tc.wantRate)
			}
			if (r.Percent == nil) != (tc.wantPercent < 0) || r.Percent != nil && *r.Percent != tc.wantPercent {
				t.Errorf("percent %v, want %d", r.Percent, tc.wantPercent)
			}
			if (r.ETASeconds == nil) != (tc.wantETA < 0) || r.ETASeconds != nil && *r.ETASeconds != tc.wantETA {
				t.Errorf("eta %v, want %d", r.ETASeconds, tc.wantETA)
			}
			if !strings.Contains(r.Summary, tc.wantSummaryContain) {
				t.Errorf("summary %q, want it to contain %q", r.Summary, tc.wantSummaryContain)
			}
			if r.ObservedAt == nil || !r.ObservedAt.Time.Equal(tc.p.At) {
				t.Errorf("observedAt %v, want %v", r.ObservedAt, tc.p.At)
			}
		})
	}
}

func TestProgressLines(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 1, 0, 0, 0, time.UTC)
	b := BackupProgress(t0, t0.Add(time.Second), kopia.Progress{FilesHashed: 2, FilesCached: 3, BytesHashed: 20, BytesCached: 30, BytesUploaded: 7, Errors: 1, EstimatedBytes: 100})
	got, ok := LastProgress(b.String()+"\n", t0.Add(time.Hour))
	if !ok || got != b {
		t.Fatalf("a backup line does not read back: %+v %v, want %+v", got, ok, b)
	}
	sp := got.SnapshotProgress()
	if sp.FilesRead != 5 || sp.BytesRead != 50 || sp.FilesUnchanged != 3 || sp.BytesUploaded != 7 || sp.Errors != 1 || *sp.Percent != 50 {
		t.Fatalf("snapshot progress %+v", sp)
	}
	done := RestoreProgressLine(t0, t0.Add(2*time.Second), kopia.RestoreStats{Files: 4, Bytes: 40, TotalBytes: 40}).Done()
	if *done.FilesRestored != 4 || *done.BytesRestored != 40 || *done.Percent != 100 || done.ETASeconds != nil || !strings.Contains(done.Summary, "(100%)") {
		t.Fatalf("finished restore progress %+v", done)
	}
}
