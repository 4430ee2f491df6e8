// Command snapflow is the single binary of snapflow: admission webhook,
// functions, mover, and the operator CLI, one subcommand each.
package main

import (
	"os"

	"github.com/snapflow/snapflow/cli"
)

func main() {
	os.Exit(cli.Execute(os.Args[1:], os.Stdout, os.Stderr))
}
