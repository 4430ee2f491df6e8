package cli

import "github.com/spf13/cobra"

// exitError ends a command with a chosen exit code and message.
type exitError struct {
	code int
	msg  string
}

func (e exitError) Error() string { return e.msg }
func (e exitError) ExitCode() int { return e.code }

// ExitUsage is the exit code of a usage or I/O error (a missing flag, a
// file that cannot be read) for the offline checks: validate, policy
// check and retention preview exit 1 for what they found wrong in the
// input, 2 when they could not look at it.
const ExitUsage = 2

// usageError marks err as a usage or I/O error.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }
func (e usageError) ExitCode() int { return ExitUsage }

// flagUsage makes a flag that does not parse a usage error.
func flagUsage(_ *cobra.Command, err error) error { return usage(err) }

func usage(err error) error {
	if err == nil {
		return nil
	}
	return usageError{err}
}
