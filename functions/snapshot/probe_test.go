package snapshot

import (
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/mover"
	"github.com/snapflow/snapflow/internal/scheme"
)

// finishProbe ends job as a mover pod that left report would.
func finishProbe(t *testing.T, c client.Client, job *batchv1.Job, at time.Time, code int32, rep mover.Report) {
	t.Helper()
	ctx := context.Background()
	labels := map[string]string{"job-name": job.Name}
	maps.Copy(labels, job.Spec.Template.Labels)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: job.Namespace, Name: job.Name + "-pod", Labels: labels,
		CreationTimestamp: metav1.NewTime(at),
		OwnerReferences:   []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: ptr(true)}}},
		Spec: *job.Spec.Template.Spec.DeepCopy(), // as the Job controller makes it
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "mover",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Message: mover.TerminationMessage("probe", rep)}}}}}}
	if err := c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	cond := batchv1.JobComplete
	if code != 0 {
		cond = batchv1.JobFailed
	}
	job.Status.Conditions = []batchv1.JobCondition{{Type: cond, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(at)}}
	if err := c.Status().Update(ctx, job); err != nil {
		t.Fatal(err)
	}
}

func probeJobs(t *testing.T, c client.Client, ns string) []batchv1.Job {
	t.Helper()
	var jobs batchv1.JobList
	if err := c.List(context.Background(), &jobs, client.InNamespace(ns), client.MatchingLabels{wellknown.LabelOp: opProbe}); err != nil {
		t.Fatal(err)
	}
	return jobs.Items
}

// A connected repository is probed when its interval is up, by one Job per
// due time however often the event comes; a probe that cannot open it
// turns it Degraded at the threshold, and one that opens it again makes
// it Ready with fresh figures.
func TestProbeDegradesAndRecovers(t *testing.T) {
	ctx := context.Background()
	ns := "app"
	now := time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC)
	connectedAt := metav1.NewTime(now.Add(-time.Hour))
	repo := &snapv1.Repository{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "primary", UID: "repo-uid", Generation: 1},
		Spec: snapv1.RepositorySpec{
			Backend:    snapv1.Backend{Filesystem: &snapv1.FilesystemBackend{Path: "/repo", Volume: &snapv1.FilesystemVolume{PVC: &snapv1.LocalObjectRef{Name: "repo"}}}},
			Encryption: snapv1.RepositoryEncryption{PasswordSecretRef: snapv1.SecretKeyRef{Name: "pw", Key: "KOPIA_PASSWORD"}},
			Create:     &snapv1.RepositoryCreate{},
			Health:     &snapv1.Health{Probe: &snapv1.HealthProbe{Interval: "10m", FailureThreshold: ptr(int32(2))}}},
		Status: snapv1.RepositoryStatus{Phase: snapv1.RepositoryReady, ObservedGeneration: 1, UniqueID: "abc",
			StorageStats: &snapv1.StorageStats{LastObservedAt: &connectedAt}}}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).
		WithObjects(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, repo).
		WithStatusSubresource(&snapv1.Repository{}, &batchv1.Job{}).Build()
	events := record.NewFakeRecorder(10)
	f := &Function{Client: c, Namespace: "snapflow-system", MoverImage: "img", RepositoryRetry: time.Minute, Recorder: events,
		Now: func() time.Time { return now }}
	reconcile := func() {
		t.Helper()
		for range 2 { // delivered twice, as at-least-once delivery may
			if err := f.ReconcileRepository(ctx, snapv1.KindRepository, ns, "primary"); err != nil {
				t.Fatal(err)
			}
		}
	}
	status := func() snapv1.RepositoryStatus {
		var r snapv1.Repository
		if err := c.Get(ctx, client.ObjectKeyFromObject(repo), &r); err != nil {
			t.Fatal(err)
		}
		return r.Status
	}

	reconcile()
	jobs := probeJobs(t, c, ns)
	if len(jobs) != 1 {
		t.Fatalf("%d probe jobs, want 1", len(jobs))
	}
	var cm corev1.ConfigMap
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: jobs[0].Name}, &cm); err != nil {
		t.Fatal(err)
	}
	spec, err := mover.Parse([]byte(cm.Data[mover.WorkSpecKey]))
	if err != nil || spec.Operation != mover.OpProbe || spec.Repository.Create != nil || spec.Target.Generation != 1 {
		t.Fatalf("work spec %+v (%v): want a probe of generation 1 that never creates", spec, err)
	}

	wrong := mover.Report{Phase: "Failed", Failure: &mover.Failure{Class: "WrongPassword", Message: "the password does not open the repository"}}
	for i := 1; i <= 2; i++ {
		now = now.Add(time.Minute)
		finishProbe(t, c, &jobs[0], now, mover.ExitReported, wrong)
		reconcile()
		st := status()
		if st.Probe == nil || st.Probe.ConsecutiveFailures != int32(i) || st.Probe.Job != jobs[0].Name {
			t.Fatalf("after failed probe %d: %+v", i, st.Probe)
		}
		wantPhase := snapv1.RepositoryReady
		if i == 2 {
			wantPhase = snapv1.RepositoryDegraded
		}
		if st.Phase != wantPhase {
			t.Fatalf("after failed probe %d: phase %s, want %s", i, st.Phase, wantPhase)
		}
		// The recorded probe's Job and work spec are gone, and the next
		// waits for its backoff.
		if left := probeJobs(t, c, ns); len(left) != 0 {
			t.Fatalf("after failed probe %d: %d probe jobs left", i, len(left))
		}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: jobs[0].Name}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
			t.Fatalf("the probe's work spec is still there: %v", err)
		}
		now = now.Add(time.Duration(i)*time.Minute - time.Second)
		reconcile()
		if len(probeJobs(t, c, ns)) != 0 {
			t.Fatalf("the next probe started before its backoff of %d minute(s) was up", i)
		}
		now = now.Add(time.Second)
		reconcile()
		if jobs = probeJobs(t, c, ns); len(jobs) != 1 {
			t.Fatalf("after the backoff: %d probe jobs, want 1", len(jobs))
		}
	}
	if e := <-events.Events; !strings.Contains(e, "RepositoryDegraded") || !strings.Contains(e, "password") {
		t.Errorf("event %q", e)
	}
	// A Degraded repository is not bootstrapped again (which could create
	// a repository where the old one went missing).
	var connectJobs batchv1.JobList
	_ = c.List(ctx, &connectJobs, client.InNamespace(ns), client.MatchingLabels{wellknown.LabelOp: opBootstrap})
	if len(connectJobs.Items) != 0 {
		t.Fatalf("a Degraded repository was bootstrapped again: %d jobs", len(connectJobs.Items))
	}

	now = now.Add(time.Minute)
	finishProbe(t, c, &jobs[0], now, 0, mover.Report{Phase: "Done", Bootstrap: &mover.BootstrapResult{UniqueID: "abc"}})
	// Usage comes from the mover; an empty one is fine here.
	reconcile()
	st := status()
	if st.Phase != snapv1.RepositoryReady || st.Probe.ConsecutiveFailures != 0 || !st.LastReverifyAt.Time.Equal(now) {
		t.Fatalf("after a probe that opened it: phase %s, probe %+v, reverified %v", st.Phase, st.Probe, st.LastReverifyAt)
	}
	if e := <-events.Events; !strings.Contains(e, "RepositoryRecovered") {
		t.Errorf("event %q", e)
	}
}
