package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/events"
	"github.com/snapflow/snapflow/functions/snapshot"
	"github.com/snapflow/snapflow/internal/kopia"
	"github.com/snapflow/snapflow/internal/repository"
)

// repoNamespace applies a namespace with a password Secret, a repository
// PVC, an app-data PVC and a filesystem Repository named primary at path,
// with repoSpec appended to the Repository's spec (e.g. "  create: {enabled: true}").
func repoNamespace(t *testing.T, ns, path, repoSpec string) {
	t.Helper()
	kubectl(t, []byte(fmt.Sprintf(`
apiVersion: v1
kind: Namespace
metadata: {name: %[1]s}
---
apiVersion: v1
kind: Secret
metadata: {name: kopia-password, namespace: %[1]s}
stringData: {KOPIA_PASSWORD: correct-horse}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: kopia-repo, namespace: %[1]s}
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: app-data, namespace: %[1]s}
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
---
apiVersion: kopiur.home-operations.com/v1alpha1
kind: Repository
metadata: {name: primary, namespace: %[1]s}
spec:
  backend: {filesystem: {path: %[2]s, volume: {pvc: {name: kopia-repo}}}}
  encryption: {passwordSecretRef: {name: kopia-password, key: KOPIA_PASSWORD}}
%[3]s
`, ns, path, repoSpec)), 0, "apply", "-f", "-")
}

// backupNamespace is repoNamespace with the repository created and Ready,
// and n files in the app-data PVC.
func backupNamespace(t *testing.T, ns string, files int, repoExtra string) {
	t.Helper()
	repoNamespace(t, ns, "/repository", "  create: {enabled: true}\n"+repoExtra)
	writeFiles(t, env.Functions.Node.PVCDir(ns, "app-data"), files)
	waitRepository(t, ns, "primary", snapv1.RepositoryReady)
}

