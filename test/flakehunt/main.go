// Command flakehunt runs a test package several times in a row, one of
// the runs next to a CPU-burning neighbour, and reports how often each test
// passed: a test that does not pass every run is a flake to fix, and the
// loaded run shows which waits depend on an idle machine.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

type options struct {
	runs      int
	loadedRun int
	burners   int
	pkg       string
	run       string
	timeout   time.Duration
	out       string
}

func main() {
	var o options
	var burn time.Duration
	flag.IntVar(&o.runs, "n", 5, "how many runs in a row")
	flag.IntVar(&o.loadedRun, "loaded", 0, "which run (1-based) has the CPU neighbour; 0 is the last, -1 none")
	flag.IntVar(&o.burners, "burners", runtime.NumCPU(), "busy processes of the neighbour (one per core keeps every core contended)")
	flag.StringVar(&o.pkg, "pkg", "./test/e2e/", "the package to run")
	flag.StringVar(&o.run, "run", "", "go test -run pattern (default: every test)")
	flag.DurationVar(&o.timeout, "timeout", 60*time.Minute, "go test -timeout of each run")
	flag.StringVar(&o.out, "o", "", "also write the report (markdown) to this file")
	flag.DurationVar(&burn, "burn", 0, "internal: be the CPU neighbour for this long")
	flag.Parse()
	if burn > 0 {
		burnCPU(burn)
		return
	}
	if o.loadedRun == 0 {
		o.loadedRun = o.runs
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	rep, err := hunt(ctx, o)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "flakehunt:", err)
		os.Exit(2)
	}
	text := rep.markdown()
	fmt.Print(text)
	if o.out != "" {
		if err := os.WriteFile(o.out, []byte(text), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "flakehunt:", err)
			os.Exit(2)
		}
	}
	if !rep.allPassed() {
		os.Exit(1)
	}
}

// burnCPU keeps one core busy until d has passed: the neighbour ends on
// its own even if the hunt that started it is killed.
func burnCPU(d time.Duration) {
	runtime.GOMAXPROCS(1)
	end := time.Now().Add(d)
	x := 1
	for time.Now().Before(end) {
		for range 1 << 16 {
			x = x*31 + 7
		}
	}
	_ = x
}

type run struct {
	loaded  bool
	elapsed time.Duration
	passed  map[string]bool // test name -> passed; absent: did not finish
	failed  bool            // go test exited non-zero
}

type report struct {
	opts options
	runs []run
}

func hunt(ctx context.Context, o options) (*report, error) {
	rep := &report{opts: o}
	for i := 1; i <= o.runs; i++ {
		loaded := i == o.loadedRun
		fmt.Fprintf(os.Stderr, "flakehunt: run %d of %d%s\n", i, o.runs, map[bool]string{true: " (with a CPU neighbour)"}[loaded])
		var neighbours []*exec.Cmd
		if loaded {
			self, err := os.Executable()
			if err != nil {
				return nil, err
			}
			for range o.burners {
				c := exec.Command(self, "-burn", o.timeout.String())
				if err := c.Start(); err != nil {
					return nil, fmt.Errorf("start the CPU neighbour: %w", err)
				}
				neighbours = append(neighbours, c)
			}
		}
		r, err := once(ctx, o)
		for _, c := range neighbours {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
		if err != nil {
			return nil, err
		}
		r.loaded = loaded
		rep.runs = append(rep.runs, r)
		if ctx.Err() != nil {
			break
		}
	}
	return rep, nil
}

// once runs go test -json and keeps each top-level test's outcome; its
// output goes on to stderr so a long run shows progress.
func once(ctx context.Context, o options) (run, error) {
	args := []string{"test", "-count=1", "-json", "-timeout", o.timeout.String()}
	if o.run != "" {
		args = append(args, "-run", o.run)
	}
	cmd := exec.CommandContext(ctx, "go", append(args, o.pkg)...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return run{}, err
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return run{}, fmt.Errorf("go test: %w", err)
	}
	passed := parse(stdout, os.Stderr)
	err = cmd.Wait()
	r := run{elapsed: time.Since(start), passed: passed, failed: err != nil}
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		return r, fmt.Errorf("go test: %w", err)
	}
	return r, nil
}

type testEvent struct {
	Action string
	Test   string
	Output string
}

// parse reads go test -json events, echoes the output, and returns the
// outcome of each top-level test (subtests count with their parent).
func parse(r io.Reader, echo io.Writer) map[string]bool {
	out := map[string]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e testEvent
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			fmt.Fprintln(echo, sc.Text())
			continue
		}
		if e.Action == "output" {
			fmt.Fprint(echo, e.Output)
			continue
		}
		if e.Test == "" || strings.Contains(e.Test, "/") {
			continue
		}
		switch e.Action {
		case "pass", "skip":
			out[e.Test] = true
		case "fail":
			out[e.Test] = false
		}
	}
	return out
}

func (r *report) allPassed() bool {
	for _, x := range r.runs {
		if x.failed {
			return false
		}
	}
	return len(r.runs) == r.opts.runs
}

func (r *report) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "flake hunt of %s: %d runs in a row on %d cores, Go %s", r.opts.pkg, len(r.runs), runtime.NumCPU(), runtime.Version())
	if r.opts.run != "" {
		fmt.Fprintf(&b, ", -run %q", r.opts.run)
	}
	b.WriteString("\n\n| run | CPU neighbour | wall time | result |\n|---|---|---|---|\n")
	names := map[string]bool{}
	for i, x := range r.runs {
		res := "pass"
		if x.failed {
			res = "FAIL"
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %s |\n", i+1, map[bool]string{true: fmt.Sprintf("%d busy processes", r.opts.burners), false: "none"}[x.loaded], x.elapsed.Round(time.Second), res)
		for n := range x.passed {
			names[n] = true
		}
	}
	b.WriteString("\n")
	tw := tabwriter.NewWriter(&b, 0, 4, 1, ' ', 0)
	fmt.Fprintln(tw, "| test\t| passed\t|")
	fmt.Fprintln(tw, "|---\t|---\t|")
	for _, n := range slices.Sorted(maps.Keys(names)) {
		p := 0
		for _, x := range r.runs {
			if x.passed[n] {
				p++
			}
		}
		mark := ""
		if p < len(r.runs) {
			mark = " FLAKY"
		}
		fmt.Fprintf(tw, "| %s\t| %d/%d%s\t|\n", n, p, len(r.runs), mark)
	}
	_ = tw.Flush()
	return b.String()
}
