package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/snapflow/snapflow/bench/internal/proc"
	"github.com/snapflow/snapflow/bench/internal/report"
)

// s3Bucket is the one bucket of the -backend s3 runs; every repository is
// a prefix in it.
const s3Bucket = "bench"

const s3Access, s3Secret = "benchaccess", "benchsecret1234"

// s3Store is a local versitygw serving a posix directory: its bucket is
// the directory bucketDir, so removing a repository's directory removes
// the repository, as for the filesystem runs.
type s3Store struct {
	endpoint, bucketDir string
	cmd                 *exec.Cmd
}

func startS3(bin, root string) (*s3Store, error) {
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("versitygw: %w (run make tools)", err)
	}
	bucketDir := filepath.Join(root, s3Bucket)
	if err := os.MkdirAll(bucketDir, 0o755); err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	endpoint := l.Addr().String()
	_ = l.Close()
	cmd := exec.Command(bin, "--port", endpoint, "posix", root)
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID="+s3Access, "ROOT_SECRET_ACCESS_KEY="+s3Secret)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start versitygw: %w", err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; {
		c, err := net.DialTimeout("tcp", endpoint, 200*time.Millisecond)
		if err == nil {
			_ = c.Close()
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			return nil, fmt.Errorf("versitygw did not listen on %s: %w", endpoint, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return &s3Store{endpoint: endpoint, bucketDir: bucketDir, cmd: cmd}, nil
}

func (s *s3Store) stop() { _ = s.cmd.Process.Kill(); _ = s.cmd.Wait() }

// prefix is repo's key prefix in the bucket.
func (s *s3Store) prefix(repo string) string {
	rel, err := filepath.Rel(s.bucketDir, repo)
	if err != nil || strings.HasPrefix(rel, "..") {
		panic(fmt.Sprintf("repository %s is not under the bucket %s", repo, s.bucketDir))
	}
	return rel + "/"
}

// env is the credentials both tools read: the AWS variables kopia's CLI
// reads, and the mover's, which are the same names.
func (s *s3Store) env() []string {
	return []string{"AWS_ACCESS_KEY_ID=" + s3Access, "AWS_SECRET_ACCESS_KEY=" + s3Secret}
}

// writeS3 writes the S3 section: snapflow against the kopia CLI only.
func writeS3(cases []string, results map[string]map[string][]measure, reps int) error {
	var b strings.Builder
	fmt.Fprintf(&b, "## Backup and restore over S3\n\n`go run ./bench/backup -backend s3` on %s, %d cores, %s; kopia CLI %s built from source. The same datasets and cases as the filesystem benchmark above, with each repository under its own prefix of one bucket of a local versitygw (posix backend, plain HTTP on the loopback, on the same disk), so the figures add the S3 protocol's cost to the filesystem case's, not a network's. snapflow is the real `snapflow mover` binary running a work spec with an s3 backend; the kopia CLI is `kopia repository create s3` and `kopia snapshot create` with default settings. %d runs, tools back to back per case, each first in turn; medians, and each ratio is the median of the per-pair ratios. Peak RSS is the maximum.\n\n",
		time.Now().UTC().Format("2006-01-02"), runtime.NumCPU(), runtime.Version(), kopiaVersion, reps)
	b.WriteString("| case | snapflow mover | kopia CLI | snapflow / kopia |\n|---|---|---|---|\n")
	var verdicts []string
	for _, c := range cases {
		s, k := proc.Median(results[c]["snapflow"]), proc.Median(results[c]["kopia"])
		ratio := proc.PairedRatio(results[c]["snapflow"], results[c]["kopia"])
		fmt.Fprintf(&b, "| %s | %.2f s (cpu %.1f s), %.0f MiB | %.2f s (cpu %.1f s), %.0f MiB | %.2f× time, %.2f× memory |\n", c,
			s.Wall.Seconds(), s.CPU.Seconds(), s.RSSMB, k.Wall.Seconds(), k.CPU.Seconds(), k.RSSMB, ratio, s.RSSMB/k.RSSMB)
		verdicts = append(verdicts, fmt.Sprintf("%s: no slower than kopia — %s (%s)", c, report.Verdict(ratio <= 1.0),
			proc.Spread(proc.PairedRatios(results[c]["snapflow"], results[c]["kopia"]))))
	}
	b.WriteString("\nTarget: snapflow no slower than the kopia CLI of the same version on the same server (ratio ≤ 1.0).\n\n")
	for _, v := range verdicts {
		b.WriteString("- " + v + "\n")
	}
	fmt.Print(b.String())
	return report.WriteSection("docs/benchmarks.md", "backup-s3", b.String())
}
