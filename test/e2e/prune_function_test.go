package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cloudevents/sdk-go/v2/event"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/snapflow/snapflow/events"
	"github.com/snapflow/snapflow/functions/host"
	prunefn "github.com/snapflow/snapflow/functions/prune"
	"github.com/snapflow/snapflow/internal/prune"
	"github.com/snapflow/snapflow/internal/prune/execute"
	"github.com/snapflow/snapflow/internal/prune/kubeinv"
	"github.com/snapflow/snapflow/test/harness"
)

// collected gathers what an in-process prune function emits.
type collected struct {
	mu sync.Mutex
	es []event.Event
}

func (c *collected) Emit(_ context.Context, e event.Event) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.es = append(c.es, e.Clone())
	return nil
}

// planned returns the data of every prune planned event so far.
func (c *collected) planned(t *testing.T) []events.PrunePlan {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []events.PrunePlan
	for _, e := range c.es {
		if e.Type() == events.PrunePlanned {
			var d events.PrunePlan
			if err := e.DataAs(&d); err != nil {
				t.Fatal(err)
			}
			out = append(out, d)
		}
	}
	return out
}

// executed returns the data of the last prune executed event.
func (c *collected) executed(t *testing.T) (events.PruneExecution, bool) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := len(c.es) - 1; i >= 0; i-- {
		if c.es[i].Type() == events.PruneExecuted {
			var d events.PruneExecution
			if err := c.es[i].DataAs(&d); err != nil {
				t.Fatal(err)
			}
			return d, true
		}
	}
	return events.PruneExecution{}, false
}

// useGateway moves the world's bucket to another S3 endpoint: the bucket is
// created there, the repo's credential Secret names the endpoint, and the
// test's client writes through it.
func (w *pruneWorld) useGateway(endpoint string) {
	w.t.Helper()
	w.s3 = s3.New(s3.Options{Region: env.S3.Region, BaseEndpoint: aws.String(endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(env.S3.AccessKey, env.S3.SecretKey, "")})
	if _, err := w.s3.CreateBucket(w.ctx, &s3.CreateBucketInput{Bucket: aws.String(w.bucket)}); err != nil {
		w.t.Fatal(err)
	}
	var sec corev1.Secret
	if err := env.Client.Get(w.ctx, client.ObjectKey{Namespace: w.ns, Name: pruneSecret}, &sec); err != nil {
		w.t.Fatal(err)
	}
	sec.Data["endpoint"] = []byte(endpoint)
	if err := env.Client.Update(w.ctx, &sec); err != nil {
		w.t.Fatal(err)
	}
}

// putOn writes one object through the world's client; old ones are
// back-dated in dataDir, the gateway's data directory.
func (w *pruneWorld) putOn(dataDir, key, body string, old bool) {
	w.t.Helper()
	if _, err := w.s3.PutObject(w.ctx, &s3.PutObjectInput{Bucket: aws.String(w.bucket), Key: aws.String(key), Body: strings.NewReader(body)}); err != nil {
		w.t.Fatal(err)
	}
	if old {
		if err := os.Chtimes(filepath.Join(dataDir, w.bucket, key), w.old, w.old); err != nil {
			w.t.Fatal(err)
		}
	}
}

// manifest is the KubeBlocks manifest seedBackup writes for name.
func (w *pruneWorld) manifest(name, policy string) string {
	m, _ := json.Marshal(map[string]any{
		"apiVersion": prune.ManifestAPIVersion, "kind": "Backup",
		"metadata": map[string]any{"name": name, "namespace": w.ns, "uid": "uid-" + name, "creationTimestamp": w.old.Format(time.RFC3339),
			"labels": map[string]any{prune.LabelClusterUID: w.clusterUID}},
		"spec":   map[string]any{"deletionPolicy": policy},
		"status": map[string]any{"path": "/" + strings.TrimPrefix(w.backupDir(name), w.R+"/"), "backupRepoName": w.repo},
	})
	return string(m)
}

// servePruneFunction serves a prune function on a loopback port and
// returns its URL.
func servePruneFunction(t *testing.T, fn *prunefn.Function) string {
	t.Helper()
	// It acts as the chart's prune ServiceAccount, as in a cluster.
	fn.Client = env.Functions.As("prune")
	ctx, cancel := context.WithCancel(context.Background())
	listening := make(chan string, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = host.Serve(ctx, host.Options{Addr: "127.0.0.1:0", Listening: listening, Log: logr.Discard(),
			Functions: []host.Function{{Name: "prune", Handle: fn.Handle}}})
	}()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case addr := <-listening:
		return "http://" + addr + "/"
	case <-time.After(harness.Timeout(10 * time.Second)):
		t.Fatal("the prune function did not start")
	}
	return ""
}

