package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/snapflow/snapflow/internal/version"
)

func newVersionCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the snapflow version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info := version.Get()
			if output == OutputTable {
				fmt.Fprint(cmd.OutOrStdout(), versionLine(info))
				return nil
			}
			return printStructured(cmd.OutOrStdout(), output, info)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", OutputTable, "output format: table, json or yaml")
	return cmd
}

// versionLine is the version as `snapflow version` and `--version` print it.
func versionLine(info version.Info) string {
	var b strings.Builder
	fmt.Fprintf(&b, "snapflow %s", info.Version)
	if info.Commit != "" {
		fmt.Fprintf(&b, " (%s)", info.Commit)
	}
	fmt.Fprintf(&b, " %s %s\n", info.GoVersion, info.Platform)
	if info.Image != "" {
		fmt.Fprintf(&b, "image %s\n", info.Image)
	}
	return b.String()
}
