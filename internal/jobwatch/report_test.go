package jobwatch

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/kopia"
	"github.com/snapflow/snapflow/internal/mover"
	"github.com/snapflow/snapflow/internal/moverjob"
	"github.com/snapflow/snapflow/internal/scheme"
)

// A mover's report reaches status only from a pod its Job controls, that
// exited as a reporting mover does, for the caller's own object and work.
func TestApplyReportTrustsOnlyTheJobsOwnMover(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2026, 12, 5, 6, 0, 0, 0, time.UTC)
	src := kopia.Source{Username: "u", Hostname: "billing.app", Path: "/data"}
	target := mover.Target{Kind: "Snapshot", Namespace: "billing", Name: "s", UID: "s-uid"}
	work := func(mutate func(*mover.WorkSpec)) string {
		w := mover.WorkSpec{Operation: mover.OpSnapshot, Target: target, Snapshot: &mover.SnapshotWork{Source: src},
			Repository: mover.Repository{Kind: "Repository", Name: "primary", Backend: kopia.Backend{Filesystem: &kopia.FilesystemBackend{Path: "/repo"}}}}
		if mutate != nil {
			mutate(&w)
		}
		b, _ := json.Marshal(w)
		return string(b)
	}
	success := mover.TerminationMessage("snapshot k1", mover.Report{Phase: "Succeeded", Started: at,
		Snapshot: &mover.Result{Start: at, End: at, Source: src, Snapshot: kopia.SnapshotResult{ID: "k1"}}})
	failure := mover.TerminationMessage("Unreachable: down", mover.Report{Phase: "Failed", Started: at,
		Failure: &mover.Failure{Class: "Unreachable", Message: "down"}, FailedAt: at})
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "billing", Name: "s-job", UID: "job-uid", Labels: map[string]string{wellknown.LabelManagedBy: wellknown.ManagedByValue}}}
	const editedSinceStart = "a work spec edited after its job started"
	const forged = "a pod with the Job's controller reference that runs something else"
	const squatted = "a Job someone else made under the mover's name"
	pod := func(controlled bool, code int32, msg string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "billing", Name: "s-job-abcde", Labels: map[string]string{"job-name": "s-job", "app.kubernetes.io/managed-by": "snapflow"}},
			Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "mover",
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Message: msg}}}}}}
		if controlled {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: ptr(true)}}
		}
		return p
	}
	cm := func(spec string, label bool) *corev1.ConfigMap {
		c := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "billing", Name: "s-job"}, Data: map[string]string{mover.WorkSpecKey: spec}}
		if label {
			c.Labels = map[string]string{wellknown.LabelManagedBy: wellknown.ManagedByValue}
		}
		return c
	}
	tests := []struct {
		name    string
		pod     *corev1.Pod
		cm      *corev1.ConfigMap
		op      string
		owner   string
		want    snapv1.SnapshotPhase
		wantWhy string
	}{
		{"a success from the Job's pod", pod(true, 0, success), cm(work(nil), true), mover.OpSnapshot, "s-uid", snapv1.SnapshotSucceeded, ""},
		{"a reported failure", pod(true, mover.ExitReported, failure), cm(work(nil), true), mover.OpSnapshot, "s-uid", snapv1.SnapshotFailed, ""},
		{"a retryable failure the Job gave up on", pod(true, mover.ExitRetryable, failure), cm(work(nil), true), mover.OpSnapshot, "s-uid", snapv1.SnapshotFailed, ""},
		{"a success reported with the retry code", pod(true, mover.ExitRetryable, success), cm(work(nil), true), mover.OpSnapshot, "s-uid", snapv1.SnapshotRunning, "failed=false"},
		{"a pod that only carries the job-name label", pod(false, 0, success), cm(work(nil), true), mover.OpSnapshot, "s-uid", snapv1.SnapshotRunning, "no report"},
		{"a crash whose log tail holds a report", pod(true, 137, success), cm(work(nil), true), mover.OpSnapshot, "s-uid", snapv1.SnapshotRunning, "no report"},
		{"a success reported with the failure code", pod(true, mover.ExitReported, success), cm(work(nil), true), mover.OpSnapshot, "s-uid", snapv1.SnapshotRunning, "failed=false"},
		{"a work spec snapflow did not write", pod(true, 0, success), cm(work(nil), false), mover.OpSnapshot, "s-uid", snapv1.SnapshotRunning, "not snapflow's"},
		{"a work spec edited to another operation", pod(true, 0, success), cm(work(func(w *mover.WorkSpec) {
			w.Operation, w.Delete = mover.OpDelete, &mover.DeleteWork{Members: []mover.DeleteMember{{Namespace: "payroll", Name: "p", UID: "p-uid", SnapshotID: "k"}}}
		}), true), mover.OpSnapshot, "s-uid", snapv1.SnapshotRunning, "not the snapshot work"},
		{"a work spec for another object", pod(true, 0, success), cm(work(nil), true), mover.OpSnapshot, "other-uid", snapv1.SnapshotRunning, "not the snapshot work"},
		{"a report of another source", pod(true, 0, success), cm(work(func(w *mover.WorkSpec) { w.Snapshot.Source.Hostname = "billing.other" }), true), mover.OpSnapshot, "s-uid", snapv1.SnapshotRunning, "reports kopia source"},
		{editedSinceStart, pod(true, 0, success), cm(work(nil), true), mover.OpSnapshot, "s-uid", snapv1.SnapshotRunning, "changed after job s-job started"},
		// A controller reference is no proof: anyone who may create pods
		// can write one. This pod runs another program.
		{forged, pod(true, 0, success), cm(work(nil), true), mover.OpSnapshot, "s-uid", snapv1.SnapshotRunning, `container "mover" runs image "busybox"`},
		// Only snapflow's functions may create a Job with snapflow's label:
		// one without it is not read, however well its pods match it.
		{squatted, pod(true, 0, success), cm(work(nil), true), mover.OpSnapshot, "s-uid", snapv1.SnapshotRunning, "job s-job is not labelled app.kubernetes.io/managed-by=snapflow"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The Job pins the spec its mover started with (the mover
			// checks it); edits after that are the tenant's.
			pin := tt.cm.Data[mover.WorkSpecKey]
			if tt.name == editedSinceStart {
				pin = work(func(w *mover.WorkSpec) { w.Snapshot.Source.Path = "/elsewhere" })
			}
			job := job.DeepCopy()
			if tt.name == squatted {
				job.Labels = nil
			}
			job.Spec.Template.Spec.Containers = []corev1.Container{{Name: moverjob.ContainerName, Args: []string{"mover", "--work-digest", mover.Digest([]byte(pin))}}}
			// The Job controller makes its pods from the template.
			pod := tt.pod.DeepCopy()
			pod.Spec = *job.Spec.Template.Spec.DeepCopy()
			if tt.name == forged {
				pod.Spec.Containers[0].Image, pod.Spec.Containers[0].Command = "busybox", []string{"sh", "-c", "echo forged"}
			}
			s := &snapv1.Snapshot{ObjectMeta: metav1.ObjectMeta{Namespace: "billing", Name: "s", UID: "s-uid"}, Status: snapv1.SnapshotStatus{Phase: snapv1.SnapshotRunning}}
			c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(s, job.DeepCopy(), pod, tt.cm).WithStatusSubresource(&snapv1.Snapshot{}).Build()
			why, err := ApplyReport(ctx, c, job, types.UID(tt.owner), tt.op)
			if err != nil {
				t.Fatal(err)
			}
			if (tt.wantWhy == "") != (why == "") || !strings.Contains(why, tt.wantWhy) {
				t.Fatalf("reason %q, want one with %q", why, tt.wantWhy)
			}
			var live snapv1.Snapshot
			if err := c.Get(ctx, client.ObjectKeyFromObject(s), &live); err != nil {
				t.Fatal(err)
			}
			if live.Status.Phase != tt.want {
				t.Fatalf("phase %s, want %s (%+v)", live.Status.Phase, tt.want, live.Status)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