// startS3Source runs `snapflow source s3` forwarding to sink.
func startS3Source(t *testing.T, sink string, extra ...string) string {
	t.Helper()
	bin, err := harness.Tool("snapflow")
	if err != nil {
		t.Fatal(err)
	}
	port, err := harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	cmd := exec.Command(bin, append([]string{"source", "s3", "--addr", addr, "--sink", sink, "--dev-logs"}, extra...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("s3 source log:\n%s", out.String())
		}
	})
	base := "http://" + addr
	eventually(t, func() error {
		resp, err := http.Get(base + "/healthz")
		if err != nil {
			return fmt.Errorf("s3 source not up: %w", err)
		}
		resp.Body.Close()
		return nil
	})
	return base + "/"
}

// webhookTap records what versitygw POSTs and the status the source
// answered, passing every request on.
type webhookTap struct {
	mu       sync.Mutex
	bodies   [][]byte
	statuses []int
}

func (tap *webhookTap) serve(t *testing.T, next string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		// versitygw gives up after a few seconds; the forward finishes
		// regardless, so the function sees every notification.
		resp, err := http.Post(next, r.Header.Get("Content-Type"), bytes.NewReader(body))
		status := http.StatusBadGateway
		if err == nil {
			status = resp.StatusCode
			resp.Body.Close()
		}
		tap.mu.Lock()
		tap.bodies, tap.statuses = append(tap.bodies, body), append(tap.statuses, status)
		tap.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/"
}

// await returns once a notification naming key has been forwarded.
func (tap *webhookTap) await(t *testing.T, key string) {
	t.Helper()
	eventually(t, func() error {
		bodies, _ := tap.snapshot()
		for _, b := range bodies {
			if bytes.Contains(b, []byte(`"key":"`+key+`"`)) {
				return nil
			}
		}
		return fmt.Errorf("no notification of %s yet", key)
	})
}

func (tap *webhookTap) snapshot() ([][]byte, []int) {
	tap.mu.Lock()
	defer tap.mu.Unlock()
	return slices.Clone(tap.bodies), slices.Clone(tap.statuses)
}

