package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/term"
)

// statusLine prints what a follow loop sees. On a terminal it rewrites one
// line in place, with a bar when the share done is known; elsewhere (CI
// logs, pipes) it appends a timestamped line per change, which reads well
// in a log.
type statusLine struct {
	w       io.Writer
	tty     bool
	written bool
}

func newStatusLine(w io.Writer) *statusLine {
	f, ok := w.(*os.File)
	return &statusLine{w: w, tty: ok && term.IsTerminal(int(f.Fd()))}
}

// print shows line; percent is the share done, or negative when unknown.
func (s *statusLine) print(line string, percent int32) {
	stamp := "[" + time.Now().Format("15:04:05") + "] "
	if !s.tty {
		fmt.Fprintln(s.w, stamp+line)
		return
	}
	if percent >= 0 {
		line = bar(percent) + " " + line
	}
	fmt.Fprint(s.w, "\r\033[K"+stamp+line)
	s.written = true
}

// done ends the line a terminal was rewriting.
func (s *statusLine) done() {
	if s.tty && s.written {
		fmt.Fprintln(s.w)
		s.written = false
	}
}

// bar draws percent in twenty cells.
func bar(percent int32) string {
	n := int(min(max(percent, 0), 100)) / 5
	return "[" + strings.Repeat("#", n) + strings.Repeat(".", 20-n) + "]"
}
