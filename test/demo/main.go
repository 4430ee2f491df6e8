// Command demo is `make demo`: it starts the local stack, applies the try-it
// bundle from the user guide the way a user would, shows what was created,
// and shuts everything down. Each step says what it is doing.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/snapflow/snapflow/test/harness"
)

func main() {
	keep := flag.Bool("keep", false, "leave the stack running until interrupted and print its kubeconfig")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *keep); err != nil {
		fmt.Fprintf(os.Stderr, "\ndemo failed: %v\n", err)
		os.Exit(1)
	}
}

func step(format string, args ...any) {
	fmt.Printf("\n==> "+format+"\n", args...)
}

func run(ctx context.Context, keep bool) error {
	root, err := harness.RepoRoot()
	if err != nil {
		return err
	}
	step("starting the control plane (kube-apiserver and etcd from bin/) with snapflow's CRDs")
	start := time.Now()
	cp, err := harness.StartControlPlane(harness.Options{})
	if err != nil {
		return err
	}
	defer func() {
		step("stopping the control plane")
		if err := cp.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stop: %v\n", err)
		}
	}()
	fmt.Printf("    up in %s; kubeconfig: %s\n", time.Since(start).Round(100*time.Millisecond), cp.Kubeconfig)

	kubectl := func(wantOK bool, args ...string) (harness.KubectlResult, error) {
		fmt.Printf("    $ kubectl %s\n", strings.Join(args, " "))
		res, err := cp.Kubectl(ctx, nil, args...)
		if err != nil {
			return res, err
		}
		fmt.Print(indent(res.Stdout))
		if res.ExitCode != 0 {
			fmt.Print(indent(res.Stderr))
			if wantOK {
				return res, fmt.Errorf("kubectl %s exited %d", strings.Join(args, " "), res.ExitCode)
			}
		}
		return res, nil
	}

	bundle := filepath.Join(root, "config", "samples", "tryit", "backups.yaml")
	step("applying the try-it bundle (apply skips the generateName Snapshot by design)")
	res, err := kubectl(false, "apply", "-f", bundle)
	if err != nil {
		return err
	}
	if !strings.Contains(res.Stdout, "snapshotpolicy.kopiur.home-operations.com/app-data") {
		return fmt.Errorf("the SnapshotPolicy was not applied")
	}

	step("taking the backup: kubectl create mints the Snapshot")
	fmt.Printf("    $ kubectl create -f %s\n", bundle)
	res, err = cp.Kubectl(ctx, nil, "create", "-f", bundle)
	if err != nil {
		return err
	}
	fmt.Print(indent(res.Stdout))
	existing := strings.Count(res.Stderr, "AlreadyExists")
	if !strings.Contains(res.Stdout, "snapshot.kopiur.home-operations.com/app-data-manual-") || existing != strings.Count(res.Stderr, "\n") {
		fmt.Print(indent(res.Stderr))
		return fmt.Errorf("kubectl create did not mint exactly the Snapshot")
	}
	fmt.Printf("      (%d objects from the apply step already exist, as expected)\n", existing)
	fmt.Println("    No snapflow functions run in this demo yet, so the Snapshot stays Pending.")

	step("what is in the namespace")
	if _, err := kubectl(true, "-n", "kopiur-tryit", "get", "repositories,snapshotpolicies,snapshots"); err != nil {
		return err
	}
	if _, err := kubectl(true, "-n", "kopiur-tryit", "get", "pvc,secret,job"); err != nil {
		return err
	}

	if keep {
		step("the stack stays up; press Ctrl-C to stop it")
		fmt.Printf("    export KUBECONFIG=%s\n    %s get kopiur -A\n", cp.Kubeconfig, filepath.Join(root, "bin", "kubectl"))
		<-ctx.Done()
	}
	return nil
}

func indent(s string) string {
	if s == "" {
		return ""
	}
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return "      " + strings.Join(lines, "\n      ") + "\n"
}