// TestPruneFunctionReplansTheNotifiedRoot: versitygw's real notifications
// go through `snapflow source s3` to the prune function, which re-plans
// only the pvc root each one touched and ignores other buckets and
// non-root keys; the deletion of a root's last object is acknowledged
// without a plan.
func TestPruneFunctionReplansTheNotifiedRoot(t *testing.T) {
	w := newPruneWorld(t, false, "")
	got := &collected{}
	fnURL := servePruneFunction(t, &prunefn.Function{Client: env.Client, Emitter: got,
		Settings: prunefn.Settings{Settings: execute.Settings{BackupRepo: w.repo, PathStyle: true}}})
	tap := &webhookTap{}
	hook := tap.serve(t, startS3Source(t, fnURL))
	gw, err := harness.StartS3(harness.S3Options{EventWebhookURL: hook})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gw.Stop() })
	w.useGateway(gw.URL)

	other := "other-" + w.bucket
	otherRoot := "pvc-" + randomUUID(t)
	if _, err := w.s3.CreateBucket(w.ctx, &s3.CreateBucketInput{Bucket: aws.String(other)}); err != nil {
		t.Fatal(err)
	}
	// One write at a time, each notification in before the next write:
	// versitygw (v1.8.0, s3event) builds a record from strings that alias
	// its HTTP server's request buffers and marshals it in a goroutine
	// after the request has ended, so a write right behind another once
	// gave a record mixing the two (bucket "<bucket>/unrel", the other
	// bucket's key), which the source rightly refused with 400.
	if _, err := w.s3.PutObject(w.ctx, &s3.PutObjectInput{Bucket: aws.String(other), Key: aws.String(otherRoot + "/x"), Body: strings.NewReader("x")}); err != nil {
		t.Fatal(err)
	}
	tap.await(t, otherRoot+"/x")
	for _, put := range [][2]string{{"unrelated/x", "not a pvc root"}, {w.U + "/file", "user data"}, {w.O + "/ns/c/data", "unowned"}} {
		w.putOn(gw.DataDir, put[0], put[1], false)
		tap.await(t, put[0])
	}

	byPrefix := func() map[string]events.PrunePlan {
		out := map[string]events.PrunePlan{}
		for _, d := range got.planned(t) {
			out[d.Prefix] = d
		}
		return out
	}
	eventually(t, func() error {
		if p := byPrefix(); len(p) < 2 {
			return fmt.Errorf("planned prefixes so far: %v", p)
		}
		return nil
	})
	time.Sleep(time.Second) // let any stray notification arrive
	plans := byPrefix()
	o, u := plans[w.O], plans[w.U]
	if len(plans) != 2 || o.Trigger != events.PruneTriggerS3 || o.Mode != "plan" || o.BackupRepo != w.repo || o.Bucket != w.bucket ||
		o.ScannedObjects != 1 || len(o.Candidates) != 1 || o.Candidates[0].Prefix != w.O || o.Candidates[0].State != string(prune.StateTooYoung) {
		t.Fatalf("plans %+v", plans)
	}
	if u.ScannedObjects != 0 || u.StateCounts[string(prune.StateProtected)] != 1 {
		t.Fatalf("plan of the user root: %+v", u)
	}

	// The bodies are versitygw's own: the test event first, then records
	// the decoder reads like the recorded ones in events/testdata.
	bodies, _ := tap.snapshot()
	if n, err := events.DecodeS3Notification(bodies[0]); err != nil || !n.Test {
		t.Fatalf("first body %s: %+v %v", bodies[0], n, err)
	}
	found := false
	for _, b := range bodies[1:] {
		n, err := events.DecodeS3Notification(b)
		if err != nil {
			t.Fatalf("decode %s: %v", b, err)
		}
		for _, r := range n.Records {
			if r.Key == w.O+"/ns/c/data" {
				found = r.Bucket == w.bucket && r.EventName == "ObjectCreated:Put" && r.Size == int64(len("unowned")) && r.ETag != "" && r.Sequencer != ""
			}
		}
	}
	if !found {
		t.Fatalf("no notification of %s/ns/c/data in %d bodies", w.O, len(bodies))
	}

	// Removing the root's only object: the notification arrives, the root
	// is gone, and the function acknowledges it without a plan.
	if _, err := w.s3.DeleteObject(w.ctx, &s3.DeleteObjectInput{Bucket: aws.String(w.bucket), Key: aws.String(w.O + "/ns/c/data")}); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() error {
		bodies, _ := tap.snapshot()
		for _, b := range bodies {
			if bytes.Contains(b, []byte("ObjectRemoved")) {
				return nil
			}
		}
		return fmt.Errorf("no removal notification yet")
	})
	time.Sleep(500 * time.Millisecond)
	if bodies, statuses := tap.snapshot(); slices.ContainsFunc(statuses, func(s int) bool { return s != http.StatusOK }) {
		var refused []string
		for i, s := range statuses {
			if s != http.StatusOK {
				refused = append(refused, fmt.Sprintf("%d for %s", s, bodies[i]))
			}
		}
		t.Fatalf("the source answered %v: %s", statuses, strings.Join(refused, "; "))
	}
	if n := len(got.planned(t)); n != 2 {
		t.Fatalf("%d plans after the removal, want still 2", n)
	}
}