func writeFiles(t *testing.T, dir string, n int) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "docs"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		body := bytes.Repeat([]byte(fmt.Sprintf("file %d of %s\n", i, dir)), 200)
		if err := os.WriteFile(filepath.Join(dir, "docs", fmt.Sprintf("f%02d.txt", i)), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func waitRepository(t *testing.T, ns, name string, want snapv1.RepositoryPhase) *snapv1.Repository {
	t.Helper()
	var r snapv1.Repository
	eventually(t, func() error {
		if err := env.Client.Get(testContext(t), clientKey(ns, name), &r); err != nil {
			return err
		}
		if r.Status.Phase != want {
			return fmt.Errorf("repository %s/%s is %q, want %s: %+v", ns, name, r.Status.Phase, want, r.Status.Conditions)
		}
		return nil
	})
	return &r
}

func policy(ns, name, extra string) []byte {
	return []byte(fmt.Sprintf(`
apiVersion: kopiur.home-operations.com/v1alpha1
kind: SnapshotPolicy
metadata: {name: %s, namespace: %s}
spec:
  repository: {name: primary}
  sources: [{pvc: {name: app-data}}]
%s`, name, ns, extra))
}

func snapshotOf(ns, name, pol string) []byte {
	return []byte(fmt.Sprintf(`
apiVersion: kopiur.home-operations.com/v1alpha1
kind: Snapshot
metadata: {name: %s, namespace: %s}
spec: {policyRef: {name: %s}}
`, name, ns, pol))
}

// createBucket makes a bucket on the test's versitygw.
func createBucket(t *testing.T, name string) {
	t.Helper()
	cli := s3.New(s3.Options{Region: env.S3.Region, BaseEndpoint: aws.String(env.S3.URL), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(env.S3.AccessKey, env.S3.SecretKey, "")})
	if _, err := cli.CreateBucket(testContext(t), &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatal(err)
	}
}

// s3RepoNamespace applies a namespace with an app-data PVC and a Repository
// named primary on the suite's versitygw (bucket, prefix), created with
// password; the credentials Secret is s3-creds.
func s3RepoNamespace(t *testing.T, ns, bucket, prefix, password string) {
	t.Helper()
	s3RepoAt(t, ns, env.S3.Endpoint, bucket, prefix, password, "")
}

// s3RepoAt is s3RepoNamespace with the S3 endpoint given (a proxy in front
// of the suite's versitygw) and repoSpec appended to the Repository's spec.
func s3RepoAt(t *testing.T, ns, endpoint, bucket, prefix, password, repoSpec string) {
	t.Helper()
	kubectl(t, []byte(fmt.Sprintf(`
apiVersion: v1
kind: Namespace
metadata: {name: %[1]s}
---
apiVersion: v1
kind: Secret
metadata: {name: s3-creds, namespace: %[1]s}
stringData: {AWS_ACCESS_KEY_ID: %[2]s, AWS_SECRET_ACCESS_KEY: %[3]s, KOPIA_PASSWORD: %[6]s}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: app-data, namespace: %[1]s}
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
---
apiVersion: kopiur.home-operations.com/v1alpha1
kind: Repository
metadata: {name: primary, namespace: %[1]s}
spec:
  backend:
    s3:
      bucket: %[7]s
      prefix: %[8]q
      endpoint: %[4]s
      region: %[5]s
      auth: {secretRef: {name: s3-creds}}
      tls: {disableTls: true}
  encryption: {passwordSecretRef: {name: s3-creds, key: KOPIA_PASSWORD}}
  create: {enabled: true}
%[9]s`, ns, env.S3.AccessKey, env.S3.SecretKey, endpoint, env.S3.Region, password, bucket, prefix, repoSpec)), 0, "apply", "-f", "-")
}

func TestBackupToS3(t *testing.T) {
	const ns = "backup-s3"
	ctx := testContext(t)
	createBucket(t, "snapflow-backups")
	s3RepoNamespace(t, ns, "snapflow-backups", "team-a/", "s3-password")
	src := env.Functions.Node.PVCDir(ns, "app-data")
	writeFiles(t, src, 20)
	repo := waitRepository(t, ns, "primary", snapv1.RepositoryReady)
	if repo.Status.Backend != "s3" || repo.Status.UniqueID == "" {
		t.Fatalf("repository status %+v", repo.Status)
	}
	kubectl(t, policy(ns, "app", "  copyMethod: Clone\n"), 0, "apply", "-f", "-")
	kubectl(t, snapshotOf(ns, "first", "app"), 0, "create", "-f", "-")
	s := waitSnapshot(t, ns, "first", snapv1.SnapshotSucceeded)
	if *s.Status.Stats.FilesNew != 20 || *s.Status.Stats.BytesNew <= 0 {
		t.Fatalf("stats %+v", s.Status.Stats)
	}
	// The data is in the bucket under the prefix, and reads back intact.
	r, err := kopia.Open(ctx, kopia.OpenOptions{Password: "s3-password", ReadOnly: true, Backend: kopia.Backend{S3: &kopia.S3Backend{
		Bucket: "snapflow-backups", Prefix: "team-a/", Endpoint: env.S3.Endpoint, Region: env.S3.Region, DisableTLS: true,
		AccessKeyID: env.S3.AccessKey, SecretAccessKey: env.S3.SecretKey}}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	sameRestore(t, r, s.Status.Snapshot.KopiaSnapshotID, src)

	// A Restore reads it back from the bucket by identity, as a user who
	// only knows the kopia identity would.
	id := s.Status.Snapshot.Identity
	kubectl(t, restoreOf(ns, "by-identity", fmt.Sprintf("{identity: {username: %s, hostname: %s, sourcePath: %s}}", id.Username, id.Hostname, id.SourcePath),
		"{pvc: {name: from-s3, capacity: 1Gi}}\n  repository: {name: primary}"), 0, "apply", "-f", "-")
	rs := waitRestore(t, ns, "by-identity", snapv1.RestoreCompleted)
	if rs.Status.SourceKind != "identity" || rs.Status.Resolved == nil || rs.Status.Resolved.KopiaSnapshotID != s.Status.Snapshot.KopiaSnapshotID {
		t.Errorf("identity restore resolved %+v", rs.Status.Resolved)
	}
	sameFiles(t, tree(t, src), tree(t, env.Functions.Node.PVCDir(ns, "from-s3")), true)

	// With a snapshotID the identity restore takes that snapshot, not the
	// newest one.
	want := tree(t, src)
	if err := os.WriteFile(filepath.Join(src, "later.txt"), []byte("written after the first backup\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	kubectl(t, snapshotOf(ns, "second", "app"), 0, "create", "-f", "-")
	waitSnapshot(t, ns, "second", snapv1.SnapshotSucceeded)
	kubectl(t, restoreOf(ns, "by-id", fmt.Sprintf("{identity: {username: %s, hostname: %s, sourcePath: %s, snapshotID: %s}}", id.Username, id.Hostname, id.SourcePath, s.Status.Snapshot.KopiaSnapshotID),
		"{pvc: {name: first-again, capacity: 1Gi}}\n  repository: {name: primary}"), 0, "apply", "-f", "-")
	rs = waitRestore(t, ns, "by-id", snapv1.RestoreCompleted)
	if rs.Status.Resolved == nil || rs.Status.Resolved.KopiaSnapshotID != s.Status.Snapshot.KopiaSnapshotID {
		t.Errorf("snapshotID restore resolved %+v, want %s", rs.Status.Resolved, s.Status.Snapshot.KopiaSnapshotID)
	}
	sameFiles(t, want, tree(t, env.Functions.Node.PVCDir(ns, "first-again")), true)
}

func TestUnchangedWithIgnoreIdenticalSnapshots(t *testing.T) {
	const ns = "backup-identical"
	backupNamespace(t, ns, 5, "")
	kubectl(t, policy(ns, "app", "  copyMethod: Direct\n  files: {ignoreIdenticalSnapshots: true}\n"), 0, "apply", "-f", "-")
	kubectl(t, snapshotOf(ns, "one", "app"), 0, "create", "-f", "-")
	first := waitSnapshot(t, ns, "one", snapv1.SnapshotSucceeded)
	kubectl(t, snapshotOf(ns, "two", "app"), 0, "create", "-f", "-")
	second := waitSnapshot(t, ns, "two", snapv1.SnapshotUnchanged)
	if second.Status.Snapshot.KopiaSnapshotID != first.Status.Snapshot.KopiaSnapshotID || *second.Status.Stats.FilesUnchanged != 5 {
		t.Fatalf("unchanged run: %+v", second.Status)
	}
	eventually(t, func() error {
		for _, want := range []string{events.SnapshotSucceeded + " " + ns + "/one", events.SnapshotUnchanged + " " + ns + "/two"} {
			if !strings.Contains(strings.Join(env.Functions.Emitted.Types(), "\n"), want) {
				return fmt.Errorf("no %q among the emitted events %v", want, env.Functions.Emitted.Types())
			}
		}
		return nil
	})
}

func TestWrongPasswordFailsTheRunWithAHint(t *testing.T) {
	const ns = "backup-wrong-password"
	backupNamespace(t, ns, 3, "")
	kubectl(t, policy(ns, "app", "  copyMethod: Direct\n"), 0, "apply", "-f", "-")
	// The repository was created with the right password; now it changes.
	kubectl(t, nil, 0, "-n", ns, "patch", "secret", "kopia-password", "--type=merge", "-p", `{"stringData":{"KOPIA_PASSWORD":"not-the-password"}}`)
	kubectl(t, snapshotOf(ns, "bad", "app"), 0, "create", "-f", "-")
	s := waitSnapshot(t, ns, "bad", snapv1.SnapshotFailed)
	f := s.Status.Failure
	if f == nil || f.Class != kopia.ClassWrongPassword || !strings.Contains(f.RetryHint, "passwordSecretRef") || s.Status.LogTail == "" {
		t.Fatalf("failure = %+v, logTail %q: want class %s with a hint naming passwordSecretRef", f, s.Status.LogTail, kopia.ClassWrongPassword)
	}
	eventually(t, func() error {
		out := kubectl(t, nil, 0, "-n", ns, "get", "snapshot", "bad", "-o", "jsonpath={.status.conditions[?(@.type=='Ready')].message}").Stdout
		if !strings.Contains(out, "WrongPassword") {
			return fmt.Errorf("Ready message %q should explain the failure", out)
		}
		return nil
	})
	ev := kubectl(t, nil, 0, "-n", ns, "get", "events", "--field-selector", "involvedObject.name=bad,type=Warning", "-o", "name").Stdout
	if strings.TrimSpace(ev) == "" {
		t.Error("a failed backup should leave a Warning event on the Snapshot")
	}
}

func TestRepositoryFailureIsReportedAndBlocksRuns(t *testing.T) {
	const ns = "backup-repo-missing"
	repoNamespace(t, ns, "/nothing-here", "")
	r := waitRepository(t, ns, "primary", snapv1.RepositoryFailed)
	c := meta.FindStatusCondition(r.Status.Conditions, wellknown.ConditionReady)
	if c == nil || c.Reason != kopia.ClassNotInitialized || !strings.Contains(c.Message, "create.enabled") {
		t.Fatalf("Ready condition %+v: want reason %s and a hint about create.enabled", c, kopia.ClassNotInitialized)
	}
	// It keeps trying, further and further apart, and says when it will next.
	eventually(t, func() error {
		var r snapv1.Repository
		if err := env.Client.Get(testContext(t), clientKey(ns, "primary"), &r); err != nil {
			return err
		}
		c := r.Status.Connect
		if c == nil || c.Attempts < 3 || c.Generation != r.Generation {
			return fmt.Errorf("status.connect %+v: want three attempts at generation %d", c, r.Generation)
		}
		if wait := c.NextAttemptAt.Sub(c.LastAttemptAt.Time); wait <= 2*time.Second || wait > 8*time.Second ||
			c.LastAttemptAt.Sub(c.FailingSince.Time) < 2*time.Second {
			return fmt.Errorf("status.connect %+v: the third wait should be longer than the first (2s), at most the ceiling (8s)", c)
		}
		return nil
	})
	kubectl(t, policy(ns, "app", "  copyMethod: Direct\n"), 0, "apply", "-f", "-")
	kubectl(t, snapshotOf(ns, "waits", "app"), 0, "create", "-f", "-")
	eventually(t, func() error {
		var s snapv1.Snapshot
		if err := env.Client.Get(testContext(t), clientKey(ns, "waits"), &s); err != nil {
			return err
		}
		c := meta.FindStatusCondition(s.Status.Conditions, wellknown.ConditionReady)
		if s.Status.Phase != snapv1.SnapshotPending || c == nil || c.Reason != snapshot.ReasonWaitingForRepository || !strings.Contains(c.Message, "create.enabled") {
			return fmt.Errorf("snapshot %s, Ready %+v: want Pending, waiting for the repository with its reason", s.Status.Phase, c)
		}
		return nil
	})
	// Fixing the repository lets the waiting run go.
	kubectl(t, nil, 0, "-n", ns, "patch", "repository", "primary", "--type=merge", "-p", `{"spec":{"create":{"enabled":true}}}`)
	waitSnapshot(t, ns, "waits", snapv1.SnapshotSucceeded)
	eventually(t, func() error {
		if r := waitRepository(t, ns, "primary", snapv1.RepositoryReady); r.Status.Connect != nil {
			return fmt.Errorf("a connected repository keeps its retry state: %+v", r.Status.Connect)
		}
		return nil
	})
}

func TestParkedRunWaitsForASlot(t *testing.T) {
	const ns = "backup-parked"
	backupNamespace(t, ns, 3, "  concurrency: {maxConcurrentJobs: 1}\n")
	kubectl(t, policy(ns, "app", "  copyMethod: Direct\n"), 0, "apply", "-f", "-")
	// Another run holds the only slot: a mover Job of this repository that takes its time.
	ctx := testContext(t)
	blocker := &batchv1.Job{}
	blocker.Namespace, blocker.Name = ns, "slot-holder"
	blocker.Labels = map[string]string{wellknown.LabelRepoPool: repository.PoolKey(snapv1.KindRepository, ns, "primary"), wellknown.LabelManagedBy: wellknown.ManagedByValue}
	blocker.Spec.Template.Spec = corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "sleep", Image: "busybox", Command: []string{"sleep", "120"}}}}
	if err := asFunction(t, "snapshot").Create(ctx, blocker); err != nil {
		t.Fatal(err)
	}
	kubectl(t, snapshotOf(ns, "parked", "app"), 0, "create", "-f", "-")
	eventually(t, func() error {
		var s snapv1.Snapshot
		if err := env.Client.Get(ctx, clientKey(ns, "parked"), &s); err != nil {
			return err
		}
		c := meta.FindStatusCondition(s.Status.Conditions, wellknown.ConditionRepositorySlotAvailable)
		if s.Status.Phase != snapv1.SnapshotPending || c == nil || c.Status != "False" || c.Reason != snapshot.ReasonWaitingForSlot || !strings.Contains(c.Message, "allows 1 concurrent") {
			return fmt.Errorf("phase %s, slot condition %+v", s.Status.Phase, c)
		}
		return nil
	})
	var jobs batchv1.JobList
	if err := env.Client.List(ctx, &jobs, client.InNamespace(ns), client.MatchingLabels{wellknown.LabelSnapshot: "parked"}); err != nil || len(jobs.Items) != 0 {
		t.Fatalf("a parked run must create nothing: %d jobs (%v)", len(jobs.Items), err)
	}
	// Another recipe, a fan-out policy, applied and fired while this run
	// waits, takes nothing from it: its runs queue behind it (#27 saw an
	// existing Pending Snapshot failed by such a policy).
	kubectl(t, []byte(`
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: web-data, namespace: `+ns+`, labels: {backup: fleet}}
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
---
apiVersion: kopiur.home-operations.com/v1alpha1
kind: SnapshotPolicy
metadata: {name: fleet, namespace: `+ns+`}
spec:
  repositories: [{name: primary}]
  sources: [{pvcSelector: {labelSelector: {matchLabels: {backup: fleet}}}}]
  copyMethod: Direct
`), 0, "apply", "-f", "-")
	writeFiles(t, env.Functions.Node.PVCDir(ns, "web-data"), 2)
	snapflowCLI(t, 0, "snapshot", "now", "-n", ns, "--policy", "fleet", "--wait=false")
	var parked snapv1.Snapshot
	if err := env.Client.Get(ctx, clientKey(ns, "parked"), &parked); err != nil || parked.Status.Phase != snapv1.SnapshotPending {
		t.Fatalf("the parked run after another recipe fired: phase %q (%v), want still Pending", parked.Status.Phase, err)
	}
	// The slot frees when the other run ends; the parked run then goes.
	if err := env.Client.Delete(ctx, blocker, client.PropagationPolicy("Background")); err != nil {
		t.Fatal(err)
	}
	s := waitSnapshot(t, ns, "parked", snapv1.SnapshotSucceeded)
	for _, f := range policySnapshots(t, ns, "fleet") {
		waitSnapshot(t, ns, f.Name, snapv1.SnapshotSucceeded)
	}
	if c := meta.FindStatusCondition(s.Status.Conditions, wellknown.ConditionRepositorySlotAvailable); c == nil || c.Status != "True" {
		t.Fatalf("slot condition after start: %+v", c)
	}
}

func TestDuplicateEventsCreateOneJob(t *testing.T) {
	const ns = "backup-duplicates"
	backupNamespace(t, ns, 3, "")
	hooks := newHookServer(t)
	kubectl(t, policy(ns, "app", fmt.Sprintf("  copyMethod: Direct\n  hooks: {beforeSnapshot: [{httpRequest: {url: %q}}]}\n", hooks.URL+"/freeze")), 0, "apply", "-f", "-")
	kubectl(t, snapshotOf(ns, "dup", "app"), 0, "create", "-f", "-")
	ctx := testContext(t)
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(snapv1.GroupVersion.WithKind("Snapshot"))
	if err := env.Client.Get(ctx, clientKey(ns, "dup"), u); err != nil {
		t.Fatal(err)
	}
	e, err := events.NewAPIServerEvent(events.APIServerAdd, "e2e", u)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := e.MarshalJSON()
	// The same event delivered ten times at once, as an at-least-once broker may.
	var wg sync.WaitGroup
	codes := make(chan int, 10)
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes <- postEvent(t, env.Functions.URL, "application/cloudevents+json", body)
		}()
	}
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != http.StatusOK && c != http.StatusAccepted && c != http.StatusNoContent {
			t.Errorf("a duplicate delivery was answered %d", c)
		}
	}
	waitSnapshot(t, ns, "dup", snapv1.SnapshotSucceeded)
	var jobs batchv1.JobList
	if err := env.Client.List(ctx, &jobs, client.InNamespace(ns), client.MatchingLabels{wellknown.LabelSnapshot: "dup"}); err != nil || len(jobs.Items) != 1 {
		t.Fatalf("want exactly one mover job for the snapshot, got %d (%v)", len(jobs.Items), err)
	}
	if calls := hooks.got(); len(calls) != 1 {
		t.Fatalf("the beforeSnapshot hook ran %d times under duplicate deliveries, want once: %q", len(calls), calls)
	}
	// A finished run never runs again, however often it is announced.
	for i := 0; i < 3; i++ {
		postEvent(t, env.Functions.URL, "application/cloudevents+json", body)
	}
	time.Sleep(500 * time.Millisecond)
	if err := env.Client.List(ctx, &jobs, client.InNamespace(ns), client.MatchingLabels{wellknown.LabelSnapshot: "dup"}); err != nil || len(jobs.Items) != 1 {
		t.Fatalf("a finished snapshot got another job: %d", len(jobs.Items))
	}
}

