// Command delete measures deleting 1,000 kopia snapshots in one batch: the
// snapflow mover's delete operation (one kopia session for every member, as
// the cleanup function's batch Job runs it) against the kopia CLI deleting
// the same ids in one `kopia snapshot delete` call. Each tool starts from
// an identical copy of one repository. Results go into docs/benchmarks.md.
package main

import (
	"context"
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
)

func main() {
	bin := flag.String("bin", "bin", "directory holding snapflow and kopia")
	n := flag.Int("n", 1000, "snapshots to delete")
	reps := flag.Int("reps", 3, "repetitions (the median is reported)")
	seedDir := flag.String("seed", "", "internal: write the repository into this directory and its ids to stdout, then exit")
	countDir := flag.String("count", "", "internal: print how many snapshots the repository in this directory holds, then exit")
	flag.Parse()
	if *countDir != "" {
		n, err := remaining(*countDir)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Print(n)
		return
	}
	if *seedDir != "" {
		// In a child process, so the parent's memory high-water mark (which
		// survives into the peers it starts) stays small.
		ids, err := seed(filepath.Join(*seedDir, "base"), filepath.Join(*seedDir, "data"), *n)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		_ = json.NewEncoder(os.Stdout).Encode(ids)
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
	work, err := os.MkdirTemp("", "snapflow-bench-delete-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)

	fmt.Printf("writing %d snapshots…\n", n)
	base := filepath.Join(work, "base")
	self, err := os.Executable()
	if err != nil {
		return err
	}
	out, err := exec.Command(self, "-seed", work, "-n", fmt.Sprint(n)).Output()
	if err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	var ids []string
	if err := json.Unmarshal(out, &ids); err != nil || len(ids) != n {
		return fmt.Errorf("seed wrote %d ids (%v)", len(ids), err)
	}
	var sf, kc []proc.Measure
	for rep := 0; rep < reps; rep++ {
		for _, tool := range []string{"snapflow", "kopia"} {
			repoDir := filepath.Join(work, fmt.Sprintf("%s-%d", tool, rep))
			if out, err := exec.Command("cp", "-a", base, repoDir).CombinedOutput(); err != nil {
				return fmt.Errorf("copy the repository: %w: %s", err, out)
			}
			var m proc.Measure
			if tool == "snapflow" {
				m, err = moverDelete(snapflow, work, repoDir, ids)
			} else {
				m, err = cliDelete(kopiaCLI, repoDir, ids)
			}
			if err != nil {
				return fmt.Errorf("%s: %w", tool, err)
			}
			// Counted in a child too: opening the repository here would
			// raise this process's memory high-water mark, which the next
			// peer it starts would inherit in its rusage.
			if out, err := exec.Command(self, "-count", repoDir).Output(); err != nil || string(out) != "0" {
				return fmt.Errorf("%s left %q snapshots (%v)", tool, out, err)
			}
			fmt.Printf("  %-8s %6.2fs wall %6.2fs cpu %4.0f MiB\n", tool, m.Wall.Seconds(), m.CPU.Seconds(), m.RSSMB)
			if tool == "snapflow" {
				sf = append(sf, m)
			} else {
				kc = append(kc, m)
			}
			_ = os.RemoveAll(repoDir)
		}
	}
	s, k := proc.Median(sf), proc.Median(kc)
	body := fmt.Sprintf("## Batch delete\n\n`go run ./bench/delete` on %s, %d cores, %s: deleting %d kopia snapshots from a local filesystem repository, each tool from an identical copy. snapflow is the real `snapflow mover` binary running a delete work spec with %d members (one kopia session, as the cleanup function's batch Job does); the peer is kopia %s's CLI deleting the same ids in one `kopia snapshot delete --delete` call, connected beforehand (untimed) and with its cache emptied, as a mover Job's is. Median of %d runs.\n\n"+
		"| | wall | cpu | peak RSS |\n|---|---|---|---|\n| snapflow mover | %.2f s | %.2f s | %.0f MiB |\n| kopia CLI | %.2f s | %.2f s | %.0f MiB |\n| snapflow / kopia | %.2f× | | %.2f× |\n\n"+
		"Target: the batch no slower than the kopia CLI — %s.\n",
		time.Now().UTC().Format("2006-01-02"), runtime.NumCPU(), runtime.Version(), n, n, kopiaVersion, reps,
		s.Wall.Seconds(), s.CPU.Seconds(), s.RSSMB, k.Wall.Seconds(), k.CPU.Seconds(), k.RSSMB,
		s.Wall.Seconds()/k.Wall.Seconds(), s.RSSMB/k.RSSMB, report.Verdict(s.Wall <= k.Wall))
	fmt.Print(body)
	return report.WriteSection("docs/benchmarks.md", "delete", body)
}

// seed creates a repository holding n snapshots of a small directory.
func seed(repoDir, data string, n int) ([]string, error) {
	ctx := context.Background()
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	r, err := kopia.Open(ctx, kopia.OpenOptions{Backend: kopia.Backend{Filesystem: &kopia.FilesystemBackend{Path: repoDir}}, Password: password,
		Create: &kopia.CreateOptions{}, WorkDir: repoDir + "-cache"})
	if err != nil {
		return nil, err
	}
	defer r.Close(ctx)
	src := kopia.Source{Username: "bench", Hostname: "bench", Path: "/data"}
	ids := make([]string, 0, n)
	for i := 0; i < n; i++ {
		if err := os.WriteFile(filepath.Join(data, "f"), []byte(fmt.Sprint(i)), 0o644); err != nil {
			return nil, err
		}
		res, err := r.Snapshot(ctx, kopia.SnapshotRequest{Dir: data, Source: src})
		if err != nil {
			return nil, err
		}
		ids = append(ids, res.ID)
	}
	return ids, nil
}

func moverDelete(bin, work, repoDir string, ids []string) (proc.Measure, error) {
	members := make([]mover.DeleteMember, len(ids))
	for i, id := range ids {
		members[i] = mover.DeleteMember{Namespace: "bench", Name: fmt.Sprintf("s-%04d", i), UID: fmt.Sprint(i), SnapshotID: id}
	}
	w := mover.WorkSpec{Operation: mover.OpDelete, Target: mover.Target{Kind: "Repository", Name: "bench"},
		Repository: mover.Repository{Backend: kopia.Backend{Filesystem: &kopia.FilesystemBackend{Path: "/"}}}, Delete: &mover.DeleteWork{Members: members}}
	b, err := json.Marshal(w)
	if err != nil {
		return proc.Measure{}, err
	}
	spec := filepath.Join(work, fmt.Sprintf("delete-%d.json", time.Now().UnixNano()))
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
	for _, d := range rep.Members {
		if !d.Deleted {
			return m, fmt.Errorf("member %d was not deleted: %s", d.Index, d.Message)
		}
	}
	return m, nil
}

func cliDelete(bin, repoDir string, ids []string) (proc.Measure, error) {
	cfg := repoDir + ".config"
	kopia := func(args ...string) *exec.Cmd {
		cmd := exec.Command(bin, append(args, "--config-file", cfg)...)
		cmd.Env = append(os.Environ(), "KOPIA_PASSWORD="+password, "KOPIA_CHECK_FOR_UPDATES=false")
		return cmd
	}
	cache := repoDir + "-cli-cache"
	if _, err := proc.Timed(kopia("repository", "connect", "filesystem", "--path", repoDir, "--cache-directory", cache)); err != nil {
		return proc.Measure{}, err
	}
	// connect already read the index into the cache; a mover Job starts
	// with an empty one, so the peer does too.
	if err := os.RemoveAll(cache); err != nil {
		return proc.Measure{}, err
	}
	return proc.Timed(kopia(append([]string{"snapshot", "delete", "--delete"}, ids...)...))
}

func remaining(repoDir string) (int, error) {
	ctx := context.Background()
	r, err := kopia.Open(ctx, kopia.OpenOptions{Backend: kopia.Backend{Filesystem: &kopia.FilesystemBackend{Path: repoDir}}, Password: password, ReadOnly: true, WorkDir: repoDir + "-check"})
	if err != nil {
		return -1, err
	}
	defer r.Close(ctx)
	list, err := r.List(ctx, nil)
	return len(list), err
}
