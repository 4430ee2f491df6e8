package cli

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strings"
	"sync"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/snapflow/snapflow/internal/mover"
	"github.com/snapflow/snapflow/internal/moverjob"
)

func newMoverCmd() *cobra.Command {
	var o struct {
		work, digest, source, repoRoot, caFile, cacheDir, configDir, termLog, statusFile, cpuProfile string
	}
	cmd := &cobra.Command{
		Use:   "mover",
		Short: "Run one mover operation (what a mover Job's container runs)",
		Long: `mover reads a work spec written by a snapflow function, performs the
operation with the kopia library and leaves the result in its termination
message, from which the function that made the Job writes the target
object's status; the mover itself needs no Kubernetes credentials, except
to run a stream source's command in its workload (pods/exec, into the one
pod the function granted it).
Repository credentials come from the environment (KOPIA_PASSWORD; for s3
AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN; for sftp
KOPIA_SFTP_PASSWORD, KOPIA_SFTP_KEY_DATA, KOPIA_SFTP_KNOWN_HOSTS_DATA; for
webDav KOPIA_WEBDAV_USERNAME, KOPIA_WEBDAV_PASSWORD; for gcs
KOPIA_GCS_CREDENTIALS_JSON), never from the work spec. When the operation fails it records why and exits 3, which the
mover Job's pod failure policy takes as final.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.cpuProfile != "" {
				pf, err := os.Create(o.cpuProfile)
				if err != nil {
					return err
				}
				if err := pprof.StartCPUProfile(pf); err != nil {
					return err
				}
				defer pprof.StopCPUProfile()
			}
			b, err := os.ReadFile(o.work)
			if err != nil {
				return fmt.Errorf("read the work spec: %w", err)
			}
			if o.digest != "" && mover.Digest(b) != o.digest {
				return fmt.Errorf("the work spec %s is not the one the function wrote for this Job (digest %s, want %s): its ConfigMap was changed or made by someone else; delete the run's ConfigMap and run it again", o.work, mover.Digest(b), o.digest)
			}
			spec, err := mover.Parse(b)
			if err != nil {
				return err
			}
			if spec.Repository.Backend.Filesystem != nil {
				// Movers of several users (an inherited identity, a
				// restore's) share a filesystem repository through its
				// group: what one writes, the others must read and
				// extend.
				syscall.Umask(0o007)
			}
			tail := &tailBuffer{max: 2048}
			logw := io.MultiWriter(cmd.ErrOrStderr(), tail)
			fmt.Fprintf(logw, "mover: %s for %s %s/%s\n", spec.Operation, spec.Target.Kind, spec.Target.Namespace, spec.Target.Name)
			// The mover reports through the termination message (and
			// --status-file), never the API server: only a run with a
			// workload command gets a token, to exec into that one pod.
			rec := &mover.Recorder{Path: o.statusFile}
			err = mover.Run(cmd.Context(), mover.Options{
				Spec: spec, SourceDir: o.source, RepositoryRoot: o.repoRoot, CAFile: o.caFile, CacheDir: o.cacheDir, ConfigDir: o.configDir,
				Reporter: &loggingReporter{Reporter: rec, w: logw, progress: cmd.ErrOrStderr()}, TerminationLog: o.termLog,
				KubeConfig: moverKubeConfig,
				Report: func() mover.Report {
					r := rec.Report()
					r.LogTail = tail.String()
					return r
				},
			})
			if err != nil {
				fmt.Fprintf(logw, "mover: failed: %v\n", err)
				// The failure is in the report: the Job's pod failure policy
				// ends the Job on ExitReported instead of running it again,
				// and retries ExitRetryable (the storage may come back).
				return exitError{code: mover.ExitCode(err), msg: err.Error()}
			}
			fmt.Fprintln(logw, "mover: done")
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.work, "work", "/etc/snapflow/work/"+mover.WorkSpecKey, "the work spec file")
	f.StringVar(&o.digest, "work-digest", "", "refuse a work spec whose sha256 differs (sha256:<hex>), as a Job's is fixed when it is made")
	f.StringVar(&o.source, "source", moverjob.SourceDir, "where the source volume is mounted")
	f.StringVar(&o.repoRoot, "repository-root", "", "where a filesystem repository's volume is mounted")
	f.StringVar(&o.caFile, "ca-file", "", "PEM CA bundle for the S3 endpoint")
	f.StringVar(&o.cacheDir, "cache-dir", "", "kopia cache directory (a temp dir when empty)")
	f.StringVar(&o.configDir, "config-dir", "", "kopia connection config directory, never on a persistent volume (a temp dir when empty)")
	f.StringVar(&o.termLog, "termination-log", "/dev/termination-log", "file for the termination message: a summary and the report the function writes into status")
	f.StringVar(&o.statusFile, "status-file", "", "also write the report to this JSON file (runs without a cluster)")
	f.StringVar(&o.cpuProfile, "cpu-profile", "", "write a Go CPU profile of the run to this file")
	_ = f.MarkHidden("cpu-profile")
	return cmd
}

// tailBuffer keeps the last max bytes written, for status.logTail.
type tailBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf.Write(p)
	if over := t.buf.Len() - t.max; over > 0 {
		t.buf.Next(over)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(t.buf.String())
}

// moverKubeConfig is the API server access of a run that execs into a
// workload: the pod's ServiceAccount token, or the kubeconfig the node
// hands it (KUBECONFIG).
func moverKubeConfig() (*rest.Config, error) {
	if p := os.Getenv("KUBECONFIG"); p != "" {
		return clientcmd.BuildConfigFromFlags("", p)
	}
	return rest.InClusterConfig()
}
