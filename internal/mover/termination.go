package mover

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/snapflow/snapflow/internal/kopia"
)

// ReportPrefix starts the termination-message line that carries the run's
// Report as JSON.
const ReportPrefix = "snapflow-report: "

// maxMessage is what the mover writes at most: Kubernetes keeps 4 KiB of a
// termination message.
const maxMessage = 4000

// TerminationMessage is what the mover leaves in its pod's termination
// message: the human summary (what `kubectl describe pod` shows), then the
// report. It stays under the 4 KiB Kubernetes keeps by shortening the log
// tail, then the failure message, then the summary, never the report's
// structure. A delete run's finished members are on their own line of the
// summary (FormatDeleted), so only the unfinished ones go into the report.
func TerminationMessage(summary string, r Report) string {
	if r.Failure == nil {
		r.LogTail = ""
	}
	var members []MemberOutcome
	for _, m := range r.Members {
		if !m.Deleted {
			members = append(members, m)
		}
	}
	r.Members = members
	r.Progress = nil // the totals are in the result
	if r.Verified != nil {
		v := *r.Verified
		v.Work = VerifyWork{} // the function has the work spec
		r.Verified = &v
	}
	encode := func() string {
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false) // a successExpr's < and > stay one byte
		_ = enc.Encode(r)
		return ReportPrefix + strings.TrimSuffix(b.String(), "\n")
	}
	line := encode()
	for over := len(summary) + 1 + len(line) - maxMessage; over > 0; over = len(summary) + 1 + len(line) - maxMessage {
		switch {
		case r.LogTail != "":
			r.LogTail = trimFront(r.LogTail, over)
		case len(r.Members) > 0 && len(r.Members[len(r.Members)-1].Message) > 64:
			// Several failed members of a batch: each keeps the start of its reason.
			for i := range r.Members {
				r.Members[i].Message = trimBack(r.Members[i].Message, 64)
			}
		case len(r.Members) > 0:
			r.Members = r.Members[:len(r.Members)-1]
		case r.Failure != nil && len(r.Failure.Message) > 200:
			f := *r.Failure
			f.Message = trimBack(f.Message, max(200, len(f.Message)-over))
			r.Failure = &f
		case r.Verified != nil && len(r.Verified.Message) > 200:
			v := *r.Verified
			v.Message = trimBack(v.Message, max(200, len(v.Message)-over))
			r.Verified = &v
		case r.Restored != nil && len(r.Restored.Message) > 200:
			rr := *r.Restored
			rr.Message = trimBack(rr.Message, max(200, len(rr.Message)-over))
			r.Restored = &rr
		case len(summary) > 0:
			summary = trimBack(summary, max(0, len(summary)-over))
		default:
			// Only a report whose fixed fields alone are over the limit gets
			// here; the function treats a cut one as no report.
			return line[:maxMessage]
		}
		line = encode()
	}
	return summary + "\n" + line
}

func trimFront(s string, n int) string {
	if n+len("…") >= len(s) {
		return ""
	}
	return "…" + s[n+len("…"):]
}

func trimBack(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= len("…") {
		return ""
	}
	return s[:n-len("…")] + "…"
}

// ErrNoReport means a termination message carries no report: the mover
// ended before writing one (killed, out of memory, never started).
var ErrNoReport = errors.New("the mover left no report")

// ExitReported is the mover's exit code after it recorded a failure in its
// report: the Job's pod failure policy fails the Job on it at once, since
// the run's outcome is known and a retry could only replace it.
const ExitReported = 3

// ExitRetryable is the mover's exit code after the repository's storage
// failed: the Job runs another pod, up to the failure policy's
// backoffLimit, and the last pod's report is the run's outcome.
const ExitRetryable = 4

// ExitCode is the code the mover exits with after failing with err. Only
// an unreachable storage is retried: such a run saved nothing, where
// another failure may come after kopia saved a snapshot, which a second
// pod would save again with the first one tracked by nothing.
func ExitCode(err error) int {
	if kopia.ClassOf(err) == kopia.ClassUnreachable {
		return ExitRetryable
	}
	return ExitReported
}

// ReportedFailure says whether a mover exit code goes with a failure it
// recorded in its report.
func ReportedFailure(code int32) bool { return code == ExitReported || code == ExitRetryable }

// ParseReport reads the report of a termination message: its last line,
// which is where the mover writes it (a log tail in its place, after a
// crash, holds none).
func ParseReport(msg string) (*Report, error) {
	lines := strings.Split(strings.TrimRight(msg, "\n"), "\n")
	rest, ok := strings.CutPrefix(lines[len(lines)-1], ReportPrefix)
	if !ok {
		return nil, ErrNoReport
	}
	var r Report
	if err := json.Unmarshal([]byte(rest), &r); err != nil {
		return nil, fmt.Errorf("%w: it is not valid: %w", ErrReportMismatch, err)
	}
	return &r, nil
}

// Failed says whether r reports a failed run: a classified failure or a
// verification that did not pass.
func (r *Report) Failed() bool {
	return r.Failure != nil || (r.Verified != nil && !r.Verified.Passed)
}
