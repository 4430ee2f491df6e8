package mover

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/snapflow/snapflow/internal/kopia"
)

// Only an unreachable storage exits so the Job tries again; the rest end
// the Job with their report.
func TestExitCode(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"the storage is unreachable", &kopia.Error{Class: kopia.ClassUnreachable, Err: errors.New("connection refused")}, ExitRetryable},
		{"interrupted", fmt.Errorf("upload: %w", context.Canceled), ExitReported},
		{"anything else, which may come after kopia saved", errors.New("write the report"), ExitReported},
		{"a partial snapshot", &kopia.Error{Class: kopia.ClassPartial, Err: errors.New("1 file(s) could not be read")}, ExitReported},
		{"a wrong password", &kopia.Error{Class: kopia.ClassWrongPassword, Err: errors.New("invalid repository password")}, ExitReported},
		{"the upload limit", &kopia.Error{Class: kopia.ClassUploadLimit, Err: errors.New("stopped")}, ExitReported},
	}
	for _, tc := range tests {
		if got := ExitCode(tc.err); got != tc.want {
			t.Errorf("%s: ExitCode = %d, want %d", tc.name, got, tc.want)
		}
		if !ReportedFailure(int32(ExitCode(tc.err))) {
			t.Errorf("%s: exit %d is not read as a reported failure", tc.name, ExitCode(tc.err))
		}
	}
}
