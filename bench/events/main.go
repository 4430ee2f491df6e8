// Command events measures the event path on a real kube-apiserver (envtest,
// from bin/): the cold start of each function binary until it has handled
// its first event, and the end-to-end latency from creating a Snapshot to
// its mover Job existing (webhook, kube source, snapshot function). Results
// go into docs/benchmarks.md.
package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/bench/internal/report"
	"github.com/snapflow/snapflow/events"
	"github.com/snapflow/snapflow/test/harness"
)

var functions = []string{"snapshot", "cleanup", "retention", "schedule", "restore", "verify"}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run() error {
	cp, err := harness.StartControlPlane(harness.Options{ExternalCRDs: []harness.ExternalCRDs{harness.SnapshotterCRDs}})
	if err != nil {
		return err
	}
	defer cp.Stop()
	bin, err := harness.Tool("snapflow")
	if err != nil {
		return err
	}
	var rows []string
	var worst time.Duration
	for _, fn := range functions {
		var runs []time.Duration
		for i := 0; i < 5; i++ {
			d, err := coldStart(bin, cp.Kubeconfig, fn)
			if err != nil {
				return fmt.Errorf("%s: %w", fn, err)
			}
			runs = append(runs, d)
		}
		m := median(runs)
		worst = max(worst, m)
		rows = append(rows, fmt.Sprintf("| %s | %s |", fn, m.Round(time.Millisecond)))
		fmt.Printf("cold start %-9s %s\n", fn, m.Round(time.Millisecond))
	}

	latency, err := createToJob(cp)
	if err != nil {
		return err
	}
	lat := median(latency)
	fmt.Printf("create Snapshot → mover Job: median %s over %d\n", lat.Round(time.Millisecond), len(latency))

	body := fmt.Sprintf("## Event path\n\n`go run ./bench/events` on %s, %d cores, %s, against a real kube-apiserver (envtest).\n\n"+
		"Cold start: `snapflow function NAME` started as a process until its first CloudEvent (a resync, which lists what the function owns) is answered 2xx; median of 5 starts.\n\n"+
		"| function | cold start to first handled event |\n|---|---|\n%s\n\n"+
		"End to end: `Create` of a Snapshot (through the admission webhook) until its mover Job exists, with the kube source watching and posting to the snapshot function over HTTP; median of %d Snapshots: **%s**.\n\n"+
		"Targets: cold start under 150 ms — %s (slowest median %s); Snapshot to Job under 1 s — %s.\n",
		time.Now().UTC().Format("2006-01-02"), runtime.NumCPU(), runtime.Version(), strings.Join(rows, "\n"), len(latency), lat.Round(time.Millisecond),
		report.Verdict(worst < 150*time.Millisecond), worst.Round(time.Millisecond), report.Verdict(lat < time.Second))
	fmt.Print(body)
	return report.WriteSection("docs/benchmarks.md", "events", body)
}

// coldStart starts one function process and times it to its first 2xx.
func coldStart(bin, kubeconfig, fn string) (time.Duration, error) {
	port, err := harness.FreePort()
	if err != nil {
		return 0, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	e := cloudevents.NewEvent()
	e.SetID("bench")
	e.SetType(events.Resync)
	e.SetSource("bench")
	body, _ := e.MarshalJSON()
	start := time.Now()
	cmd := exec.Command(bin, "--kubeconfig", kubeconfig, "function", fn, "--addr", addr, "--namespace", harness.WebhookNamespace)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	hc := &http.Client{Timeout: time.Second}
	for time.Since(start) < 10*time.Second {
		resp, err := hc.Post("http://"+addr+"/", "application/cloudevents+json", bytes.NewReader(body))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode/100 == 2 {
				return time.Since(start), nil
			}
			return 0, fmt.Errorf("answered %s\n%s", resp.Status, out.String())
		}
		time.Sleep(2 * time.Millisecond)
	}
	return 0, fmt.Errorf("no answer within 10s\n%s", out.String())
}

// createToJob times Snapshot creation to mover Job existence.
func createToJob(cp *harness.ControlPlane) ([]time.Duration, error) {
	ctx := context.Background()
	wh, err := cp.StartWebhook(harness.WebhookOptions{})
	if err != nil {
		return nil, err
	}
	defer wh.Stop()
	fns, err := cp.StartFunctions(harness.FunctionsOptions{})
	if err != nil {
		return nil, err
	}
	defer fns.Stop()
	const ns = "bench"
	setup := `
apiVersion: v1
kind: Namespace
metadata: {name: bench}
---
apiVersion: v1
kind: Secret
metadata: {name: pw, namespace: bench}
stringData: {KOPIA_PASSWORD: bench-password}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: repo, namespace: bench}
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data, namespace: bench}
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
---
apiVersion: kopiur.home-operations.com/v1alpha1
kind: Repository
metadata: {name: primary, namespace: bench}
spec:
  backend: {filesystem: {path: /repository, volume: {pvc: {name: repo}}}}
  encryption: {passwordSecretRef: {name: pw, key: KOPIA_PASSWORD}}
  create: {enabled: true}
---
apiVersion: kopiur.home-operations.com/v1alpha1
kind: SnapshotPolicy
metadata: {name: app, namespace: bench}
spec:
  repository: {name: primary}
  copyMethod: Direct
  sources: [{pvc: {name: data}}]
`
	if res, err := cp.Kubectl(ctx, []byte(setup), "apply", "-f", "-"); err != nil || res.ExitCode != 0 {
		return nil, fmt.Errorf("setup: %v %s", err, res.Stderr)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var r snapv1.Repository
		if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "primary"}, &r); err == nil && r.Status.Phase == snapv1.RepositoryReady {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the repository never became Ready")
		}
		time.Sleep(100 * time.Millisecond)
	}
	var out []time.Duration
	for i := 0; i < 10; i++ {
		s := &snapv1.Snapshot{}
		s.Namespace, s.Name = ns, fmt.Sprintf("s-%02d", i)
		s.Spec.PolicyRef = &snapv1.PolicyRef{Name: "app"}
		start := time.Now()
		if err := cp.Client.Create(ctx, s); err != nil {
			return nil, err
		}
		for {
			var jobs batchv1.JobList
			if err := cp.Client.List(ctx, &jobs, client.InNamespace(ns), client.MatchingLabels{wellknown.LabelSnapshot: s.Name}); err != nil {
				return nil, err
			}
			if len(jobs.Items) > 0 {
				out = append(out, time.Since(start))
				break
			}
			if time.Since(start) > 30*time.Second {
				return nil, fmt.Errorf("no mover Job for %s after 30s", s.Name)
			}
			time.Sleep(5 * time.Millisecond)
		}
		// Let the run finish so the next one is not parked behind it.
		time.Sleep(1500 * time.Millisecond)
	}
	return out, nil
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}
