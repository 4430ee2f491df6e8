// Package cli wires snapflow's subcommands.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/snapflow/snapflow/internal/version"
)

// NewRoot builds the root command with every subcommand attached.
func NewRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "snapflow",
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: commandName(os.Args[0])},
		Short:         "Event-driven, kopia-based backups for Kubernetes",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// --version prints what `snapflow version` prints.
	root.Version = version.Get().Version
	root.SetVersionTemplate(versionLine(version.Get()))
	root.SetOut(stdout)
	root.SetErr(stderr)
	kube := newKubeFlags()
	kube.addFlags(root.PersistentFlags())
	root.AddCommand(newVersionCmd(), newDoctorCmd(kube), newWebhookCmd(kube), newValidateCmd(kube), newPolicyCmd(kube), newDescribeCmd(kube), newRetentionCmd(kube), newScheduleCmd(kube),
		newMoverCmd(), newFunctionCmd(kube), newDevCmd(kube), newSourceCmd(kube), newSnapshotCmd(kube), newRestoreCmd(kube), newMaintenanceCmd(kube),
		newPruneCmd(kube), newExporterCmd(kube), newCoverageCmd(kube), newStatusCmd(kube), newLogsCmd(kube), newRepositoryCmd(kube), newSuspendCmd(kube, true), newSuspendCmd(kube, false))
	return root
}

// commandName is how the user called the binary: "kubectl snapflow" when
// kubectl runs it as a plugin (kubectl-snapflow on PATH, as krew installs
// it), so usage and examples read as what the user types.
func commandName(argv0 string) string {
	if strings.HasPrefix(filepath.Base(argv0), "kubectl-") {
		return "kubectl snapflow"
	}
	return "snapflow"
}

// Execute runs the CLI and returns the process exit code.
func Execute(args []string, stdout, stderr io.Writer) int {
	root := NewRoot(stdout, stderr)
	root.SetArgs(args)
	// Functions, sources and movers stop cleanly on SIGTERM (a pod's end).
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintf(stderr, "error: %v\n", err)
		// Commands that need a specific exit code (e.g. 2 for "orphans found")
		// return an error carrying it.
		var coded interface{ ExitCode() int }
		if errors.As(err, &coded) {
			return coded.ExitCode()
		}
		return 1
	}
	return 0
}