func TestFunctionRefusesWhatItCannotHandle(t *testing.T) {
	cases := []struct {
		name, contentType, body string
		want                    int
	}{
		{"not a cloudevent", "application/json", `{"hello":"world"}`, http.StatusBadRequest},
		{"unknown type", "application/cloudevents+json", `{"specversion":"1.0","id":"1","source":"x","type":"com.example.other"}`, http.StatusBadRequest},
		{"apiserver event without data", "application/cloudevents+json", `{"specversion":"1.0","id":"2","source":"x","type":"dev.knative.apiserver.resource.add"}`, http.StatusBadRequest},
		{"object without a name", "application/cloudevents+json", `{"specversion":"1.0","id":"3","source":"x","type":"dev.knative.apiserver.resource.add","datacontenttype":"application/json","data":{"kind":"Snapshot","apiVersion":"kopiur.home-operations.com/v1alpha1"}}`, http.StatusBadRequest},
		{"a snapshot that does not exist is fine", "application/cloudevents+json", `{"specversion":"1.0","id":"4","source":"x","type":"dev.knative.apiserver.resource.update","datacontenttype":"application/json","data":{"kind":"Snapshot","apiVersion":"kopiur.home-operations.com/v1alpha1","metadata":{"name":"ghost","namespace":"default"}}}`, http.StatusOK},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := postEvent(t, env.Functions.URL, c.contentType, []byte(c.body)); got != c.want {
				t.Fatalf("status %d, want %d", got, c.want)
			}
		})
	}
}

