package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/snapflow/snapflow/events"
	prunefn "github.com/snapflow/snapflow/functions/prune"
	"github.com/snapflow/snapflow/internal/prune"
	"github.com/snapflow/snapflow/internal/prune/execute"
	"github.com/snapflow/snapflow/internal/prune/kubeinv"
	"github.com/snapflow/snapflow/test/harness"
)

// lateWriter is an S3 proxy in front of versitygw that, the first time a
// client HEADs key, first runs late: a backup written again between the
// prune's last re-listing and its delete.
type lateWriter struct {
	target *url.URL
	key    string
	once   sync.Once
	late   func()
	heads  int
	mu     sync.Mutex
}

func (l *lateWriter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodHead && strings.HasSuffix(r.URL.Path, "/"+l.key) {
		l.mu.Lock()
		l.heads++
		l.mu.Unlock()
		l.once.Do(l.late)
	}
	// The Host header stays the proxy's: the client signed it.
	(&httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(l.target); pr.Out.Host = pr.In.Host }}).ServeHTTP(w, r)
}

// A backup the plan found orphaned gets a new manifest and its Backup CR
// at the last moment, right before its first delete: the manifest HEAD
// before that delete stops the backup, nothing of it is deleted, the other
// orphan goes, and the re-run leaves the now protected backup alone.
func TestPruneStopsABackupWrittenAgainBeforeItsDelete(t *testing.T) {
	w := newPruneWorld(t, false, "")
	gw, err := harness.StartS3(harness.S3Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gw.Stop() })
	target, _ := url.Parse(gw.URL)
	dir := w.backupDir("b-late")
	proxy := &lateWriter{target: target, key: dir + "/" + prune.DefaultManifestName}
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	w.useGateway(srv.URL)
	w.putOn(gw.DataDir, dir+"/"+prune.DefaultManifestName, w.manifest("b-late", "Delete"), true)
	w.putOn(gw.DataDir, dir+"/data.tar.zst", "data-b-late", true)
	orphan := "pvc-" + randomUUID(t)
	w.putOn(gw.DataDir, orphan+"/ns/c/data", "orphan", true)

	direct := s3.New(s3.Options{Region: env.S3.Region, BaseEndpoint: aws.String(gw.URL), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(env.S3.AccessKey, env.S3.SecretKey, "")})
	var lateErrs []error
	proxy.late = func() {
		ctx := context.Background()
		_, err := direct.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(w.bucket), Key: aws.String(proxy.key),
			Body: strings.NewReader(w.manifest("b-late", "Retain"))})
		lateErrs = append(lateErrs, err)
		u := kb(kubeinv.GVKBackup, w.ns, "b-late", map[string]any{
			"metadata": map[string]any{"labels": map[string]any{prune.LabelClusterUID: w.clusterUID}},
			"spec":     map[string]any{"backupPolicyName": "pg-policy", "backupMethod": "dump"}})
		lateErrs = append(lateErrs, env.Client.Create(ctx, u))
	}

	got := &collected{}
	fn := &prunefn.Function{Client: env.Client, Emitter: got, Settings: prunefn.Settings{Settings: execute.Settings{BackupRepo: w.repo, PathStyle: true, Concurrency: 1}, Confirm: prune.ConfirmDelete}}
	e := cloudevents.NewEvent()
	e.SetID("late-" + w.repo)
	e.SetType(events.PruneRequested)
	e.SetSource("e2e")
	if err := e.SetData(cloudevents.ApplicationJSON, events.PruneRequest{DryRun: aws.Bool(false)}); err != nil {
		t.Fatal(err)
	}
	if err := fn.Handle(w.ctx, e); err == nil {
		t.Fatal("a prune that stopped a backup reported success")
	}
	for _, err := range lateErrs {
		if err != nil {
			t.Fatalf("the late write: %v", err)
		}
	}
	if proxy.heads == 0 {
		t.Fatal("the prune never HEADed the manifest before deleting")
	}
	ex, ok := got.executed(t)
	if !ok {
		t.Fatal("no prune executed event")
	}
	for _, r := range ex.Results {
		switch {
		case strings.Contains(r.Prefix, "b-late") && (r.ObjectsDeleted != 0 || !strings.Contains(r.Error, "manifest changed")):
			t.Errorf("the rewritten backup: %+v", r)
		case strings.HasPrefix(r.Prefix, orphan) && (r.ObjectsDeleted != 1 || r.Error != ""):
			t.Errorf("the orphan root: %+v", r)
		}
	}
	left := w.keys()
	for _, k := range []string{dir + "/" + prune.DefaultManifestName, dir + "/data.tar.zst"} {
		if !slices.Contains(left, k) {
			t.Errorf("%s was deleted: %v", k, left)
		}
	}
	if slices.ContainsFunc(left, func(k string) bool { return strings.HasPrefix(k, orphan+"/") }) {
		t.Errorf("the orphan root survived: %v", left)
	}
	// Redelivered: the backup is live now, so nothing of it is a candidate.
	if err := fn.Handle(w.ctx, e); err != nil {
		t.Fatalf("re-run: %v", err)
	}
	if again, _ := got.executed(t); again.DeletedCandidates != 0 || again.FailedCandidates != 0 {
		t.Fatalf("re-run %+v", again)
	}
	if !slices.Contains(w.keys(), dir+"/data.tar.zst") {
		t.Fatal("the re-run deleted the live backup's data")
	}
}
