// Command demo is `make demo`: it starts the local stack, applies the try-it
// bundle from the user guide the way a user would, shows what was created,
// and shuts everything down. Each step says what it is doing.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/kopia"
	"github.com/snapflow/snapflow/test/harness"
)

func main() {
	keep := flag.Bool("keep", false, "leave the stack running until interrupted and print its kubeconfig")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, *keep)
	stop()
	if err != nil {
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
	step("starting the control plane (kube-apiserver and etcd from bin/) with snapflow's, the CSI snapshot and KubeBlocks CRDs")
	start := time.Now()
	cp, err := harness.StartControlPlane(harness.Options{ExternalCRDs: []harness.ExternalCRDs{harness.SnapshotterCRDs, harness.KubeBlocksCRDs}})
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

	step("starting the admission webhook, registered for real")
	wh, err := cp.StartWebhook(harness.WebhookOptions{})
	if err != nil {
		return err
	}
	defer wh.Stop()

	step("starting the functions, the kube source and the local node")
	fmt.Println("    (the local node stands in for a kubelet and a CSI driver: it runs each Job's")
	fmt.Println("     real container command as a local process, PVCs mapped to directories)")
	// A settable clock, so a nightly schedule can fire now instead of tonight.
	clock := &harness.Clock{}
	fns, err := cp.StartFunctions(harness.FunctionsOptions{Clock: clock.Now})
	if err != nil {
		return err
	}
	defer fns.Stop()
	fmt.Printf("    functions at %s; logs in %s\n", fns.URL, fns.LogPath)

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

	step("waiting for the seed Job to write 20 files into the app-data PVC")
	if _, err := kubectl(true, "-n", "kopiur-tryit", "wait", "--for=condition=complete", "--timeout=120s", "job/seed-data"); err != nil {
		return err
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
	name := strings.TrimSpace(strings.TrimPrefix(strings.Fields(res.Stdout)[0], "snapshot.kopiur.home-operations.com/"))

	step("waiting for the backup: repository bootstrap, VolumeSnapshot staging, mover Job")
	if _, err := kubectl(true, "-n", "kopiur-tryit", "wait", "--for=jsonpath={.status.phase}=Succeeded", "--timeout=180s", "snapshot/"+name); err != nil {
		fmt.Print(indent(lastLines(fns.Log(), 30)))
		return err
	}
	if _, err := kubectl(true, "-n", "kopiur-tryit", "get", "snapshot", name, "-o",
		"custom-columns=NAME:.metadata.name,PHASE:.status.phase,KOPIA-SNAPSHOT:.status.snapshot.kopiaSnapshotID,FILES-NEW:.status.stats.filesNew,BYTES-NEW:.status.stats.bytesNew,SIZE:.status.stats.sizeBytes,SECONDS:.status.timing.durationSeconds"); err != nil {
		return err
	}

	step("reading the snapshot back from the repository with the kopia library")
	if err := showSnapshot(ctx, fns, name); err != nil {
		return err
	}

	step("restoring it into a new PVC: a Restore, applied as a user would")
	fmt.Print(indent(restoreManifest))
	if res, err := cp.Kubectl(ctx, []byte(restoreManifest), "apply", "-f", "-"); err != nil || res.ExitCode != 0 {
		return fmt.Errorf("apply the Restore: %v %s", err, res.Stderr)
	}
	if _, err := kubectl(true, "-n", "kopiur-tryit", "wait", "--for=jsonpath={.status.phase}=Completed", "--timeout=120s", "kopiarestore/app-data-back"); err != nil {
		fmt.Print(indent(lastLines(fns.Log(), 30)))
		return err
	}
	if _, err := kubectl(true, "-n", "kopiur-tryit", "get", "kopiarestore", "app-data-back", "-o",
		"custom-columns=NAME:.metadata.name,PHASE:.status.phase,SOURCE:.status.sourceKind,SNAPSHOT:.status.resolved.snapshotRef.name,KOPIA-SNAPSHOT:.status.resolved.kopiaSnapshotID,FILES:.status.progress.filesRestored,BYTES:.status.progress.bytesRestored"); err != nil {
		return err
	}
	same, err := sameFiles(fns.Node.PVCDir("kopiur-tryit", "app-data"), fns.Node.PVCDir("kopiur-tryit", "app-data-restored"))
	if err != nil {
		return err
	}
	fmt.Printf("    the app-data-restored PVC holds %d files, each identical to app-data\n", same)

	step("a nightly schedule fires (the functions' clock jumps to its slot) and retention prunes")
	fmt.Print(indent(scheduleManifest))
	if res, err := cp.Kubectl(ctx, []byte(scheduleManifest), "apply", "-f", "-"); err != nil || res.ExitCode != 0 {
		return fmt.Errorf("apply the schedule: %v %s", err, res.Stderr)
	}
	if _, err := kubectl(true, "-n", "kopiur-tryit", "wait", "--for=jsonpath={.status.nextSchedule.at}", "--timeout=60s", "snapshotschedule/nightly"); err != nil {
		return err
	}
	next, err := cp.Kubectl(ctx, nil, "-n", "kopiur-tryit", "get", "snapshotschedule", "nightly", "-o", "jsonpath={.status.nextSchedule.at}")
	if err != nil {
		return err
	}
	slot, err := time.Parse(time.RFC3339, strings.TrimSpace(next.Stdout))
	if err != nil {
		return fmt.Errorf("read the pinned next slot: %w", err)
	}
	fmt.Printf("    next slot pinned in status: %s; moving the clock there and sending a PingSource tick\n", slot.Format(time.RFC3339))
	clock.Set(slot.Add(time.Second))
	if err := tick(ctx, fns); err != nil {
		return err
	}
	clock.Set(time.Time{})
	if _, err := kubectl(true, "-n", "kopiur-tryit", "wait", "--for=jsonpath={.status.phase}=Succeeded", "--timeout=120s", "snapshot", "-l", wellknown.LabelSchedule+"=nightly"); err != nil {
		fmt.Print(indent(lastLines(fns.Log(), 30)))
		return err
	}
	// Both backups are from today; keepDaily keeps the newest of a day, so
	// retention prunes the manual one (its kopia data follows through the
	// cleanup function).
	deadline := time.Now().Add(90 * time.Second)
	for {
		res, err := cp.Kubectl(ctx, nil, "-n", "kopiur-tryit", "get", "snapshot", name, "--ignore-not-found", "-o", "name")
		if err != nil {
			return err
		}
		if strings.TrimSpace(res.Stdout) == "" {
			break
		}
		if time.Now().After(deadline) {
			fmt.Print(indent(lastLines(fns.Log(), 30)))
			return fmt.Errorf("retention did not prune %s", name)
		}
		time.Sleep(500 * time.Millisecond)
	}
	fmt.Printf("    %s was pruned by retention (keepDaily keeps the newest backup of a day)\n", name)
	if _, err := kubectl(true, "-n", "kopiur-tryit", "get", "snapshotschedules,snapshots"); err != nil {
		return err
	}

	step("orphan pruning: a KubeBlocks BackupRepo whose bucket (on versitygw) holds data no Backup owns")
	gw, err := harness.StartS3(harness.S3Options{})
	if err != nil {
		return err
	}
	defer gw.Stop()
	if err := seedKubeBlocks(ctx, cp, gw); err != nil {
		return fmt.Errorf("seed the KubeBlocks bucket: %w", err)
	}
	fmt.Println("    seeded: a live backup (its Backup CR exists), an orphaned one (no CR), one written today,")
	fmt.Println("    and a volume root no PVC or PV of this cluster owns; plan only lists, it never deletes")
	if err := prunePlan(ctx, cp); err != nil {
		return err
	}

	step("what is in the namespace")
	if _, err := kubectl(true, "-n", "kopiur-tryit", "get", "repositories,snapshotpolicies,snapshots"); err != nil {
		return err
	}
	if _, err := kubectl(true, "-n", "kopiur-tryit", "get", "pvc,job"); err != nil {
		return err
	}
	if _, err := kubectl(true, "-n", "kopiur-tryit", "get", "events", "--field-selector", "involvedObject.kind=Snapshot"); err != nil {
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

// showSnapshot lists what the backup holds, read with the kopia library from
// the repository directory the mover wrote.
func showSnapshot(ctx context.Context, fns *harness.Functions, name string) error {
	repoDir := filepath.Join(fns.Node.PVCDir("kopiur-tryit", "kopia-repo"), "repository")
	r, err := kopia.Open(ctx, kopia.OpenOptions{Backend: kopia.Backend{Filesystem: &kopia.FilesystemBackend{Path: repoDir}}, Password: "REPLACE_ME", ReadOnly: true})
	if err != nil {
		return err
	}
	defer r.Close(ctx)
	list, err := r.List(ctx, nil)
	if err != nil {
		return err
	}
	for _, s := range list {
		fmt.Printf("    %s  %s@%s:%s  policy=%s  %d files, %d bytes  (%s)\n", s.ID, s.Source.Username, s.Source.Hostname, s.Source.Path, s.PolicyName, s.Files, s.SizeBytes, s.Description)
	}
	if len(list) == 0 {
		return fmt.Errorf("the repository holds no snapshot")
	}
	out, err := os.MkdirTemp("", "snapflow-demo-restore-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(out)
	st, err := r.Restore(ctx, list[len(list)-1].ID, out, kopia.RestoreOptions{})
	if err != nil {
		return err
	}
	src := fns.Node.PVCDir("kopiur-tryit", "app-data")
	same, err := sameFiles(src, out)
	if err != nil {
		return err
	}
	fmt.Printf("    restored %d files (%d bytes) into a scratch directory: %d of them match the app-data PVC byte for byte\n", st.Files, st.Bytes, same)
	if int64(same) != st.Files {
		return fmt.Errorf("restored data differs from the source")
	}
	return nil
}

func sameFiles(src, restored string) (int, error) {
	n := 0
	err := filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		a, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(filepath.Join(restored, rel))
		if err != nil {
			return fmt.Errorf("%s missing from the restore: %w", rel, err)
		}
		if !bytes.Equal(a, b) {
			return fmt.Errorf("%s differs after restore", rel)
		}
		n++
		return nil
	})
	return n, err
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
