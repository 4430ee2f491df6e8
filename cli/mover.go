package cli

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/snapflow/snapflow/internal/mover"
)

func newMoverCmd() *cobra.Command {
	var o struct {
		work, source, repoRoot, caFile, cacheDir, configDir, termLog, statusFile, cpuProfile string
	}
	cmd := &cobra.Command{
		Use:   "mover",
		Short: "Run one mover operation (what a mover Job's container runs)",
		Long: `mover reads a work spec written by a snapflow function, performs the
operation with the kopia library and writes progress and the result onto the
target object's status. Credentials come from the environment (KOPIA_PASSWORD,
AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN), never from the
work spec. It exits non-zero when the operation fails, after recording why.`,
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
			spec, err := mover.Parse(b)
			if err != nil {
				return err
			}
			tail := &tailBuffer{max: 2048}
			logw := io.MultiWriter(cmd.ErrOrStderr(), tail)
			fmt.Fprintf(logw, "mover: %s for %s %s/%s\n", spec.Operation, spec.Target.Kind, spec.Target.Namespace, spec.Target.Name)
			var target mover.Reporter = &mover.FileReporter{Path: o.statusFile}
			if o.statusFile == "" {
				c, err := kubeClient()
				if err != nil {
					return err
				}
				target = &mover.KubeReporter{Client: c, Target: spec.Target, Delete: spec.Delete, Verify: spec.Verify, Pin: spec.Pin, LogTail: tail.String}
			}
			rep := &loggingReporter{Reporter: target, w: logw}
			err = mover.Run(cmd.Context(), mover.Options{
				Spec: spec, SourceDir: o.source, RepositoryRoot: o.repoRoot, CAFile: o.caFile, CacheDir: o.cacheDir, ConfigDir: o.configDir,
				Reporter: rep, TerminationLog: o.termLog,
			})
			if err != nil {
				fmt.Fprintf(logw, "mover: failed: %v\n", err)
				return err
			}
			fmt.Fprintln(logw, "mover: done")
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.work, "work", "/etc/snapflow/work/"+mover.WorkSpecKey, "the work spec file")
	f.StringVar(&o.source, "source", "/data", "where the source volume is mounted")
	f.StringVar(&o.repoRoot, "repository-root", "", "where a filesystem repository's volume is mounted")
	f.StringVar(&o.caFile, "ca-file", "", "PEM CA bundle for the S3 endpoint")
	f.StringVar(&o.cacheDir, "cache-dir", "", "kopia cache directory (a temp dir when empty)")
	f.StringVar(&o.configDir, "config-dir", "", "kopia connection config directory, never on a persistent volume (a temp dir when empty)")
	f.StringVar(&o.termLog, "termination-log", "/dev/termination-log", "file for the one-line result summary")
	f.StringVar(&o.statusFile, "status-file", "", "write the report to this JSON file instead of the target's status (runs without a cluster)")
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
