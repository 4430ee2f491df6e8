// Command backup measures backup time and peak memory of snapflow's mover
// against the kopia CLI of the same version and restic, side by side in one
// run, into fresh local filesystem repositories:
//
//	(a) 1 GiB in 10,000 files of 100 KiB
//	(b) 1 GiB in 4 files of 256 MiB
//	(c) dataset (a) again with 1% of its files rewritten (incremental)
//
// and then the restore of (c) and (b) from those repositories into empty
// directories, again by each tool from its own repository.
//
// The mover runs as the real `snapflow mover` binary with a work spec, as a
// Job would run it, reporting to a file instead of an API server. Results go
// into docs/benchmarks.md as ratios to the kopia CLI.
//
// With -backend s3 the same cases run against an S3 bucket of a local
// versitygw (bin/versitygw, posix backend), snapflow against the kopia CLI
// only, each repository under its own prefix.
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
	"strings"
	"time"

	"github.com/snapflow/snapflow/bench/internal/proc"
	"github.com/snapflow/snapflow/bench/internal/report"
	"github.com/snapflow/snapflow/internal/kopia"
	"github.com/snapflow/snapflow/internal/mover"
	"github.com/snapflow/snapflow/internal/restore"
)

const password = "benchmark-password"

type measure = proc.Measure

type tool interface {
	name() string
	// init creates an empty repository (not timed).
	init(repo string) error
	// backup snapshots dir (timed).
	backup(repo, dir string) (measure, error)
	// restore writes the latest snapshot of dir into target (timed).
	restore(repo, dir, target string) (measure, error)
}

