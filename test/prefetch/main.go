// Command prefetch downloads the modules whose CRDs the e2e tests install
// into the Go module cache, so the first test run does not pay for the
// download inside a test timeout.
package main

import (
	"fmt"
	"os"

	"github.com/snapflow/snapflow/test/harness"
)

func main() {
	for _, ext := range harness.AllExternalCRDs {
		if _, err := ext.Paths(); err != nil {
			fmt.Fprintln(os.Stderr, "prefetch:", err)
			os.Exit(1)
		}
	}
}
