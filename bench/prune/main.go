// Command prune benchmarks the orphan-prune planner (internal/prune through
// execute.BuildPlan and the s3store adapter, as `snapflow prune plan` runs
// it) over a synthetic KubeBlocks BackupRepo bucket of 1,000,000 objects,
// served by an in-process S3 server, side by side with one raw recursive
// ListObjectsV2 pass over the same bucket with the same SDK client set-up.
//
// Every measured phase runs in a child process of this binary (re-executed
// with -phase), and so does the S3 server (-serve), so the driver stays
// small and the rusage max RSS of a phase is that phase's alone. It
// measures: wall time of the plan against the raw pass, the S3 requests the
// plan made by kind against the target (list pages plus one GET per
// manifest), and the plan's peak RSS at 250,000 and 1,000,000 objects with
// the same number of candidates, and at 1,000,000 objects with 4× the
// candidates. Results go into docs/benchmarks.md.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	objects := flag.Int("objects", 1_000_000, "objects in the bucket of the main case")
	candidates := flag.Int("candidates", 2_000, "backup directories (plan candidates) in the main case")
	reps := flag.Int("reps", 3, "repetitions of the main case (median wall time, maximum RSS)")
	write := flag.Bool("write", true, "write the section into docs/benchmarks.md")
	serveFlag := flag.Bool("serve", false, "internal: run the S3 server of one layout")
	phase := flag.String("phase", "", "internal: run one measured phase (raw or plan)")
	endpoint := flag.String("endpoint", "", "internal: S3 server URL")
	now := flag.Int64("now", 0, "internal: plan time, Unix seconds")
	bucketName := flag.String("bucket", "kb-backup-repo", "bucket name")
	profile := flag.String("profile", "", "write CPU and heap profiles of each phase to files with this path prefix")
	flag.Parse()
	p := params{Objects: *objects, Candidates: *candidates, Bucket: *bucketName, Now: time.Unix(*now, 0).UTC()}
	var err error
	switch {
	case *serveFlag:
		err = serve(p)
	case *phase != "":
		err = runPhase(*phase, p, *endpoint, *profile)
	default:
		// Linux carries a parent's RSS high-water mark into the rusage of
		// the child it execs, so the driver keeps its heap small.
		debug.SetGCPercent(20)
		p.Now = time.Now().UTC().Truncate(time.Second)
		err = drive(p, *reps, *write, *profile)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench/prune:", err)
		os.Exit(1)
	}
}

// childArgs are the flags that rebuild layout p in a child.
func childArgs(p params) []string {
	return []string{"-objects", strconv.Itoa(p.Objects), "-candidates", strconv.Itoa(p.Candidates),
		"-bucket", p.Bucket, "-now", strconv.FormatInt(p.Now.Unix(), 10)}
}

type server struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	url   string
}

func startServer(self string, p params) (*server, error) {
	cmd := exec.Command(self, append([]string{"-serve"}, childArgs(p)...)...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		_ = stdin.Close()
		_ = cmd.Wait()
		return nil, fmt.Errorf("start the S3 server: %w", err)
	}
	return &server{cmd: cmd, stdin: stdin, url: strings.TrimSpace(line)}, nil
}

// stop closes the server's stdin, waits for it, and returns its max RSS.
func (s *server) stop() int64 {
	_ = s.stdin.Close()
	_ = s.cmd.Wait()
	return maxRSS(s.cmd)
}