// sendPruneRequest POSTs a prune requested event and returns the status.
func sendPruneRequest(t *testing.T, target, id string, req events.PruneRequest) int {
	t.Helper()
	c, err := cloudevents.NewClientHTTP(cehttp.WithHeader("Authorization", "Bearer "+senderToken(t)))
	if err != nil {
		t.Fatal(err)
	}
	e := cloudevents.NewEvent()
	e.SetID(id)
	e.SetType(events.PruneRequested)
	e.SetSource("e2e")
	if err := e.SetData(cloudevents.ApplicationJSON, req); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), harness.Timeout(2*time.Minute))
	defer cancel()
	res := c.Send(cloudevents.ContextWithTarget(ctx, target), e)
	var hr *cehttp.Result
	if !cloudevents.ResultAs(res, &hr) {
		t.Fatalf("send: %v", res)
	}
	return hr.StatusCode
}

// TestPruneFunctionRequest: a prune requested event over HTTP plans and
// dry-runs on any deployment, but cannot delete on one that is not
// configured for live prunes, cannot confirm, and cannot widen the scope
// (the bucket is untouched each time); a deployment configured with its
// own word deletes the orphans on dryRun false, and a duplicate delivery
// deletes nothing more.
func TestPruneFunctionRequest(t *testing.T) {
	w := newPruneWorld(t, false, "")
	w.seedBackup("b-live", "Delete", true)
	w.liveBackup("b-live")
	w.seedBackup("b-orphan", "Delete", true)
	w.put(w.O+"/ns/c/data", "unowned", true)
	w.put(w.U+"/file", "user data", true)
	target := env.Functions.Base + "/prune"
	before := w.keys()

	// The shared function has no word of its own: nothing a sender puts in
	// the event makes it delete.
	forged := map[string]events.PruneRequest{
		"no-word":    {BackupRepo: w.repo, DryRun: aws.Bool(false)},
		"with-word":  {BackupRepo: w.repo, DryRun: aws.Bool(false), Confirm: prune.ConfirmDelete},
		"lower-age":  {BackupRepo: w.repo, MinAge: "0"},
		"widen":      {BackupRepo: w.repo, IncludeRetained: aws.Bool(true), DeleteRepositoryStray: aws.Bool(true)},
		"purge-vers": {BackupRepo: w.repo, PurgeVersions: aws.Bool(true)},
	}
	for name, req := range forged {
		if code := sendPruneRequest(t, target, name+"-"+w.repo, req); code != http.StatusBadRequest {
			t.Fatalf("forged request %s: status %d, want 400", name, code)
		}
	}
	if !slices.Equal(w.keys(), before) {
		t.Fatalf("a refused request changed the bucket: %v, was %v", w.keys(), before)
	}
	if code := sendPruneRequest(t, target, "dry-"+w.repo, events.PruneRequest{BackupRepo: w.repo}); code != http.StatusOK {
		t.Fatalf("dry run: status %d", code)
	}
	dry := executedOf(t, w.repo)
	if !dry.DryRun || dry.DeletedCandidates != 2 || !slices.Equal(w.keys(), before) {
		t.Fatalf("dry run %+v", dry)
	}
	eventually(t, func() error {
		var list corev1.EventList
		if err := env.Client.List(w.ctx, &list, client.InNamespace("default")); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.InvolvedObject.Kind == "BackupRepo" && e.InvolvedObject.Name == w.repo && e.Reason == "PruneDryRun" {
				return nil
			}
		}
		return fmt.Errorf("no PruneDryRun Event on BackupRepo %s", w.repo)
	})
	// The function records the run for the exporter: clean.
	// (A request is a dry run: a prune, as the guards see it.)
	blocked := series("snapflow_prune_blocked", "backuprepo", w.repo, "kind", "prune")
	exported(t, map[string]float64{blocked: 0}, series("snapflow_prune_last_run_timestamp_seconds", "backuprepo", w.repo, "kind", "prune", "outcome", "DryRun"))

	// A deployment configured for live prunes of this repo.
	got := &collected{}
	live := servePruneFunction(t, &prunefn.Function{Client: env.Client, Emitter: got,
		Settings: prunefn.Settings{Settings: execute.Settings{BackupRepo: w.repo, PathStyle: true}, Confirm: prune.ConfirmDelete}})
	if code := sendPruneRequest(t, live, "confirm-"+w.repo, events.PruneRequest{DryRun: aws.Bool(false), Confirm: prune.ConfirmDelete}); code != http.StatusBadRequest {
		t.Fatalf("a request carrying a word: status %d, want 400", code)
	}
	id := "delete-" + w.repo
	req := events.PruneRequest{DryRun: aws.Bool(false)}
	if code := sendPruneRequest(t, live, id, req); code != http.StatusOK {
		t.Fatalf("prune: status %d", code)
	}
	ex, ok := got.executed(t)
	if !ok || ex.DryRun || ex.DeletedCandidates != 2 || ex.FailedCandidates != 0 || ex.DeletedObjects != 3 || ex.Error != "" {
		t.Fatalf("execution %+v", ex)
	}
	after := w.keys()
	for _, k := range before {
		gone := strings.HasPrefix(k, w.O+"/") || strings.HasPrefix(k, w.backupDir("b-orphan")+"/")
		if slices.Contains(after, k) == gone {
			t.Errorf("%s: present %t", k, !gone)
		}
	}

	// The broker delivers the same event again: nothing is left to delete.
	if code := sendPruneRequest(t, live, id, req); code != http.StatusOK {
		t.Fatalf("redelivery: status %d", code)
	}
	if again, _ := got.executed(t); again.DeletedCandidates != 0 || again.FailedCandidates != 0 || again.Error != "" {
		t.Fatalf("redelivery %+v", again)
	}
	if !slices.Equal(w.keys(), after) {
		t.Fatalf("the redelivery changed the bucket: %v, was %v", w.keys(), after)
	}

	// An active restore whose backup reference is incomplete blocks the
	// next plan: the record, and so the alert's series, says so.
	w.create(kb(kubeinv.GVKRestore, w.ns, "restore-incomplete", map[string]any{"spec": map[string]any{
		"backup": map[string]any{"name": "b-live", "namespace": ""}}}))
	if code := sendPruneRequest(t, target, "blocked-"+w.repo, events.PruneRequest{BackupRepo: w.repo}); code != http.StatusOK {
		t.Fatalf("blocked plan: status %d", code)
	}
	exported(t, map[string]float64{blocked: 1}, series("snapflow_prune_last_run_timestamp_seconds", "backuprepo", w.repo, "kind", "prune", "outcome", "Blocked"))
}

