// Command snapflow is the single binary of snapflow: admission webhook,
// functions, mover, and the operator CLI, one subcommand each.
package main

import (
	"os"

	// The image holds the binary and nothing else: no zoneinfo, no CA
	// bundle. Schedules and policies name IANA time zones, and S3 and hooks
	// speak TLS to public endpoints, so both come with the binary; a
	// system's own zoneinfo and CA bundle still win where there is one.
	_ "time/tzdata"

	_ "golang.org/x/crypto/x509roots/fallback"

	"github.com/snapflow/snapflow/cli"
)

func main() {
	os.Exit(cli.Execute(os.Args[1:], os.Stdout, os.Stderr))
}
