package mover

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
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
	encode := func() string {
		b, _ := json.Marshal(r)
		return ReportPrefix + string(b)
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
		case len(summary) > 0:
			summary = trimBack(summary, max(0, len(summary)-over))
		default:
			return line[:maxMessage] // cannot happen with the fields a run fills
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

// ParseReport reads the report line of a termination message.
func ParseReport(msg string) (*Report, error) {
	for _, line := range strings.Split(msg, "\n") {
		rest, ok := strings.CutPrefix(line, ReportPrefix)
		if !ok {
			continue
		}
		var r Report
		if err := json.Unmarshal([]byte(rest), &r); err != nil {
			return nil, fmt.Errorf("the mover's report is not valid: %w", err)
		}
		return &r, nil
	}
	return nil, ErrNoReport
}