// postEvent posts an event as the suite's trusted pipeline.
func postEvent(t *testing.T, url, contentType string, body []byte) int {
	t.Helper()
	return postEventAs(t, senderToken(t), url, contentType, body)
}

// postEventAs posts with token as the bearer token ("" sends none).
func postEventAs(t *testing.T, token, url, contentType string, body []byte) int {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestPrivilegedMoverNeedsTheNamespaceOptIn(t *testing.T) {
	const ns = "backup-privileged"
	backupNamespace(t, ns, 2, "")
	kubectl(t, policy(ns, "app", "  copyMethod: Direct\n  mover: {privilegedMode: true}\n"), 0, "apply", "-f", "-")
	kubectl(t, snapshotOf(ns, "root", "app"), 0, "create", "-f", "-")
	eventually(t, func() error {
		var s snapv1.Snapshot
		if err := env.Client.Get(testContext(t), clientKey(ns, "root"), &s); err != nil {
			return err
		}
		c := meta.FindStatusCondition(s.Status.Conditions, wellknown.ConditionMoverPermitted)
		if s.Status.Phase != snapv1.SnapshotPending || c == nil || c.Status != "False" || !strings.Contains(c.Message, wellknown.AnnotationPrivilegedMovers) {
			return fmt.Errorf("phase %s MoverPermitted %+v: want Pending and the annotation to set", s.Status.Phase, c)
		}
		return nil
	})
	kubectl(t, nil, 0, "annotate", "namespace", ns, wellknown.AnnotationPrivilegedMovers+"=true")
	s := waitSnapshot(t, ns, "root", snapv1.SnapshotSucceeded)
	var job batchv1.Job
	if err := env.Client.Get(testContext(t), clientKey(ns, s.Status.Job.Name), &job); err != nil {
		t.Fatal(err)
	}
	if sc := job.Spec.Template.Spec.Containers[0].SecurityContext; sc.Privileged == nil || !*sc.Privileged {
		t.Fatalf("the permitted mover should run privileged: %+v", sc)
	}
}

func TestWedgedMoverPodFailsTheRun(t *testing.T) {
	const ns = "backup-wedged"
	// No node carries this label, so the mover pod is never scheduled.
	backupNamespace(t, ns, 2, "")
	kubectl(t, nil, 0, "-n", ns, "patch", "repository", "primary", "--type=merge", "-p", `{"spec":{"moverDefaults":{"nodeSelector":{"disk":"nvme"}}}}`)
	kubectl(t, policy(ns, "app", "  copyMethod: Direct\n"), 0, "apply", "-f", "-")
	kubectl(t, []byte(`
apiVersion: kopiur.home-operations.com/v1alpha1
kind: Snapshot
metadata: {name: stuck, namespace: `+ns+`}
spec:
  policyRef: {name: app}
  failurePolicy: {podStartupDeadlineSeconds: 3}
`), 0, "create", "-f", "-")
	s := waitSnapshot(t, ns, "stuck", snapv1.SnapshotFailed)
	if f := s.Status.Failure; f == nil || f.Class != snapshot.ReasonMoverPodWedged || !strings.Contains(f.Message, "didn't match Pod's node affinity/selector") {
		t.Fatalf("failure %+v: want %s with the scheduler's reason", s.Status.Failure, snapshot.ReasonMoverPodWedged)
	}
}

// A repository's moverDefaults reach its movers' pods: labels, and an
// affinity the scheduler only prefers (the local node still runs it); so
// do a policy's mover resources.
func TestMoverDefaultsReachThePod(t *testing.T) {
	const ns = "backup-mover-defaults"
	backupNamespace(t, ns, 2, "  moverDefaults:\n    podLabels: {team: payments}\n    affinity: {nodeAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{weight: 10, preference: {matchExpressions: [{key: disk, operator: In, values: [ssd]}]}}]}}\n")
	kubectl(t, policy(ns, "app", "  copyMethod: Direct\n  mover: {resources: {limits: {memory: 600Mi}}}\n"), 0, "apply", "-f", "-")
	kubectl(t, snapshotOf(ns, "first", "app"), 0, "create", "-f", "-")
	s := waitSnapshot(t, ns, "first", snapv1.SnapshotSucceeded)
	var job batchv1.Job
	if err := env.Client.Get(testContext(t), clientKey(ns, s.Status.Job.Name), &job); err != nil {
		t.Fatal(err)
	}
	tpl := job.Spec.Template
	// The policy's own mover settings too.
	if mem := tpl.Spec.Containers[0].Resources.Limits.Memory(); mem.String() != "600Mi" {
		t.Errorf("mover memory limit %s, want the policy's 600Mi", mem)
	}
	if tpl.Labels["team"] != "payments" {
		t.Errorf("mover pod labels %v, want team=payments", tpl.Labels)
	}
	a := tpl.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || len(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 1 ||
		a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].Weight != 10 {
		t.Errorf("mover pod affinity %+v, want the repository's preferred node affinity", a)
	}
}
