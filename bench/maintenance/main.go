// Command maintenance measures full kopia maintenance after half of 1,000
// snapshots were deleted: the snapflow mover's maintenance operation (as
// the maintenance function's Job runs it) against `kopia maintenance run
// --full` of the same kopia version, each from an identical copy of one
// repository, both with safety none so that both reclaim in one run.
// Results go into docs/benchmarks.md.
package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"

	"github.com/snapflow/snapflow/bench/internal/proc"
	"github.com/snapflow/snapflow/bench/internal/report"
	"github.com/snapflow/snapflow/internal/kopia"
	"github.com/snapflow/snapflow/internal/mover"
)

const (
	password     = "benchmark-password"
	kopiaVersion = "v0.22.3"
	owner        = "bench@bench"
)

func main() {
	bin := flag.String("bin", "bin", "directory holding snapflow and kopia")
	n := flag.Int("n", 1000, "snapshots to write (half are deleted before maintenance)")
	reps := flag.Int("reps", 7, "repetitions (the median is reported; a run takes about two seconds, so noise needs several)")
	seedDir := flag.String("seed", "", "internal: write the repository into this directory, then exit")
	flag.Parse()
	if *seedDir != "" {
		// In a child process, so the parent's memory high-water mark (which
		// survives into the peers it starts) stays small.
		if err := seed(filepath.Join(*seedDir, "base"), filepath.Join(*seedDir, "data"), *n); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	if err := run(*bin, *n, *reps); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(bin string, n, reps int) error {
	binAbs, _ := filepath.Abs(bin)
	snapflow, kopiaCLI := filepath.Join(binAbs, "snapflow"), filepath.Join(binAbs, "kopia")
	for _, p := range []string{snapflow, kopiaCLI} {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("%w (run make build and bash hack/tools.sh kopia)", err)
		}
	}
	work, err := os.MkdirTemp("", "snapflow-bench-maintenance-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)

	fmt.Printf("writing %d snapshots and deleting half of them…\n", n)
	base := filepath.Join(work, "base")
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if out, err := exec.Command(self, "-seed", work, "-n", fmt.Sprint(n)).CombinedOutput(); err != nil {
		return fmt.Errorf("seed: %w: %s", err, out)
	}
	baseBytes, err := dirBytes(base)
	if err != nil {
		return err
	}
	type result struct {
		m         proc.Measure
		reclaimed int64
	}
	var sf, kc []proc.Measure
	freed := map[string]int64{}
	for rep := 0; rep < reps; rep++ {
		for _, tool := range []string{"snapflow", "kopia"} {
			repoDir := filepath.Join(work, fmt.Sprintf("%s-%d", tool, rep))
			if out, err := exec.Command("cp", "-a", base, repoDir).CombinedOutput(); err != nil {
				return fmt.Errorf("copy the repository: %w: %s", err, out)
			}
			var m proc.Measure
			if tool == "snapflow" {
				m, err = moverMaintain(snapflow, work, repoDir)
			} else {
				m, err = cliMaintain(kopiaCLI, repoDir)
			}
			if err != nil {
				return fmt.Errorf("%s: %w", tool, err)
			}
			after, err := dirBytes(repoDir)
			if err != nil {
				return err
			}
			r := result{m, baseBytes - after}
			fmt.Printf("  %-8s %6.2fs wall %6.2fs cpu %4.0f MiB, %d bytes reclaimed\n", tool, m.Wall.Seconds(), m.CPU.Seconds(), m.RSSMB, r.reclaimed)
			if tool == "snapflow" {
				sf = append(sf, m)
			} else {
				kc = append(kc, m)
			}
			freed[tool] = r.reclaimed
			_ = os.RemoveAll(repoDir)
		}
	}
	s, k := proc.Median(sf), proc.Median(kc)
	// The same bytes within 1% (index blobs may differ by a few KiB).
	same := freed["kopia"] > 0 && absDiff(freed["snapflow"], freed["kopia"])*100 <= freed["kopia"]
	body := fmt.Sprintf("## Full maintenance\n\n`go run ./bench/maintenance` on %s, %d cores, %s: %d kopia snapshots, each with 16 KiB of its own data, in a local filesystem repository, every other one deleted; then full maintenance with safety none, each tool from an identical copy. snapflow is the real `snapflow mover` binary running a maintenance work spec (taking the maintenance ownership first, as the maintenance function's Job does); the peer is kopia %s's CLI running `kopia maintenance run --full --safety=none`, connected and made the owner beforehand (untimed), with its cache emptied, as a mover Job's is. Median of %d runs; bytes reclaimed are measured on disk, without kopia's session logs (each session writes one, the peer's untimed setup too).\n\n"+
		"| | wall | cpu | peak RSS | bytes reclaimed |\n|---|---|---|---|---|\n| snapflow mover | %.2f s | %.2f s | %.0f MiB | %d |\n| kopia CLI | %.2f s | %.2f s | %.0f MiB | %d |\n| snapflow / kopia | %.2f× | | %.2f× | |\n\n"+
		"Target: no slower than the kopia CLI, the same bytes reclaimed — %s.\n",
		time.Now().UTC().Format("2006-01-02"), runtime.NumCPU(), runtime.Version(), n, kopiaVersion, reps,
		s.Wall.Seconds(), s.CPU.Seconds(), s.RSSMB, freed["snapflow"], k.Wall.Seconds(), k.CPU.Seconds(), k.RSSMB, freed["kopia"],
		s.Wall.Seconds()/k.Wall.Seconds(), s.RSSMB/k.RSSMB, report.Verdict(s.Wall <= k.Wall && same))
	fmt.Print(body)
	return report.WriteSection("docs/benchmarks.md", "maintenance", body)
}

func absDiff(a, b int64) int64 {
	if a > b {
		return a - b
	}
	return b - a
}

// seed creates a repository holding n snapshots, each with data of its
// own, and deletes every other one.
func seed(repoDir, data string, n int) error {
	ctx := context.Background()
	if err := os.MkdirAll(data, 0o755); err != nil {
		return err
	}
	r, err := kopia.Open(ctx, kopia.OpenOptions{Backend: kopia.Backend{Filesystem: &kopia.FilesystemBackend{Path: repoDir}}, Password: password,
		Create: &kopia.CreateOptions{}, WorkDir: repoDir + "-cache"})
	if err != nil {
		return err
	}
	defer r.Close(ctx)
	src := kopia.Source{Username: "bench", Hostname: "bench", Path: "/data"}
	var gone []string
	buf := make([]byte, 16<<10)
	for i := 0; i < n; i++ {
		_, _ = rand.Read(buf)
		if err := os.WriteFile(filepath.Join(data, "f"), buf, 0o644); err != nil {
			return err
		}
		res, err := r.Snapshot(ctx, kopia.SnapshotRequest{Dir: data, Source: src})
		if err != nil {
			return err
		}
		if i%2 == 0 {
			gone = append(gone, res.ID)
		}
	}
	_, err = r.Delete(ctx, gone, nil)
	return err
}

func moverMaintain(bin, work, repoDir string) (proc.Measure, error) {
	w := mover.WorkSpec{Operation: mover.OpMaintenance, Target: mover.Target{Kind: "Maintenance", Name: "bench"},
		Repository:  mover.Repository{Backend: kopia.Backend{Filesystem: &kopia.FilesystemBackend{Path: "/"}}},
		Maintenance: &mover.MaintenanceWork{Mode: kopia.MaintainFull, Slot: time.Now(), Owner: owner, Safety: kopia.SafetyNone}}
	b, err := json.Marshal(w)
	if err != nil {
		return proc.Measure{}, err
	}
	spec := filepath.Join(work, fmt.Sprintf("maintenance-%d.json", time.Now().UnixNano()))
	if err := os.WriteFile(spec, b, 0o644); err != nil {
		return proc.Measure{}, err
	}
	cmd := exec.Command(bin, "mover", "--work", spec, "--repository-root", repoDir, "--cache-dir", repoDir+"-mover-cache",
		"--status-file", spec+".status", "--termination-log", "")
	cmd.Env = append(os.Environ(), "KOPIA_PASSWORD="+password)
	m, err := proc.Timed(cmd)
	if err != nil {
		return m, err
	}
	var rep mover.Report
	if b, err := os.ReadFile(spec + ".status"); err != nil || json.Unmarshal(b, &rep) != nil {
		return m, fmt.Errorf("read the mover's report: %v", err)
	}
	if rep.Maintained == nil || rep.Maintained.Result.Skipped {
		return m, fmt.Errorf("the mover did not run maintenance: %+v", rep)
	}
	return m, nil
}

func cliMaintain(bin, repoDir string) (proc.Measure, error) {
	cfg := repoDir + ".config"
	kopia := func(args ...string) *exec.Cmd {
		cmd := exec.Command(bin, append(args, "--config-file", cfg)...)
		cmd.Env = append(os.Environ(), "KOPIA_PASSWORD="+password, "KOPIA_CHECK_FOR_UPDATES=false")
		return cmd
	}
	cache := repoDir + "-cli-cache"
	if _, err := proc.Timed(kopia("repository", "connect", "filesystem", "--path", repoDir, "--cache-directory", cache,
		"--override-username", "bench", "--override-hostname", "bench")); err != nil {
		return proc.Measure{}, err
	}
	if _, err := proc.Timed(kopia("maintenance", "set", "--owner", owner)); err != nil {
		return proc.Measure{}, err
	}
	// A mover Job starts with an empty cache, so the peer does too.
	if err := os.RemoveAll(cache); err != nil {
		return proc.Measure{}, err
	}
	return proc.Timed(kopia("maintenance", "run", "--full", "--safety=none"))
}

// dirBytes sums the repository's blobs on disk, leaving out kopia's own
// session logs (the "_" blobs): every kopia session writes one, so the
// peer's untimed setup would otherwise count against its reclaim.
func dirBytes(dir string) (int64, error) {
	var n int64
	err := filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if rel, _ := filepath.Rel(dir, path); info.IsDir() && rel == "_" {
			return filepath.SkipDir
		}
		if info.Mode().IsRegular() {
			n += info.Size()
		}
		return nil
	})
	return n, err
}