func main() {
	bin := flag.String("bin", "bin", "directory holding snapflow and kopia")
	work := flag.String("work", "", "scratch directory (default: a temp dir; needs about 6 GiB)")
	reps := flag.Int("reps", 4, "runs; a multiple of 4 gives every tool order equally often (the median is reported)")
	gen := flag.String("generate", "", "internal: write the datasets into this directory and exit")
	backend := flag.String("backend", "filesystem", "where the repositories live: filesystem, or s3 (a local versitygw from bin/)")
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
	if *backend != "filesystem" && *backend != "s3" {
		fmt.Fprintf(os.Stderr, "bench: -backend %s: use filesystem or s3\n", *backend)
		os.Exit(2)
	}
	if err := run(*bin, *work, *reps, *backend == "s3"); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(bin, work string, reps int, overS3 bool) error {
	binAbs, _ := filepath.Abs(bin)
	if work == "" {
		d, err := os.MkdirTemp("", "snapflow-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		work = d
	}
	// Repositories are directories under repos: on disk, or the bucket's
	// directory of the gateway's posix backend, where each is a prefix.
	repos := work
	var store *s3Store
	if overS3 {
		st, err := startS3(filepath.Join(binAbs, "versitygw"), filepath.Join(work, "gateway"))
		if err != nil {
			return err
		}
		defer st.stop()
		store, repos = st, st.bucketDir
	}
	tools := []tool{
		&snapflowMover{bin: filepath.Join(binAbs, "snapflow"), work: work, s3: store},
		&kopiaCLI{bin: filepath.Join(binAbs, "kopia"), work: work, s3: store},
	}
	if !overS3 {
		restic, err := exec.LookPath("restic")
		if err != nil {
			return fmt.Errorf("restic is not installed (apt-get install restic): %w", err)
		}
		tools = append(tools, &resticCLI{bin: restic})
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
	restoreCases := []string{"restore (c) 10,000 files", "restore (b) 4 × 256 MiB"}
	results := map[string]map[string][]measure{}
	for _, c := range append(cases, restoreCases...) {
		results[c] = map[string][]measure{}
	}
	record := func(c string, t tool, m measure) {
		results[c][t.name()] = append(results[c][t.name()], m)
		fmt.Printf("  %-9s %-26s %6.2fs wall %6.2fs cpu %4.0f MiB\n", t.name(), c, m.Wall.Seconds(), m.CPU.Seconds(), m.RSSMB)
	}
	// backup measures one backup of dir into repo, after a settle.
	backup := func(c string, t tool, repo, dir string) error {
		settle()
		m, err := t.backup(repo, dir)
		if err != nil {
			return fmt.Errorf("%s %s: %w", t.name(), c[:3], err)
		}
		record(c, t, m)
		return nil
	}
	for rep := 0; rep < reps; rep++ {
		// Every case runs each tool back to back, so a slow spell of the
		// machine hits all tools of a pair alike.
		order := runOrder(tools, rep)
		repoA := func(t tool) string { return filepath.Join(repos, fmt.Sprintf("repo-%s-a-%d", t.name(), rep)) }
		repoB := func(t tool) string { return filepath.Join(repos, fmt.Sprintf("repo-%s-b-%d", t.name(), rep)) }
		for _, t := range order {
			for _, r := range []string{repoA(t), repoB(t)} {
				if err := t.init(r); err != nil {
					return fmt.Errorf("%s init: %w", t.name(), err)
				}
			}
		}
		for _, t := range order {
			if err := backup(cases[0], t, repoA(t), small); err != nil {
				return err
			}
		}
		// (c) is short, so it runs incrementalRounds times per run: each
		// round changes 1% of the files and every tool backs them up.
		for round := 0; round < incrementalRounds; round++ {
			if err := change(small, 100, uint64(rep*incrementalRounds+round)+10); err != nil {
				return err
			}
			for _, t := range roundOrder(order, round) {
				if err := backup(cases[2], t, repoA(t), small); err != nil {
					return err
				}
			}
		}
		// (b) runs rounds too, each into fresh repositories: one pair of
		// 5-second runs moves by up to a third on this machine.
		for round := 0; round < largeRounds; round++ {
			for _, t := range roundOrder(order, round) {
				if round > 0 {
					if err := fresh(t, repoB(t)); err != nil {
						return fmt.Errorf("%s init: %w", t.name(), err)
					}
				}
				if err := backup(cases[1], t, repoB(t), large); err != nil {
					return err
				}
			}
		}
		for i, rc := range []struct {
			repo func(tool) string
			dir  string
		}{{repoA, small}, {repoB, large}} {
			for _, t := range order {
				target := filepath.Join(work, "restored-"+t.name())
				settle()
				m, err := t.restore(rc.repo(t), rc.dir, target)
				if err != nil {
					return fmt.Errorf("%s %s: %w", t.name(), restoreCases[i], err)
				}
				if err := sameSize(rc.dir, target); err != nil {
					return fmt.Errorf("%s %s: %w", t.name(), restoreCases[i], err)
				}
				_ = os.RemoveAll(target)
				record(restoreCases[i], t, m)
			}
		}
		for _, t := range order {
			_ = os.RemoveAll(repoA(t))
			_ = os.RemoveAll(repoB(t))
		}
		fmt.Printf("run %d of %d done\n", rep+1, reps)
	}
	if overS3 {
		return writeS3(append(cases, restoreCases...), results, reps)
	}
	if err := write(cases, tools, results, reps); err != nil {
		return err
	}
	return writeRestore(restoreCases, results, reps)
}

// settle writes back dirty pages before a measured run, so the disk is not
// still flushing what the previous tool wrote while the next one runs.
func settle() { _ = exec.Command("sync").Run() }

// incrementalRounds is how many 1% change rounds (c) runs per run, and
// largeRounds how many times (b) runs.
const incrementalRounds, largeRounds = 3, 3

// runOrder keeps the two kopia-based tools (tools[0] and tools[1]) next to
// each other and restic (tools[2]) before or after both, cycling through
// the four such orders. A run right after restic's heavy writes is slower
// on this machine's disk even after a sync; a plain rotation had snapflow
// follow restic more often than the kopia CLI did.
func runOrder(tools []tool, rep int) []tool {
	if len(tools) == 2 {
		return [][]tool{{tools[0], tools[1]}, {tools[1], tools[0]}}[rep%2]
	}
	a, b, r := tools[0], tools[1], tools[2]
	return [][]tool{{a, b, r}, {b, a, r}, {r, a, b}, {r, b, a}}[rep%4]
}

// roundOrder reverses the run's tool order on odd rounds; with runOrder's
// four orders, each tool goes as often before its peer as after it over
// every four runs.
func roundOrder(order []tool, round int) []tool {
	if round%2 == 0 {
		return order
	}
	r := make([]tool, len(order))
	for i, t := range order {
		r[len(order)-1-i] = t
	}
	return r
}

// fresh replaces repo with a new, empty repository of t.
func fresh(t tool, repo string) error {
	for _, p := range []string{repo, repo + "-cache", repo + ".config"} {
		if err := os.RemoveAll(p); err != nil {
			return err
		}
	}
	return t.init(repo)
}

// sameSize checks a restore wrote as many bytes in as many files as the source holds.
func sameSize(src, dst string) error {
	count := func(dir string) (n, size int64, err error) {
		err = filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
			if err == nil && info.Mode().IsRegular() {
				n++
				size += info.Size()
			}
			return err
		})
		return
	}
	n1, s1, err := count(src)
	if err != nil {
		return err
	}
	n2, s2, err := count(dst)
	if err != nil {
		return err
	}
	if n1 != n2 || s1 != s2 {
		return fmt.Errorf("restored %d files / %d bytes, the source has %d / %d", n2, s2, n1, s1)
	}
	return nil
}

func writeRestore(cases []string, results map[string]map[string][]measure, reps int) error {
	var b strings.Builder
	fmt.Fprintf(&b, "## Restore throughput and memory\n\nSame run as the backup benchmark (%s, %d cores): each tool restores the latest snapshot of (c) and of (b) from its own repository into an empty directory on the same disk, with default settings (kopia and the mover: 8 parallel files, overwrite on; restic: defaults). The mover opens the repository read-only without a local cache, since a restore reads each content once (kopia's cache would write every byte read to local disk a second time, and a mover's cache volume starts empty); the kopia CLI keeps its default cache, which its first restore fills and later ones read. The restored tree is checked for file count and bytes. Median wall time of %d runs, tools back to back per case; each ratio is the median of the per-pair ratios. Peak RSS is the maximum.\n\n",
		time.Now().UTC().Format("2006-01-02"), runtime.NumCPU(), reps)
	b.WriteString("| case | snapflow mover | kopia CLI | restic | snapflow / kopia | restic / snapflow |\n|---|---|---|---|---|---|\n")
	var verdicts []string
	for _, c := range cases {
		s, k, r := proc.Median(results[c]["snapflow"]), proc.Median(results[c]["kopia"]), proc.Median(results[c]["restic"])
		vsKopia, resticVs := proc.PairedRatio(results[c]["snapflow"], results[c]["kopia"]), proc.PairedRatio(results[c]["restic"], results[c]["snapflow"])
		fmt.Fprintf(&b, "| %s | %.2f s (cpu %.1f s), %.0f MiB | %.2f s (cpu %.1f s), %.0f MiB | %.2f s (cpu %.1f s), %.0f MiB | %.2f× time, %.2f× memory | %.2f× |\n", c,
			s.Wall.Seconds(), s.CPU.Seconds(), s.RSSMB, k.Wall.Seconds(), k.CPU.Seconds(), k.RSSMB, r.Wall.Seconds(), r.CPU.Seconds(), r.RSSMB,
			vsKopia, s.RSSMB/k.RSSMB, resticVs)
		verdicts = append(verdicts, fmt.Sprintf("%s: no slower than kopia restore — %s (%s)", c, report.Verdict(vsKopia <= 1.0),
			proc.Spread(proc.PairedRatios(results[c]["snapflow"], results[c]["kopia"]))))
	}
	b.WriteString("\nTarget: snapflow's restore no slower than `kopia restore` of the same version (ratio ≤ 1.0). restic has no target here; it restores many small files faster than both kopia-based tools.\n\n")
	for _, v := range verdicts {
		b.WriteString("- " + v + "\n")
	}
	fmt.Print(b.String())
	return report.WriteSection("docs/benchmarks.md", "restore", b.String())
}

func write(cases []string, tools []tool, results map[string]map[string][]measure, reps int) error {
	var b strings.Builder
	fmt.Fprintf(&b, "## Backup throughput and memory\n\n`make bench` (`go run ./bench/backup`) on %s, %d cores, %s; kopia CLI %s built from source, restic from Debian. Fresh filesystem repositories on the same disk, default settings for every tool (kopia: BLAKE2B-256-128, AES256-GCM, dynamic 4 MiB splitter, no compression). snapflow is the real `snapflow mover` binary running a work spec, as a mover Job does. %d runs; in each, every case runs the tools back to back (snapflow and the kopia CLI next to each other, each first in turn, and restic before or after both, with a `sync` before each measured run so no tool pays for the previous one's writeback); (c) runs %d rounds of 1%% changes and (b) %d rounds into fresh repositories, the order reversed on every other round. Times are medians; each ratio is the median of the per-pair ratios, so a slow spell of the machine cancels out within a pair; the verdicts give the spread of those ratios, since on this shared machine one pair can differ by a third. Peak RSS is the maximum over the runs.\n\n",
		time.Now().UTC().Format("2006-01-02"), runtime.NumCPU(), runtime.Version(), kopiaVersion, reps, incrementalRounds, largeRounds)
	b.WriteString("| case | snapflow mover | kopia CLI | restic | snapflow / kopia | restic / snapflow |\n|---|---|---|---|---|---|\n")
	var verdicts []string
	for _, c := range cases {
		s, k, r := proc.Median(results[c]["snapflow"]), proc.Median(results[c]["kopia"]), proc.Median(results[c]["restic"])
		vsKopia, resticVs := proc.PairedRatio(results[c]["snapflow"], results[c]["kopia"]), proc.PairedRatio(results[c]["restic"], results[c]["snapflow"])
		fmt.Fprintf(&b, "| %s | %.2f s (cpu %.1f s), %.0f MiB | %.2f s (cpu %.1f s), %.0f MiB | %.2f s (cpu %.1f s), %.0f MiB | %.2f× time, %.2f× memory | %.2f× |\n", c,
			s.Wall.Seconds(), s.CPU.Seconds(), s.RSSMB, k.Wall.Seconds(), k.CPU.Seconds(), k.RSSMB, r.Wall.Seconds(), r.CPU.Seconds(), r.RSSMB,
			vsKopia, s.RSSMB/k.RSSMB, resticVs)
		ok := vsKopia <= 1.0
		v := fmt.Sprintf("%s: no slower than kopia — %s (%s)", c[:3], report.Verdict(ok),
			proc.Spread(proc.PairedRatios(results[c]["snapflow"], results[c]["kopia"])))
		if c != cases[1] {
			v += fmt.Sprintf("; ≥2× faster than restic — %s", report.Verdict(resticVs >= 2))
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

type snapflowMover struct {
	bin, work string
	s3        *s3Store
}

// backend is where repo lives for the mover: the filesystem root it is
// given, or its prefix in the bucket.
func (s *snapflowMover) backend(repo string) kopia.Backend {
	if s.s3 != nil {
		return kopia.Backend{S3: &kopia.S3Backend{Bucket: s3Bucket, Prefix: s.s3.prefix(repo), Endpoint: s.s3.endpoint, Region: "us-east-1", DisableTLS: true}}
	}
	return kopia.Backend{Filesystem: &kopia.FilesystemBackend{Path: "/"}}
}

func (s *snapflowMover) name() string { return "snapflow" }
func (s *snapflowMover) path() string { return s.bin }

func (s *snapflowMover) spec(op, repo string, snap *mover.SnapshotWork) (string, error) {
	w := mover.WorkSpec{Operation: op, Target: mover.Target{Kind: "Repository", Name: "bench"},
		Repository: mover.Repository{Backend: s.backend(repo), Create: &kopia.CreateOptions{}}, Snapshot: snap}
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
	if s.s3 != nil {
		cmd.Env = append(cmd.Env, s.s3.env()...)
	}
	return cmd
}

func (s *snapflowMover) init(repo string) error {
	spec, err := s.spec(mover.OpBootstrap, repo, nil)
	if err != nil {
		return err
	}
	_, err = proc.Timed(s.run(repo, spec, ""))
	return err
}

func (s *snapflowMover) backup(repo, dir string) (measure, error) {
	spec, err := s.spec(mover.OpSnapshot, repo, &mover.SnapshotWork{Source: kopia.Source{Username: "bench", Hostname: "bench", Path: "/data"}})
	if err != nil {
		return measure{}, err
	}
	return proc.Timed(s.run(repo, spec, dir))
}

func (s *snapflowMover) restore(repo, dir, target string) (measure, error) {
	// The bench's status file of the last backup names its snapshot; the
	// mover resolves "latest of the identity" the way a fromPolicy or
	// identity restore does.
	w := mover.WorkSpec{Operation: mover.OpRestore, Target: mover.Target{Kind: "Restore", Name: "bench"},
		Repository: mover.Repository{Backend: s.backend(repo)},
		Restore:    &mover.RestoreWork{Query: &restore.Query{Username: "bench", Hostname: "bench", Path: "/data"}, OnMissing: "Fail", Options: restore.Options(nil)}}
	b, err := json.Marshal(w)
	if err != nil {
		return measure{}, err
	}
	spec := filepath.Join(s.work, fmt.Sprintf("work-%d.json", time.Now().UnixNano()))
	if err := os.WriteFile(spec, b, 0o644); err != nil {
		return measure{}, err
	}
	if err := os.MkdirAll(target, 0o755); err != nil {
		return measure{}, err
	}
	return proc.Timed(s.run(repo, spec, target))
}

const kopiaVersion = "v0.22.3"

type kopiaCLI struct {
	bin, work string
	s3        *s3Store
}

func (k *kopiaCLI) name() string { return "kopia" }
func (k *kopiaCLI) path() string { return k.bin }

func (k *kopiaCLI) cmd(repo string, args ...string) *exec.Cmd {
	cmd := exec.Command(k.bin, append(args, "--config-file", repo+".config")...)
	cmd.Env = append(os.Environ(), "KOPIA_PASSWORD="+password, "KOPIA_CHECK_FOR_UPDATES=false")
	if k.s3 != nil {
		cmd.Env = append(cmd.Env, k.s3.env()...)
	}
	return cmd
}

func (k *kopiaCLI) init(repo string) error {
	args := []string{"repository", "create", "filesystem", "--path", repo}
	if k.s3 != nil {
		args = []string{"repository", "create", "s3", "--bucket", s3Bucket, "--prefix", k.s3.prefix(repo), "--endpoint", k.s3.endpoint, "--region", "us-east-1", "--disable-tls"}
	}
	_, err := proc.Timed(k.cmd(repo, append(args, "--cache-directory", repo+"-cache")...))
	return err
}

func (k *kopiaCLI) backup(repo, dir string) (measure, error) {
	return proc.Timed(k.cmd(repo, "snapshot", "create", dir, "--no-progress"))
}

func (k *kopiaCLI) restore(repo, dir, target string) (measure, error) {
	// A source path restores that source's latest snapshot.
	return proc.Timed(k.cmd(repo, "restore", dir, target, "--no-progress"))
}

type resticCLI struct{ bin string }

func (r *resticCLI) name() string { return "restic" }

func (r *resticCLI) cmd(repo string, args ...string) *exec.Cmd {
	cmd := exec.Command(r.bin, append([]string{"--repo", repo, "--cache-dir", repo + "-cache", "--quiet"}, args...)...)
	cmd.Env = append(os.Environ(), "RESTIC_PASSWORD="+password)
	return cmd
}

func (r *resticCLI) init(repo string) error {
	_, err := proc.Timed(r.cmd(repo, "init"))
	return err
}

func (r *resticCLI) backup(repo, dir string) (measure, error) {
	return proc.Timed(r.cmd(repo, "backup", dir))
}

func (r *resticCLI) restore(repo, dir, target string) (measure, error) {
	m, err := proc.Timed(r.cmd(repo, "restore", "latest", "--target", target))
	if err != nil {
		return m, err
	}
	// restic recreates the absolute source path under the target; move it
	// up so every tool's tree compares the same way.
	inner := filepath.Join(target, dir)
	tmp := target + "-restic"
	if err := os.Rename(inner, tmp); err != nil {
		return m, err
	}
	if err := os.RemoveAll(target); err != nil {
		return m, err
	}
	return m, os.Rename(tmp, target)
}
