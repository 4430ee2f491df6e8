package harness

import (
	"flag"
	"fmt"
	"os"
	"testing"
)

// Env is everything one test binary shares: the control plane and, when
// asked for, an S3 server.
type Env struct {
	*ControlPlane
	S3        *S3
	Webhook   *Webhook
	Functions *Functions
}

// MainOptions selects what Main starts.
type MainOptions struct {
	Options
	S3 *S3Options
	// Webhook starts snapflow's admission webhook, registered for real.
	Webhook *WebhookOptions
	// Functions starts the local node, the functions and the kube source.
	Functions *FunctionsOptions
	// AfterAll runs once every test of a whole-package run has passed
	// (not with -run or -skip, which leave paths unexercised); an error
	// fails the run.
	AfterAll func(*Env) error
}

// Main is a TestMain body: it starts the shared environment once per test
// binary (starting it per test would cost seconds each), runs the tests,
// and tears everything down whether they passed or not.
func Main(m *testing.M, opts MainOptions, use func(*Env)) {
	os.Exit(run(m, opts, use))
}

func run(m *testing.M, opts MainOptions, use func(*Env)) int {
	cp, err := StartControlPlane(opts.Options)
	if err != nil {
		fmt.Fprintf(os.Stderr, "harness: %v\n", err)
		return 1
	}
	env := &Env{ControlPlane: cp}
	defer func() {
		if env.Functions != nil {
			env.Functions.Stop()
		}
		if env.Webhook != nil {
			env.Webhook.Stop()
		}
		if env.S3 != nil {
			if err := env.S3.Stop(); err != nil {
				fmt.Fprintf(os.Stderr, "harness: stop s3: %v\n", err)
			}
		}
		if err := cp.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "harness: stop control plane: %v\n", err)
		}
	}()
	if opts.S3 != nil {
		s3, err := StartS3(*opts.S3)
		if err != nil {
			fmt.Fprintf(os.Stderr, "harness: %v\n", err)
			return 1
		}
		env.S3 = s3
	}
	if opts.Webhook != nil {
		wh, err := cp.StartWebhook(*opts.Webhook)
		if err != nil {
			fmt.Fprintf(os.Stderr, "harness: %v\n", err)
			return 1
		}
		env.Webhook = wh
	}
	if opts.Functions != nil {
		fns, err := cp.StartFunctions(*opts.Functions)
		if err != nil {
			fmt.Fprintf(os.Stderr, "harness: %v\n", err)
			return 1
		}
		env.Functions = fns
	}
	use(env)
	code := m.Run()
	if code == 0 && opts.AfterAll != nil && wholePackage() {
		if err := opts.AfterAll(env); err != nil {
			fmt.Fprintf(os.Stderr, "harness: after all tests: %v\n", err)
			code = 1
		}
	}
	if code != 0 && env.Functions != nil {
		fmt.Fprintf(os.Stderr, "functions log:\n%s\n", env.Functions.Log())
	}
	if code != 0 && env.Webhook != nil {
		fmt.Fprintf(os.Stderr, "webhook log:\n%s\n", env.Webhook.Log())
	}
	return code
}

// wholePackage reports whether this run selects every test.
func wholePackage() bool {
	for _, name := range []string{"test.run", "test.skip"} {
		if f := flag.Lookup(name); f != nil && f.Value.String() != "" {
			return false
		}
	}
	return true
}
