// Command backup measures backup time and peak memory of snapflow's mover
// against the kopia CLI of the same version and restic, side by side in one
// run, into fresh local filesystem repositories:
//
//	(a) 1 GiB in 10,000 files of 100 KiB
//	(b) 1 GiB in 4 files of 256 MiB
//	(c) dataset (a) again with 1% of its files rewritten (incremental)
//
// The mover runs as the real `snapflow mover` binary with a work spec, as a
// Job would run it, reporting to a file instead of an API server. Results go
// into docs/benchmarks.md as ratios to the kopia CLI.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/snapflow/snapflow/bench/internal/report"
	"github.com/snapflow/snapflow/internal/kopia"
	"github.com/snapflow/snapflow/internal/mover"
)

const password = "benchmark-password"

type measure struct {
	wall  time.Duration
	cpu   time.Duration
	rssMB float64
}

type tool interface {
	name() string
	// init creates an empty repository (not timed).
	init(repo string) error
	// backup snapshots dir (timed).
	backup(repo, dir string) (measure, error)
}

func main() {
	bin := flag.String("bin", "bin", "directory holding snapflow and kopia")
	work := flag.String("work", "", "scratch directory (default: a temp dir; needs about 6 GiB)")
	reps := flag.Int("reps", 3, "repetitions per case (the median is reported)")
	gen := flag.String("generate", "", "internal: write the datasets into this directory and exit")
	flag.Parse()
	if *gen != "" {
		// In a child process, so the parent's memory high-water mark (which
		// forked children inherit in their rusage) stays small.
		if err := generate(filepath.Join(*gen, "data-small"), 10_000, 100<<10, 1); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if err := generate(filepath.Join(*gen, "data-large"), 4, 256<<20, 2); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	if err := run(*bin, *work, *reps); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(bin, work string, reps int) error {
	binAbs, _ := filepath.Abs(bin)
	if work == "" {
		d, err := os.MkdirTemp("", "snapflow-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		work = d
	}
	restic, err := exec.LookPath("restic")
	if err != nil {
		return fmt.Errorf("restic is not installed (apt-get install restic): %w", err)
	}
	tools := []tool{
		&snapflowMover{bin: filepath.Join(binAbs, "snapflow"), work: work},
		&kopiaCLI{bin: filepath.Join(binAbs, "kopia"), work: work},
		&resticCLI{bin: restic},
	}
	for _, t := range tools[:2] {
		if _, err := os.Stat(t.(interface{ path() string }).path()); err != nil {
			return fmt.Errorf("%s: %w (run make build and bash hack/tools.sh kopia)", t.name(), err)
		}
	}
	small, large := filepath.Join(work, "data-small"), filepath.Join(work, "data-large")
	fmt.Println("generating 1 GiB in 10,000 files and 1 GiB in 4 files…")
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if out, err := exec.Command(self, "-generate", work).CombinedOutput(); err != nil {
		return fmt.Errorf("generate: %w: %s", err, out)
	}
	_ = exec.Command("sync").Run()
	cases := []string{"(a) 10,000 × 100 KiB", "(b) 4 × 256 MiB", "(c) (a) with 1% changed"}
	results := map[string]map[string][]measure{}
	for _, c := range cases {
		results[c] = map[string][]measure{}
	}
	for rep := 0; rep < reps; rep++ {
		// Rotate the order so no tool always runs with the coldest page cache.
		order := append(tools[rep%len(tools):], tools[:rep%len(tools)]...)
		for _, t := range order {
			repoA := filepath.Join(work, fmt.Sprintf("repo-%s-a-%d", t.name(), rep))
			repoB := filepath.Join(work, fmt.Sprintf("repo-%s-b-%d", t.name(), rep))
			for _, r := range []string{repoA, repoB} {
				if err := t.init(r); err != nil {
					return fmt.Errorf("%s init: %w", t.name(), err)
				}
			}
			m, err := t.backup(repoA, small)
			if err != nil {
				return fmt.Errorf("%s (a): %w", t.name(), err)
			}
			results[cases[0]][t.name()] = append(results[cases[0]][t.name()], m)
			fmt.Printf("  %-9s (a) %6.2fs wall %6.2fs cpu %4.0f MiB\n", t.name(), m.wall.Seconds(), m.cpu.Seconds(), m.rssMB)
			if err := change(small, 100, uint64(rep)+10); err != nil {
				return err
			}
			m, err = t.backup(repoA, small)
			if err != nil {
				return fmt.Errorf("%s (c): %w", t.name(), err)
			}
			results[cases[2]][t.name()] = append(results[cases[2]][t.name()], m)
			fmt.Printf("  %-9s (c) %6.2fs wall %6.2fs cpu %4.0f MiB\n", t.name(), m.wall.Seconds(), m.cpu.Seconds(), m.rssMB)
			m, err = t.backup(repoB, large)
			if err != nil {
				return fmt.Errorf("%s (b): %w", t.name(), err)
			}
			results[cases[1]][t.name()] = append(results[cases[1]][t.name()], m)
			fmt.Printf("  %-9s (b) %6.2fs wall %6.2fs cpu %4.0f MiB\n", t.name(), m.wall.Seconds(), m.cpu.Seconds(), m.rssMB)
			for _, r := range []string{repoA, repoB} {
				_ = os.RemoveAll(r)
			}
			fmt.Printf("rep %d %-14s done\n", rep+1, t.name())
		}
	}
	return write(cases, tools, results, reps)
}

func median(ms []measure) measure {
	w := make([]measure, len(ms))
	copy(w, ms)
	sort.Slice(w, func(i, j int) bool { return w[i].wall < w[j].wall })
	med := w[len(w)/2]
	peak := 0.0
	for _, m := range ms {
		peak = max(peak, m.rssMB)
	}
	med.rssMB = peak
	return med
}

func write(cases []string, tools []tool, results map[string]map[string][]measure, reps int) error {
	var b strings.Builder
	fmt.Fprintf(&b, "## Backup throughput and memory\n\n`make bench` (`go run ./bench/backup`) on %s, %d cores, %s; kopia CLI %s built from source, restic from Debian. Fresh filesystem repositories on the same disk, default settings for every tool (kopia: BLAKE2B-256-128, AES256-GCM, dynamic 4 MiB splitter, no compression). snapflow is the real `snapflow mover` binary running a work spec, as a mover Job does. Median wall time of %d runs (tool order rotated per run); peak RSS is the maximum over the runs.\n\n",
		time.Now().UTC().Format("2006-01-02"), runtime.NumCPU(), runtime.Version(), kopiaVersion, reps)
	b.WriteString("| case | snapflow mover | kopia CLI | restic | snapflow / kopia | restic / snapflow |\n|---|---|---|---|---|---|\n")
	var verdicts []string
	for _, c := range cases {
		s, k, r := median(results[c]["snapflow"]), median(results[c]["kopia"]), median(results[c]["restic"])
		fmt.Fprintf(&b, "| %s | %.2f s (cpu %.1f s), %.0f MiB | %.2f s (cpu %.1f s), %.0f MiB | %.2f s (cpu %.1f s), %.0f MiB | %.2f× time, %.2f× memory | %.2f× |\n", c,
			s.wall.Seconds(), s.cpu.Seconds(), s.rssMB, k.wall.Seconds(), k.cpu.Seconds(), k.rssMB, r.wall.Seconds(), r.cpu.Seconds(), r.rssMB,
			s.wall.Seconds()/k.wall.Seconds(), s.rssMB/k.rssMB, r.wall.Seconds()/s.wall.Seconds())
		ok := s.wall.Seconds()/k.wall.Seconds() <= 1.0
		v := fmt.Sprintf("%s: no slower than kopia — %s", c[:3], report.Verdict(ok))
		if c != cases[1] {
			v += fmt.Sprintf("; ≥2× faster than restic — %s", report.Verdict(r.wall.Seconds()/s.wall.Seconds() >= 2))
		}
		verdicts = append(verdicts, v)
	}
	b.WriteString("\nTargets: snapflow no slower than the kopia CLI on every case, and at least 2× faster than restic on (a) and (c).\n\n")
	for _, v := range verdicts {
		b.WriteString("- " + v + "\n")
	}
	fmt.Print(b.String())
	return report.WriteSection("docs/benchmarks.md", "backup", b.String())
}

// generate writes n files of size bytes of incompressible data under dir.
func generate(dir string, n, size int, seed uint64) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	rng := rand.New(rand.NewChaCha8([32]byte{byte(seed)}))
	buf := make([]byte, size)
	for i := 0; i < n; i++ {
		fillRandom(rng, buf)
		sub := filepath.Join(dir, fmt.Sprintf("d%02d", i%100))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%05d.bin", i)), buf, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func fillRandom(rng *rand.Rand, buf []byte) {
	for i := 0; i+8 <= len(buf); i += 8 {
		v := rng.Uint64()
		for k := 0; k < 8; k++ {
			buf[i+k] = byte(v >> (8 * k))
		}
	}
}

// change rewrites n of the 10,000 small files with new content.
func change(dir string, n int, seed uint64) error {
	rng := rand.New(rand.NewChaCha8([32]byte{byte(seed), 1}))
	buf := make([]byte, 100<<10)
	for i := 0; i < n; i++ {
		idx := rng.IntN(10_000)
		fillRandom(rng, buf)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("d%02d", idx%100), fmt.Sprintf("f%05d.bin", idx)), buf, 0o644); err != nil {
			return err
		}
	}
	// Make mtimes strictly newer than the previous snapshot for every tool.
	time.Sleep(10 * time.Millisecond)
	return nil
}

// timed runs cmd and returns its wall time and peak RSS.
func timed(cmd *exec.Cmd) (measure, error) {
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	if err != nil {
		return measure{}, fmt.Errorf("%s: %w\n%s", strings.Join(cmd.Args, " "), err, tail(out.String()))
	}
	ru, _ := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	m := measure{wall: wall}
	if ru != nil {
		m.rssMB = float64(ru.Maxrss) / 1024
	}
	m.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	return m, nil
}

func tail(s string) string {
	if len(s) > 2000 {
		return s[len(s)-2000:]
	}
	return s
}

type snapflowMover struct{ bin, work string }

func (s *snapflowMover) name() string { return "snapflow" }
func (s *snapflowMover) path() string { return s.bin }

func (s *snapflowMover) spec(op, repo string, snap *mover.SnapshotWork) (string, error) {
	w := mover.WorkSpec{Operation: op, Target: mover.Target{Kind: "Repository", Name: "bench"},
		Repository: mover.Repository{Backend: kopia.Backend{Filesystem: &kopia.FilesystemBackend{Path: "/"}}, Create: &kopia.CreateOptions{}}, Snapshot: snap}
	if snap != nil {
		w.Target.Kind = "Snapshot"
	}
	b, err := json.Marshal(w)
	if err != nil {
		return "", err
	}
	p := filepath.Join(s.work, fmt.Sprintf("work-%d.json", time.Now().UnixNano()))
	return p, os.WriteFile(p, b, 0o644)
}

func (s *snapflowMover) run(repo, spec, dir string) *exec.Cmd {
	cmd := exec.Command(s.bin, "mover", "--work", spec, "--repository-root", repo, "--source", dir,
		"--cache-dir", repo+"-cache", "--status-file", spec+".status", "--termination-log", "")
	cmd.Env = append(os.Environ(), "KOPIA_PASSWORD="+password)
	return cmd
}

func (s *snapflowMover) init(repo string) error {
	spec, err := s.spec(mover.OpBootstrap, repo, nil)
	if err != nil {
		return err
	}
	_, err = timed(s.run(repo, spec, ""))
	return err
}

func (s *snapflowMover) backup(repo, dir string) (measure, error) {
	spec, err := s.spec(mover.OpSnapshot, repo, &mover.SnapshotWork{Source: kopia.Source{Username: "bench", Hostname: "bench", Path: "/data"}})
	if err != nil {
		return measure{}, err
	}
	return timed(s.run(repo, spec, dir))
}

const kopiaVersion = "v0.22.3"

type kopiaCLI struct{ bin, work string }

func (k *kopiaCLI) name() string { return "kopia" }
func (k *kopiaCLI) path() string { return k.bin }

func (k *kopiaCLI) cmd(repo string, args ...string) *exec.Cmd {
	cmd := exec.Command(k.bin, append(args, "--config-file", repo+".config")...)
	cmd.Env = append(os.Environ(), "KOPIA_PASSWORD="+password, "KOPIA_CHECK_FOR_UPDATES=false")
	return cmd
}

func (k *kopiaCLI) init(repo string) error {
	_, err := timed(k.cmd(repo, "repository", "create", "filesystem", "--path", repo, "--cache-directory", repo+"-cache"))
	return err
}

func (k *kopiaCLI) backup(repo, dir string) (measure, error) {
	return timed(k.cmd(repo, "snapshot", "create", dir, "--no-progress"))
}

type resticCLI struct{ bin string }

func (r *resticCLI) name() string { return "restic" }

func (r *resticCLI) cmd(repo string, args ...string) *exec.Cmd {
	cmd := exec.Command(r.bin, append([]string{"--repo", repo, "--cache-dir", repo + "-cache", "--quiet"}, args...)...)
	cmd.Env = append(os.Environ(), "RESTIC_PASSWORD="+password)
	return cmd
}

func (r *resticCLI) init(repo string) error {
	_, err := timed(r.cmd(repo, "init"))
	return err
}

func (r *resticCLI) backup(repo, dir string) (measure, error) {
	return timed(r.cmd(repo, "backup", dir))
}
