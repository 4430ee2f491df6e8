package snapshot

import (
	"context"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/moverjob"
	"github.com/snapflow/snapflow/internal/scheme"
)

// cancelFixture is one run asked to stop ("why"), shaped by mutate, with
// extra objects beside it.
func cancelFixture(t *testing.T, why string, mutate func(*snapv1.Snapshot), extra ...client.Object) (client.Client, *Function, *snapv1.Snapshot) {
	t.Helper()
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-data"}, Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}
	objs := oneRunFixture("app", pvc)
	s1 := objs[4].(*snapv1.Snapshot)
	s1.Annotations = map[string]string{wellknown.AnnotationCancelRequested: why}
	mutate(s1)
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(append(objs, extra...)...).
		WithStatusSubresource(&snapv1.Snapshot{}).Build()
	return c, &Function{Client: c, Namespace: "snapflow-system", MoverImage: "img"}, s1
}

// runningWith marks the run Running with its mover Job (status and name).
func runningWith(s *snapv1.Snapshot) {
	s.Status.Phase = snapv1.SnapshotRunning
	s.Status.Job = &snapv1.JobRef{Name: moverjob.Name(s.Name, string(s.UID))}
}

// moverOf is the mover Job the fixture's run made, in status.
func moverOf(status batchv1.JobStatus) *batchv1.Job {
	isController := true
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: moverjob.Name("s1", "uid-s1"), UID: "job-uid",
		Labels:          map[string]string{wellknown.LabelManagedBy: wellknown.ManagedByValue},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: snapv1.GroupVersion.String(), Kind: "Snapshot", Name: "s1", UID: "uid-s1", Controller: &isController}}},
		Status: status}
}

// A run asked to stop loses its mover Job and ends Failed (Cancelled), so
// its afterSnapshot hooks run as for any failed run; a Job it did not make
// is left alone (host.DeleteOwned).
func TestCancelStopsTheRun(t *testing.T) {
	ctx := context.Background()
	own := moverOf(batchv1.JobStatus{})
	c, f, s1 := cancelFixture(t, wellknown.CancelReplaced+"2026-12-06T00:45:00Z", runningWith, own)
	if err := f.ReconcileSnapshot(ctx, "app", s1.Name); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(own), &batchv1.Job{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the cancelled run's mover Job is still there (%v)", err)
	}
	var got snapv1.Snapshot
	if err := c.Get(ctx, client.ObjectKeyFromObject(s1), &got); err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase != snapv1.SnapshotFailed || got.Status.Failure == nil || got.Status.Failure.Class != ReasonCancelled {
		t.Fatalf("phase %s failure %+v: want Failed, class %s", got.Status.Phase, got.Status.Failure, ReasonCancelled)
	}
}

// A mover that finished before the cancel was seen has reported: its
// outcome is taken, and its Job is not thrown away with the report.
func TestCancelTakesAFinishedMoversReport(t *testing.T) {
	ctx := context.Background()
	done := moverOf(batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}})
	c, f, s1 := cancelFixture(t, "too late", runningWith, done)
	if err := f.ReconcileSnapshot(ctx, "app", s1.Name); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(done), &batchv1.Job{}); err != nil {
		t.Fatalf("the finished mover's Job was deleted with its report: %v", err)
	}
	var got snapv1.Snapshot
	if err := c.Get(ctx, client.ObjectKeyFromObject(s1), &got); err != nil {
		t.Fatal(err)
	}
	if f := got.Status.Failure; f != nil && f.Class == ReasonCancelled {
		t.Fatalf("a run whose mover had finished was called cancelled: %+v", f)
	}
}

// A cancel waits while a beforeSnapshot hook runs: thawing before the
// freeze ended would leave the workload frozen.
func TestCancelWaitsForARunningFreeze(t *testing.T) {
	ctx := context.Background()
	c, f, s1 := cancelFixture(t, "now", func(s *snapv1.Snapshot) {
		s.Status.Phase = snapv1.SnapshotPending
		s.Status.Hooks = &snapv1.HookStamps{Results: []snapv1.HookResult{{List: ListBefore, Index: 0, Kind: "workloadExec", Running: true}}}
	})
	if err := f.ReconcileSnapshot(ctx, "app", s1.Name); err != nil {
		t.Fatal(err)
	}
	var got snapv1.Snapshot
	if err := c.Get(ctx, client.ObjectKeyFromObject(s1), &got); err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase.IsTerminal() {
		t.Fatalf("cancelled while its freeze hook ran: %s %+v", got.Status.Phase, got.Status.Failure)
	}
}

// A mover whose container ended with its report is not stopped while the
// Job controller has yet to mark its Job: the report would be lost with it.
func TestCancelWaitsForAMoverThatHasReported(t *testing.T) {
	ctx := context.Background()
	job := moverOf(batchv1.JobStatus{})
	isController := true
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: job.Name + "-x1", Labels: map[string]string{"job-name": job.Name, "app.kubernetes.io/managed-by": "snapflow"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: &isController}}},
		Status: corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{{Name: moverjob.ContainerName,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Message: `{"snapshotID":"k1"}`}}}}},
	}
	c, f, s1 := cancelFixture(t, "too late", runningWith, job, pod)
	if err := f.ReconcileSnapshot(ctx, "app", s1.Name); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(job), &batchv1.Job{}); err != nil {
		t.Fatalf("the Job of a mover that had reported was deleted: %v", err)
	}
	var got snapv1.Snapshot
	if err := c.Get(ctx, client.ObjectKeyFromObject(s1), &got); err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase.IsTerminal() {
		t.Fatalf("a run whose mover had reported was ended before its Job: %s %+v", got.Status.Phase, got.Status.Failure)
	}

	// A mover that crashed (no report) is stopped as before.
	pod.Status.ContainerStatuses[0].State.Terminated = &corev1.ContainerStateTerminated{ExitCode: 137, Message: "OOMKilled"}
	if err := c.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if err := f.ReconcileSnapshot(ctx, "app", s1.Name); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(job), &batchv1.Job{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a crashed mover's Job was kept (%v)", err)
	}
}
