package cli

import (
	"fmt"

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
				fmt.Fprintf(cmd.OutOrStdout(), "snapflow %s", info.Version)
				if info.Commit != "" {
					fmt.Fprintf(cmd.OutOrStdout(), " (%s)", info.Commit)
				}
				fmt.Fprintf(cmd.OutOrStdout(), " %s %s\n", info.GoVersion, info.Platform)
				if info.Image != "" {
					fmt.Fprintf(cmd.OutOrStdout(), "image %s\n", info.Image)
				}
				return nil
			}
			return printStructured(cmd.OutOrStdout(), output, info)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", OutputTable, "output format: table, json or yaml")
	return cmd
}