// executedOf is the last prune executed event the harness functions
// emitted for repo.
func executedOf(t *testing.T, repo string) events.PruneExecution {
	t.Helper()
	e, ok := env.Functions.Emitted.Find(events.PruneExecuted, repo)
	if !ok {
		t.Fatalf("no %s event for %s: %v", events.PruneExecuted, repo, env.Functions.Emitted.Types())
	}
	var d events.PruneExecution
	if err := json.Unmarshal(e.Data(), &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// flakyGateway is a reverse proxy in front of versitygw that stops the
// gateway right after it has answered stopAfter Multi-Object Deletes, and
// answers 502 until restarted: versitygw going away in the middle of a
// prune.
type flakyGateway struct {
	t         *testing.T
	mu        sync.Mutex
	gw        *harness.S3
	down      bool
	deletes   int
	stopAfter int
}

func (f *flakyGateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	gw, down := f.gw, f.down
	f.mu.Unlock()
	if down {
		http.Error(w, "gateway restarting", http.StatusBadGateway)
		return
	}
	target, _ := url.Parse(gw.URL)
	// The Host header stays the proxy's: the client signed it.
	(&httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(target); pr.Out.Host = pr.In.Host }}).ServeHTTP(w, r)
	if r.Method != http.MethodPost || !r.URL.Query().Has("delete") {
		return
	}
	f.mu.Lock()
	f.deletes++
	stop := f.deletes == f.stopAfter
	if stop {
		f.down = true
	}
	f.mu.Unlock()
	if stop {
		if err := gw.Stop(); err != nil {
			f.t.Errorf("stop versitygw: %v", err)
		}
	}
}

