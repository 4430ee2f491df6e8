package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/events"
	"github.com/snapflow/snapflow/test/harness"
)

// runSnapflow runs the built bin/snapflow against the control plane.
func runSnapflow(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	bin, err := harness.Tool("snapflow")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), harness.Timeout(3*time.Minute))
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"--kubeconfig", env.Kubeconfig}, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errOut.String(), code
}

func policySnapshots(t *testing.T, ns, policy string) []snapv1.Snapshot {
	t.Helper()
	var list snapv1.SnapshotList
	if err := env.Client.List(testContext(t), &list, client.InNamespace(ns), client.MatchingLabels{wellknown.LabelConfig: policy}); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func TestSnapshotNowExpandsASelector(t *testing.T) {
	const ns = "fanout-selector"
	backupNamespace(t, ns, 2, "")
	for _, name := range []string{"db-a", "db-b", "db-c"} {
		kubectl(t, []byte(fmt.Sprintf(`
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: %s, namespace: %s, labels: {backup: nightly}}
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
`, name, ns)), 0, "apply", "-f", "-")
		writeFiles(t, env.Functions.Node.PVCDir(ns, name), 3)
	}
	kubectl(t, []byte(`
apiVersion: kopiur.home-operations.com/v1alpha1
kind: SnapshotPolicy
metadata: {name: dbs, namespace: `+ns+`}
spec:
  repository: {name: primary}
  copyMethod: Clone
  groupBy: None
  sources: [{pvcSelector: {labelSelector: {matchLabels: {backup: nightly}}}}]
`), 0, "apply", "-f", "-")
	stdout, stderr, code := runSnapflow(t, "snapshot", "now", "--policy", "dbs", "-n", ns, "-o", "json")
	if code != 0 {
		t.Fatalf("snapshot now exited %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "created 3 Snapshot(s)") || !strings.Contains(stderr, "3/3 finished") {
		t.Errorf("progress on stderr should say what was created and when it finished:\n%s", stderr)
	}
	var rows []struct {
		Name, Phase, Source string
		FilesNew            int64
	}
	if err := json.Unmarshal([]byte(stdout), &rows); err != nil {
		t.Fatalf("-o json: %v\n%s", err, stdout)
	}
	sources := map[string]bool{}
	for _, r := range rows {
		if r.Phase != "Succeeded" || r.FilesNew != 3 || !strings.Contains(r.Name, "-pvc-db-") || len(r.Name) > 63 {
			t.Errorf("row %+v", r)
		}
		sources[r.Source] = true
	}
	if len(rows) != 3 || !sources["db-a"] || !sources["db-b"] || !sources["db-c"] {
		t.Fatalf("rows %+v, want one per PVC", rows)
	}
	for _, s := range policySnapshots(t, ns, "dbs") {
		if s.Status.Snapshot.Identity.SourcePath != "/pvc/"+s.Spec.Source.Target.PVC.Name {
			t.Errorf("%s backed up %s under %s", s.Name, s.Spec.Source.Target.PVC.Name, s.Status.Snapshot.Identity.SourcePath)
		}
	}
}

func TestTwoRepositoriesAndTheRequestEvent(t *testing.T) {
	const ns = "fanout-repos"
	backupNamespace(t, ns, 4, "")
	kubectl(t, []byte(`
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: offsite, namespace: `+ns+`}
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
---
apiVersion: kopiur.home-operations.com/v1alpha1
kind: Repository
metadata: {name: offsite, namespace: `+ns+`}
spec:
  backend: {filesystem: {path: /r, volume: {pvc: {name: offsite}}}}
  encryption: {passwordSecretRef: {name: kopia-password, key: KOPIA_PASSWORD}}
  create: {enabled: true}
---
apiVersion: kopiur.home-operations.com/v1alpha1
kind: SnapshotPolicy
metadata: {name: twice, namespace: `+ns+`}
spec:
  repositories: [{name: primary}, {name: offsite}]
  copyMethod: Direct
  sources: [{pvc: {name: app-data}}]
`), 0, "apply", "-f", "-")
	// Argo Events, Tekton or curl ask for a backup with a CloudEvent.
	e := event.New()
	e.SetID("req-1")
	e.SetSource("tekton/pipelines/release")
	e.SetType(events.SnapshotRequested)
	e.SetTime(time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC))
	if err := e.SetData(event.ApplicationJSON, events.SnapshotRequest{Namespace: ns, Policy: "twice", Tags: map[string]string{"release": "v1"}}); err != nil {
		t.Fatal(err)
	}
	body, _ := e.MarshalJSON()
	for i := 0; i < 2; i++ { // redelivered: still one firing
		if code := postEvent(t, env.Functions.URL, "application/cloudevents+json", body); code != http.StatusOK && code != http.StatusAccepted && code != http.StatusNoContent {
			t.Fatalf("request answered %d", code)
		}
	}
	// The same request redelivered without ce-time is still that request:
	// its identity is source and id, never the sender-chosen time.
	untimed := e.Clone()
	untimed.SetTime(time.Time{})
	body2, _ := untimed.MarshalJSON()
	if bytes.Contains(body2, []byte(`"time"`)) {
		t.Fatalf("the redelivery still carries a time: %s", body2)
	}
	if code := postEvent(t, env.Functions.URL, "application/cloudevents+json", body2); code != http.StatusOK && code != http.StatusAccepted && code != http.StatusNoContent {
		t.Fatalf("untimed redelivery answered %d", code)
	}
	snaps := policySnapshots(t, ns, "twice")
	if len(snaps) != 2 {
		t.Fatalf("want one Snapshot per repository, got %d", len(snaps))
	}
	// Another request with the very same ce-time is another firing.
	kubectl(t, []byte(`
apiVersion: kopiur.home-operations.com/v1alpha1
kind: SnapshotPolicy
metadata: {name: once, namespace: `+ns+`}
spec:
  repository: {name: primary}
  copyMethod: Direct
  sources: [{pvc: {name: app-data}}]
`), 0, "apply", "-f", "-")
	other := e.Clone()
	other.SetID("req-3")
	_ = other.SetData(event.ApplicationJSON, events.SnapshotRequest{Namespace: ns, Policy: "once"})
	body3, _ := other.MarshalJSON()
	if code := postEvent(t, env.Functions.URL, "application/cloudevents+json", body3); code != http.StatusOK && code != http.StatusAccepted && code != http.StatusNoContent {
		t.Fatalf("a second request with the same ce-time answered %d", code)
	}
	onces := policySnapshots(t, ns, "once")
	if len(onces) != 1 {
		t.Fatalf("a second request with the same ce-time created %d Snapshots, want 1", len(onces))
	}
	waitSnapshot(t, ns, onces[0].Name, snapv1.SnapshotSucceeded)
	repos := map[string]bool{}
	for _, s := range snaps {
		done := waitSnapshot(t, ns, s.Name, snapv1.SnapshotSucceeded)
		if done.Spec.Repository == nil || done.Status.Resolved.Repository.Name != done.Spec.Repository.Name || *done.Status.Stats.FilesNew != 4 || done.Spec.Tags["release"] != "v1" {
			t.Fatalf("%s: repository %+v resolved %+v stats %+v tags %v", s.Name, done.Spec.Repository, done.Status.Resolved, done.Status.Stats, done.Spec.Tags)
		}
		repos[done.Spec.Repository.Name] = true
	}
	if !repos["primary"] || !repos["offsite"] {
		t.Fatalf("covered %v", repos)
	}
	// kubectl get shows where the policy writes.
	eventually(t, func() error {
		out := kubectl(t, nil, 0, "-n", ns, "get", "snapshotpolicy", "twice").Stdout
		if !strings.Contains(out, "REPOSITORIES") || !strings.Contains(out, "primary, offsite") {
			return fmt.Errorf("Repositories column %q", out)
		}
		return nil
	})
	// A request for a policy that does not exist is refused, not retried.
	bad := e.Clone()
	bad.SetID("req-2")
	_ = bad.SetData(event.ApplicationJSON, events.SnapshotRequest{Namespace: ns, Policy: "nope"})
	body, _ = bad.MarshalJSON()
	if code := postEvent(t, env.Functions.URL, "application/cloudevents+json", body); code != http.StatusBadRequest {
		t.Fatalf("unknown policy answered %d, want 400", code)
	}
}