func (s *server) reset() error {
	resp, err := http.Post(s.url+"/-/reset", "text/plain", nil)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

func (s *server) stats() (serverStats, error) {
	var st serverStats
	resp, err := http.Get(s.url + "/-/stats")
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

func maxRSS(cmd *exec.Cmd) int64 {
	if cmd.ProcessState == nil {
		return 0
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		return ru.Maxrss // KiB on Linux
	}
	return 0
}

// run is one measured child: what it reported, its rusage, and what the
// server answered while it ran.
type run struct {
	res   phaseResult
	rssKB int64
	cpu   time.Duration
	srv   serverStats
}

func runChild(self, phase string, p params, s *server, profile string) (run, error) {
	var r run
	if err := s.reset(); err != nil {
		return r, err
	}
	args := append([]string{"-phase", phase, "-endpoint", s.url}, childArgs(p)...)
	if profile != "" {
		args = append(args, "-profile", profile)
	}
	cmd := exec.Command(self, args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return r, fmt.Errorf("%s phase: %w", phase, err)
	}
	if err := json.Unmarshal(out, &r.res); err != nil {
		return r, fmt.Errorf("%s phase output: %w", phase, err)
	}
	r.rssKB = maxRSS(cmd)
	r.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	r.srv, err = s.stats()
	return r, err
}

// caseResult is one layout with its measured runs.
type caseResult struct {
	name        string
	p           params
	l           *layout
	raws, plans []run
	serverRSSKB int64
}

func runCase(self string, c *caseResult, reps int, profile string) (*caseResult, error) {
	p := c.p
	fmt.Printf("%s: %d objects, %d backup directories (candidates), %d manifests to read\n", c.name, p.Objects, c.l.candidates, c.l.manifests)
	s, err := startServer(self, p)
	if err != nil {
		return nil, err
	}
	defer func() { c.serverRSSKB = s.stop() }()
	for rep := range reps {
		order := []string{"raw", "plan"}
		if rep%2 == 1 {
			order = []string{"plan", "raw"}
		}
		for _, ph := range order {
			r, err := runChild(self, ph, p, s, profile)
			if err != nil {
				return nil, err
			}
			if ph == "raw" {
				c.raws = append(c.raws, r)
				fmt.Printf("  raw list  %7.2fs  %5d pages  %8d objects  rss %4.0f MiB (VmHWM %4.0f MiB)\n",
					r.res.Wall.Seconds(), r.srv.listPages(), r.res.Objects, mib(r.rssKB), mib(r.res.PeakKiB))
			} else {
				c.plans = append(c.plans, r)
				fmt.Printf("  plan      %7.2fs  %5d pages  %5d GETs (manifest %d, other %d)  %d other requests  rss %4.0f MiB (VmHWM %4.0f MiB)\n            states %v, expected %v\n",
					r.res.Wall.Seconds(), r.srv.listPages(), r.srv.GetManifest+r.srv.GetOther, r.srv.GetManifest, r.srv.GetOther, r.srv.others(),
					mib(r.rssKB), mib(r.res.PeakKiB), r.res.BackupStates, r.res.ExpectStates)
			}
		}
	}
	return c, nil
}

func mib(kb int64) float64 { return float64(kb) / 1024 }

func medianWall(rs []run) time.Duration {
	w := make([]time.Duration, len(rs))
	for i, r := range rs {
		w[i] = r.res.Wall
	}
	sort.Slice(w, func(i, j int) bool { return w[i] < w[j] })
	return w[len(w)/2]
}

func peakRSS(rs []run) int64 {
	var m int64
	for _, r := range rs {
		m = max(m, r.rssKB)
	}
	return m
}

// targetPages is the fewest list pages the planner's listing plan needs for
// this layout: the bucket top level with a delimiter, each fully scanned root
// recursively, and the two delimiter levels of each historical root.
func targetPages(l *layout) (pages int, detail string) {
	b := l.bucket
	top := b.pages("", true, maxKeys)
	full, shallow := 0, 0
	for _, r := range l.roots {
		if r.fully {
			full += b.pages(r.name+"/", false, maxKeys)
		}
		if r.shallow {
			shallow += b.pages(r.name+"/", true, maxKeys)
			for _, ns := range subdirs(b, r.name+"/") {
				shallow += b.pages(r.name+"/"+ns+"/", true, maxKeys)
			}
		}
	}
	return top + full + shallow, fmt.Sprintf("%d top level + %d recursive + %d shallow", top, full, shallow)
}

func subdirs(b *bucket, prefix string) []string {
	var out []string
	i := b.lowerBound(0, prefix)
	for {
		next, _, more := b.page(prefix, true, i, maxKeys, func(int, []byte) {}, func(cp string) {
			out = append(out, strings.TrimSuffix(strings.TrimPrefix(cp, prefix), "/"))
		})
		if !more {
			return out
		}
		i = next
	}
}

func drive(p params, reps int, write bool, profile string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if reps < 1 {
		reps = 1
	}
	quarter, many := p, p
	quarter.Objects = p.Objects / 4
	many.Candidates = 4 * p.Candidates
	// Every layout is built before the first child starts, so the driver's
	// high-water mark (which each child's rusage inherits) is already at
	// its final value for all of them.
	cases := []*caseResult{{name: "main", p: p}, {name: "quarter objects", p: quarter}, {name: "4x candidates", p: many}}
	for _, c := range cases {
		c.l = buildLayout(c.p, false)
	}
	runtime.GC()
	base, err := runCase(self, cases[0], reps, profile)
	if err != nil {
		return err
	}
	small, err := runCase(self, cases[1], 1, "")
	if err != nil {
		return err
	}
	more, err := runCase(self, cases[2], 1, "")
	if err != nil {
		return err
	}
	body := render(base, small, more, vmHWM())
	fmt.Print("\n" + body)
	if !write {
		return nil
	}
	return writeSection(body)
}

func num(n int64) string {
	s := strconv.FormatInt(n, 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
