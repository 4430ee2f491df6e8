package verify

import (
	"context"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/scheme"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// world is a namespace with a Ready S3 repository, a policy with an hourly
// quick verification, and (unless noBackup) one finished backup.
func world(t *testing.T, mutate func(p *snapv1.SnapshotPolicy, r *snapv1.Repository), noBackup bool) (client.Client, *Function) {
	t.Helper()
	repo := &snapv1.Repository{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "primary", UID: "r-uid"},
		Spec: snapv1.RepositorySpec{Backend: snapv1.Backend{S3: &snapv1.S3Backend{Bucket: "b", Endpoint: "s3.example.com",
			Auth: &snapv1.ObjectStoreAuth{SecretRef: &snapv1.SecretRef{Name: "s3-keys"}}}},
			Encryption: snapv1.RepositoryEncryption{PasswordSecretRef: snapv1.SecretKeyRef{Name: "pw", Key: "password"}}},
		Status: snapv1.RepositoryStatus{Phase: snapv1.RepositoryReady}}
	p := &snapv1.SnapshotPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "app", UID: "p-uid", Generation: 1},
		Spec: snapv1.SnapshotPolicySpec{Repository: &snapv1.RepositoryRef{Name: "primary"},
			Verification: &snapv1.Verification{Quick: &snapv1.QuickVerification{Schedule: &snapv1.CronSpec{Cron: "0 * * * *"}}}}}
	if mutate != nil {
		mutate(p, repo)
	}
	end := metav1.NewTime(t0.Add(-time.Hour))
	objs := []client.Object{p, repo, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "app"}}}
	if !noBackup {
		objs = append(objs, &snapv1.Snapshot{
			ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "app-1", Labels: map[string]string{wellknown.LabelConfig: "app"}, CreationTimestamp: end},
			Status: snapv1.SnapshotStatus{Phase: snapv1.SnapshotSucceeded, Timing: &snapv1.Timing{EndTime: &end},
				Snapshot: &snapv1.SnapshotRecord{KopiaSnapshotID: "k1"},
				Resolved: &snapv1.SnapshotResolved{Repository: &snapv1.RepositoryRef{Kind: snapv1.KindRepository, Name: "primary", Namespace: "app"}}},
		})
	}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).
		WithStatusSubresource(&snapv1.SnapshotPolicy{}, &snapv1.Snapshot{}, &snapv1.Repository{}).Build()
	now := t0
	return c, &Function{Client: c, Namespace: "snapflow-system", MoverImage: "snapflow:test", MoverServiceAccount: "snapflow-mover",
		Now: func() time.Time { return now }}
}

func jobs(t *testing.T, c client.Client) []batchv1.Job {
	t.Helper()
	var l batchv1.JobList
	if err := c.List(context.Background(), &l, client.InNamespace("app")); err != nil {
		t.Fatal(err)
	}
	return l.Items
}

func runOf(t *testing.T, c client.Client) *snapv1.VerificationRun {
	t.Helper()
	var p snapv1.SnapshotPolicy
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "app", Name: "app"}, &p); err != nil {
		t.Fatal(err)
	}
	if len(p.Status.VerificationRuns) > 1 {
		t.Fatalf("%d runs recorded, want one tier in one repository", len(p.Status.VerificationRuns))
	}
	for i := range p.Status.VerificationRuns {
		return &p.Status.VerificationRuns[i]
	}
	return nil
}

// A due quick verification starts one Job over the latest backup, records
// the run, and a redelivered event starts nothing more.
func TestReconcileStartsADueVerificationOnce(t *testing.T) {
	ctx := context.Background()
	c, f := world(t, nil, false)
	for range 2 {
		if err := f.Reconcile(ctx, "app", "app"); err != nil {
			t.Fatal(err)
		}
	}
	js := jobs(t, c)
	if len(js) != 1 {
		t.Fatalf("%d verify Jobs, want 1", len(js))
	}
	r := runOf(t, c)
	if r == nil || r.Phase != phaseRunning || r.Job != js[0].Name || r.KopiaSnapshotID != "k1" || r.Tier != "quick" {
		t.Fatalf("run %+v, want Running over k1 with Job %s", r, js[0].Name)
	}
	if !strings.Contains(strings.Join(js[0].Spec.Template.Spec.Containers[0].Args, " "), "mover") {
		t.Fatalf("the Job does not run the mover: %v", js[0].Spec.Template.Spec.Containers[0].Args)
	}
}

// What gates a run: no backup yet, a repository not Ready, a suspended
// policy or repository, no verification configured.
func TestReconcileGates(t *testing.T) {
	for _, tc := range []struct {
		name     string
		mutate   func(*snapv1.SnapshotPolicy, *snapv1.Repository)
		noBackup bool
	}{
		{name: "no backup yet", noBackup: true},
		{name: "the repository is not Ready", mutate: func(_ *snapv1.SnapshotPolicy, r *snapv1.Repository) { r.Status.Phase = snapv1.RepositoryPending }},
		{name: "the policy is suspended", mutate: func(p *snapv1.SnapshotPolicy, _ *snapv1.Repository) { p.Spec.Suspend = true }},
		{name: "the repository is suspended", mutate: func(_ *snapv1.SnapshotPolicy, r *snapv1.Repository) { r.Spec.Suspend = true }},
		{name: "no tier", mutate: func(p *snapv1.SnapshotPolicy, _ *snapv1.Repository) { p.Spec.Verification = &snapv1.Verification{} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, f := world(t, tc.mutate, tc.noBackup)
			if err := f.Reconcile(context.Background(), "app", "app"); err != nil {
				t.Fatal(err)
			}
			if js := jobs(t, c); len(js) != 0 {
				t.Fatalf("%d Jobs started", len(js))
			}
			if r := runOf(t, c); r != nil {
				t.Fatalf("a run was recorded: %+v", r)
			}
		})
	}
}

// A running verification whose Job is gone, or was replaced by one snapflow
// does not own, fails with why; nothing is read from the stranger's Job.
func TestReconcileSettlesAVanishedOrForeignJob(t *testing.T) {
	for _, foreign := range []bool{false, true} {
		ctx := context.Background()
		c, f := world(t, nil, false)
		if err := f.Reconcile(ctx, "app", "app"); err != nil {
			t.Fatal(err)
		}
		js := jobs(t, c)
		if len(js) != 1 {
			t.Fatalf("%d Jobs", len(js))
		}
		if err := c.Delete(ctx, &js[0]); err != nil {
			t.Fatal(err)
		}
		if foreign {
			// Someone else's finished Job under the same name.
			done := batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: js[0].Name},
				Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}}}
			if err := c.Create(ctx, &done); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.Reconcile(ctx, "app", "app"); err != nil {
			t.Fatal(err)
		}
		r := runOf(t, c)
		if r == nil || r.Phase != phaseFailed || !strings.Contains(r.Message, "disappeared before reporting") || r.CompletedAt == nil {
			t.Fatalf("foreign=%v: run %+v, want Failed because the Job disappeared", foreign, r)
		}
	}
}
