// Package proc runs a benchmark peer as a child process and measures it:
// wall time, CPU time and peak resident memory from the kernel's rusage.
package proc

import (
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"syscall"
	"time"
)

// Measure is one timed run.
type Measure struct {
	Wall  time.Duration
	CPU   time.Duration
	RSSMB float64
}

// Timed runs cmd and returns its wall time, CPU time and peak RSS.
func Timed(cmd *exec.Cmd) (Measure, error) {
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	if err != nil {
		return Measure{}, fmt.Errorf("%s: %w\n%s", strings.Join(cmd.Args, " "), err, Tail(out.String()))
	}
	m := Measure{Wall: wall, CPU: cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()}
	if ru, _ := cmd.ProcessState.SysUsage().(*syscall.Rusage); ru != nil {
		m.RSSMB = float64(ru.Maxrss) / 1024
	}
	return m, nil
}

// Median is the run with the median wall time, carrying the peak RSS of all runs.
func Median(ms []Measure) Measure {
	w := append([]Measure(nil), ms...)
	sort.Slice(w, func(i, j int) bool { return w[i].Wall < w[j].Wall })
	med := w[len(w)/2]
	for _, m := range ms {
		med.RSSMB = max(med.RSSMB, m.RSSMB)
	}
	return med
}

// PairedRatio is the median over runs of num[i]'s wall time divided by
// den[i]'s, where each pair ran back to back: a slow spell of the machine
// then moves both sides of a pair alike. Even counts average the middle two.
func PairedRatio(num, den []Measure) float64 {
	return quantile(PairedRatios(num, den), 0.5)
}

// PairedRatios are the per-pair wall-time ratios num[i]/den[i], sorted.
func PairedRatios(num, den []Measure) []float64 {
	var ratios []float64
	for i := range min(len(num), len(den)) {
		if den[i].Wall > 0 {
			ratios = append(ratios, num[i].Wall.Seconds()/den[i].Wall.Seconds())
		}
	}
	sort.Float64s(ratios)
	return ratios
}

// Spread describes sorted paired ratios: the middle half of them, and how
// many are below 1 (the numerator's tool was faster in that pair).
func Spread(sorted []float64) string {
	if len(sorted) == 0 {
		return "no pairs"
	}
	faster := sort.SearchFloat64s(sorted, 1)
	return fmt.Sprintf("%d pairs: median %.3f, middle half %.2f–%.2f, faster in %d",
		len(sorted), quantile(sorted, 0.5), quantile(sorted, 0.25), quantile(sorted, 0.75), faster)
}

// quantile interpolates linearly between the closest ranks of sorted.
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	pos := q * float64(len(sorted)-1)
	lo := int(pos)
	if lo+1 >= len(sorted) {
		return sorted[lo]
	}
	return sorted[lo] + (pos-float64(lo))*(sorted[lo+1]-sorted[lo])
}

// Tail keeps the end of a long output for an error message.
func Tail(s string) string {
	if len(s) > 2000 {
		return s[len(s)-2000:]
	}
	return s
}
