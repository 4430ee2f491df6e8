// Package cli wires snapflow's subcommands.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// NewRoot builds the root command with every subcommand attached.
func NewRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "snapflow",
		Short:         "Event-driven, kopia-based backups for Kubernetes",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.PersistentFlags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default: KUBECONFIG, in-cluster, ~/.kube/config)")
	root.AddCommand(newVersionCmd(), newWebhookCmd(), newValidateCmd(), newPolicyCmd(), newDescribeCmd(), newRetentionCmd(), newScheduleCmd(), newMoverCmd(), newFunctionCmd(), newDevCmd(), newSourceCmd(), newSnapshotCmd(), newRestoreCmd(), newMaintenanceCmd(), newPruneCmd())
	return root
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
