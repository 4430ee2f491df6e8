package cli

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
)

func TestStatusLine(t *testing.T) {
	var log bytes.Buffer
	s := newStatusLine(&log) // not a terminal: a line per change
	s.print("Restoring: 3 files", 40)
	s.print("Completed", -1)
	s.done()
	if !regexp.MustCompile(`^\[\d\d:\d\d:\d\d\] Restoring: 3 files\n\[\d\d:\d\d:\d\d\] Completed\n$`).MatchString(log.String()) {
		t.Errorf("log output %q", log.String())
	}

	var tty bytes.Buffer
	s = &statusLine{w: &tty, tty: true} // a terminal: one line rewritten, with a bar
	s.print("Restoring: 3 files", 40)
	s.print("Completed", -1)
	s.done()
	got := tty.String()
	if strings.Count(got, "\n") != 1 || strings.Count(got, "\r\033[K") != 2 || !strings.Contains(got, "[########............] ") {
		t.Errorf("terminal output %q", got)
	}
	for p, want := range map[int32]string{-5: "[....................]", 0: "[....................]", 99: "[###################.]", 100: "[####################]", 250: "[####################]"} {
		if got := bar(p); got != want {
			t.Errorf("bar(%d) = %s, want %s", p, got, want)
		}
	}
}