func (f *flakyGateway) restart(gw *harness.S3) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gw, f.down = gw, false
}

// TestPruneFunctionConvergesAfterGatewayRestart: versitygw stops after the
// second of four orphan roots is deleted; the prune executed event records
// two deleted and two failed candidates and the function asks for a
// retry; after versitygw restarts on the same data, the redelivered
// request deletes the rest, and nothing protected is touched.
func TestPruneFunctionConvergesAfterGatewayRestart(t *testing.T) {
	w := newPruneWorld(t, false, "")
	dir := t.TempDir()
	gw, err := harness.StartS3(harness.S3Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	flaky := &flakyGateway{t: t, gw: gw, stopAfter: 2}
	proxy := httptest.NewServer(flaky)
	t.Cleanup(proxy.Close)
	t.Cleanup(func() {
		flaky.mu.Lock()
		defer flaky.mu.Unlock()
		_ = flaky.gw.Stop()
	})
	w.useGateway(proxy.URL)
	orphans := make([]string, 4)
	for i := range orphans {
		orphans[i] = "pvc-" + randomUUID(t)
		w.putOn(gw.DataDir, orphans[i]+"/ns/c/data", "orphan", true)
	}
	w.putOn(gw.DataDir, w.U+"/file", "user data", true)
	live := w.backupDir("b-live")
	w.putOn(gw.DataDir, live+"/"+prune.DefaultManifestName, w.manifest("b-live", "Delete"), true)
	w.putOn(gw.DataDir, live+"/data.tar.zst", "live data", true)
	w.liveBackup("b-live")
	protected := []string{w.U + "/file", live + "/" + prune.DefaultManifestName, live + "/data.tar.zst"}

	got := &collected{}
	fn := &prunefn.Function{Client: env.Client, Emitter: got, Settings: prunefn.Settings{Settings: execute.Settings{BackupRepo: w.repo, PathStyle: true, Concurrency: 1}, Confirm: prune.ConfirmDelete}}
	e := cloudevents.NewEvent()
	e.SetID("restart-" + w.repo)
	e.SetType(events.PruneRequested)
	e.SetSource("e2e")
	if err := e.SetData(cloudevents.ApplicationJSON, events.PruneRequest{DryRun: aws.Bool(false)}); err != nil {
		t.Fatal(err)
	}
	err = fn.Handle(w.ctx, e)
	if err == nil || events.IsClientError(err) {
		t.Fatalf("interrupted prune returned %v, want a retryable error", err)
	}
	ex, ok := got.executed(t)
	if !ok || ex.DeletedCandidates != 2 || ex.FailedCandidates != 2 || !strings.Contains(ex.Error, "failed deletion") {
		t.Fatalf("partial execution %+v", ex)
	}
	t.Logf("interrupted run: %d deleted, %d failed: %s", ex.DeletedCandidates, ex.FailedCandidates, ex.Error)
	for _, r := range ex.Results {
		t.Logf("  %s: %d deleted, error %q", r.Prefix, r.ObjectsDeleted, r.Error)
		if (r.Error == "") != (r.ObjectsDeleted == 1) {
			t.Fatalf("result %+v", r)
		}
	}

	gw2, err := harness.StartS3(harness.S3Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	flaky.restart(gw2)
	if err := fn.Handle(w.ctx, e); err != nil {
		t.Fatalf("re-run: %v", err)
	}
	if ex, _ := got.executed(t); ex.DeletedCandidates != 2 || ex.FailedCandidates != 0 || ex.Error != "" {
		t.Fatalf("re-run %+v", ex)
	}
	left := w.keys()
	for _, o := range orphans {
		if slices.ContainsFunc(left, func(k string) bool { return strings.HasPrefix(k, o+"/") }) {
			t.Errorf("%s survived: %v", o, left)
		}
	}
	for _, k := range protected {
		if !slices.Contains(left, k) {
			t.Errorf("%s was deleted", k)
		}
	}
	if err := fn.Handle(w.ctx, e); err != nil {
		t.Fatalf("third run: %v", err)
	}
	if ex, _ := got.executed(t); ex.DeletedCandidates != 0 || ex.FailedCandidates != 0 {
		t.Fatalf("third run %+v", ex)
	}
}

// TestPruneFunctionS3SourceBodies posts the recorded bodies of every format
// to `snapflow source s3`: each is understood (records of buckets no
// function serves are acknowledged), anything else is refused, an SNS
// confirmation is only ever visited on an SNS host, and an unreachable
// sink turns into 502 so that a retrying sender delivers again.
func TestPruneFunctionS3SourceBodies(t *testing.T) {
	// A function without a BackupRepo acknowledges every notification.
	fnURL := servePruneFunction(t, &prunefn.Function{Client: env.Client, Settings: prunefn.Settings{SkipSNSVerify: true}})
	// The recorded SNS bodies carry their original signatures over edited
	// fields, and no test may fetch AWS's certificates: decoding is checked
	// with verification off here; a signed envelope is checked in
	// cli and functions/prune with a certificate of their own.
	src := startS3Source(t, fnURL, "--sns-verify=false")
	verifying := startS3Source(t, fnURL)
	post := func(url string, body []byte) int {
		resp, err := http.Post(url, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	files, _ := filepath.Glob(filepath.Join("..", "..", "events", "testdata", "*.json"))
	if len(files) < 10 {
		t.Fatalf("recorded bodies: %v", files)
	}
	for _, f := range files {
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if code := post(src, body); code != http.StatusOK {
			t.Errorf("%s: status %d", filepath.Base(f), code)
		}
	}
	for name, body := range map[string]string{
		"not a notification": `{"hello":"world"}`,
		"not json":           `Records`,
		"confirmation elsewhere": `{"Type":"SubscriptionConfirmation","TopicArn":"t",` +
			`"SubscribeURL":"https://attacker.example/?Action=ConfirmSubscription"}`,
	} {
		if code := post(src, []byte(body)); code != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400", name, code)
		}
	}
	// With verification on (the default), an unsigned SNS envelope is refused.
	if code := post(verifying, []byte(`{"Type":"Notification","TopicArn":"arn:aws:sns:eu-west-1:1:t","Message":"{}"}`)); code != http.StatusForbidden {
		t.Errorf("unsigned SNS envelope: status %d, want 403", code)
	}
	port, err := harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	unreachable := startS3Source(t, fmt.Sprintf("http://127.0.0.1:%d/", port))
	body, err := os.ReadFile(filepath.Join("..", "..", "events", "testdata", "aws-put.json"))
	if err != nil {
		t.Fatal(err)
	}
	if code := post(unreachable, body); code != http.StatusBadGateway {
		t.Fatalf("unreachable sink: status %d, want 502", code)
	}
}
