// Package report writes one benchmark's section of docs/benchmarks.md,
// between markers named after the benchmark, leaving the others alone.
package report

import (
	"fmt"
	"os"
	"strings"
)

const header = "# Benchmarks\n\nMeasured on this project's CI machine class (2 cores). Each section is rewritten by the command it names; peers run side by side in one run and are compared as ratios.\n\n"

// WriteSection replaces (or appends) the section of bench name in path.
func WriteSection(path, name, body string) error {
	begin, end := fmt.Sprintf("<!-- bench:%s:begin -->", name), fmt.Sprintf("<!-- bench:%s:end -->", name)
	section := begin + "\n" + strings.TrimSpace(body) + "\n" + end + "\n"
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	doc := string(old)
	if doc == "" {
		doc = header
	}
	if i, j := strings.Index(doc, begin), strings.Index(doc, end); i >= 0 && j > i {
		doc = doc[:i] + section + strings.TrimLeft(doc[j+len(end):], "\n")
	} else {
		doc = strings.TrimRight(doc, "\n") + "\n\n" + section
	}
	return os.WriteFile(path, []byte(doc), 0o644)
}

// Verdict renders whether a target was met.
func Verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "**not met**"
}
