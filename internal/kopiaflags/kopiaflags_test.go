package kopiaflags

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	yes, no := true, false
	tests := []struct {
		args    []string
		want    Options
		errAt   int
		errText string
	}{
		{args: nil},
		{args: []string{"--parallel=4", "--force-hash", "12.5"}, want: Options{ParallelUploads: 4, ForceHashPercentage: 12.5}},
		{args: []string{"--checkpoint-interval=10m", "--fail-fast", "--upload-limit-mb=20"}, want: Options{CheckpointInterval: 10 * time.Minute, FailFast: &yes, UploadLimitMB: 20}},
		{args: []string{"--fail-fast=false"}, want: Options{FailFast: &no}},
		{args: []string{"--parallel=2", "--compression=zstd"}, errAt: 1, errText: `"--compression=zstd" is not a kopia flag snapflow supports; supported: --parallel=<N, 1 to 1024>, --force-hash`},
		{args: []string{"--tags=a:b"}, errText: "--tags is decided by snapflow"},
		{args: []string{"--parallel=0"}, errText: "--parallel wants a whole number from 1 to 1024"},
		{args: []string{"--force-hash=101"}, errText: "--force-hash wants a percentage from 0 to 100"},
		{args: []string{"--checkpoint-interval=2h"}, errText: "from 1m to 45m"},
		{args: []string{"--parallel"}, errText: "--parallel needs a value (N, 1 to 1024)"},
		{args: []string{"--parallel", "--fail-fast"}, errText: "--parallel needs a value"},
		{args: []string{"--fail-fast", "--parallel=1", "--fail-fast"}, errAt: 2, errText: "--fail-fast is given twice"},
		{args: []string{"parallel=1"}, errText: "is not a kopia flag"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			got, err := Parse(tc.args)
			if tc.errText == "" {
				if err != nil {
					t.Fatal(err)
				}
				if got.ParallelUploads != tc.want.ParallelUploads || got.ForceHashPercentage != tc.want.ForceHashPercentage ||
					got.CheckpointInterval != tc.want.CheckpointInterval || got.UploadLimitMB != tc.want.UploadLimitMB ||
					(got.FailFast == nil) != (tc.want.FailFast == nil) || (got.FailFast != nil && *got.FailFast != *tc.want.FailFast) {
					t.Fatalf("options %+v, want %+v", got, tc.want)
				}
				return
			}
			var fe *Error
			if !errors.As(err, &fe) || fe.Index != tc.errAt || !strings.Contains(err.Error(), tc.errText) {
				t.Fatalf("error %v (index %v), want %q at index %d", err, fe, tc.errText, tc.errAt)
			}
		})
	}
}

// Every supported flag is documented for users, with what it sets.
func TestEveryFlagIsDocumented(t *testing.T) {
	doc := readDoc(t)
	for _, f := range Supported {
		if !strings.Contains(doc, "`"+f.Flag+"`") {
			t.Errorf("docs/extra-args.md does not list %s", f.Flag)
		}
	}
	for f := range refused {
		if !strings.Contains(doc, "`"+f+"`") {
			t.Errorf("docs/extra-args.md does not list the refused %s", f)
		}
	}
}

func readDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "extra-args.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestNeverCompress(t *testing.T) {
	for _, tc := range []struct {
		in      []string
		want    []string
		wantErr string
	}{
		{in: nil, want: []string{}},
		{in: []string{"*.zip", "*.gz", ".mp4", "*.gz"}, want: []string{".gz", ".mp4", ".zip"}},
		{in: []string{"*.tar.gz"}, wantErr: `entry 0 ("*.tar.gz")`},
		{in: []string{"*.gz", "videos/*"}, wantErr: `entry 1 ("videos/*")`},
		// What kopia can match still counts beside what it cannot.
		{in: []string{".zip", "videos/*", "*.gz", "*.tar.gz"}, want: []string{".gz", ".zip"}, wantErr: `entry 1 ("videos/*")`},
		{in: []string{"gz"}, wantErr: "one extension"},
		{in: []string{"*."}, wantErr: "one extension"},
		{in: []string{"*.g?"}, wantErr: "one extension"},
	} {
		got, err := NeverCompress(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("NeverCompress(%q) error %v, want one with %q", tc.in, err, tc.wantErr)
			}
			if tc.want == nil {
				continue
			}
		} else if err != nil {
			t.Errorf("NeverCompress(%q): %v", tc.in, err)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("NeverCompress(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestCompressor(t *testing.T) {
	for _, ok := range []string{"", "none", "zstd", "s2-default", "gzip"} {
		if err := Compressor(ok); err != nil {
			t.Errorf("Compressor(%q): %v", ok, err)
		}
	}
	if err := Compressor("zstdd"); err == nil || !strings.Contains(err.Error(), "zstd") {
		t.Errorf("Compressor(zstdd) = %v, want an error listing the known ones", err)
	}
}
