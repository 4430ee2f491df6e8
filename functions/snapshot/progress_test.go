package snapshot

import (
	"context"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/internal/mover"
	"github.com/snapflow/snapflow/internal/scheme"
)

type oneLog string

func (l *oneLog) Tail(context.Context, string, string, string) (string, error) {
	return string(*l), nil
}

// A running Snapshot takes its mover's newest progress line; an older line,
// or a Snapshot that has finished meanwhile, changes nothing.
func TestObserveProgress(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 12, 6, 1, 0, 0, 0, time.UTC)
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "snap-1", UID: "job-uid"}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "snap-1-x", Labels: map[string]string{"job-name": "snap-1", "app.kubernetes.io/managed-by": "snapflow"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "snap-1", UID: "job-uid", Controller: ptr(true)}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	snap := &snapv1.Snapshot{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "snap", UID: "snap-uid"},
		Status: snapv1.SnapshotStatus{Phase: snapv1.SnapshotRunning, Job: &snapv1.JobRef{Name: "snap-1"}}}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(job, pod, snap).WithStatusSubresource(&snapv1.Snapshot{}).Build()
	line := func(at time.Duration, bytes int64) *oneLog {
		l := oneLog(mover.Progress{Started: t0, At: t0.Add(at), Files: 2, Bytes: bytes, EstimatedBytes: 100}.String() + "\n")
		return &l
	}
	get := func() *snapv1.Snapshot {
		var s snapv1.Snapshot
		if err := c.Get(ctx, client.ObjectKeyFromObject(snap), &s); err != nil {
			t.Fatal(err)
		}
		return &s
	}
	f := &Function{Client: c, Now: func() time.Time { return t0.Add(time.Minute) }}

	f.Logs = line(10*time.Second, 50)
	if err := f.observeProgress(ctx, get(), job); err != nil {
		t.Fatal(err)
	}
	if p := get().Status.Progress; p == nil || p.BytesRead != 50 || *p.Percent != 50 || p.BytesPerSecond != 5 {
		t.Fatalf("progress %+v, want 50 of 100 bytes at 5 B/s", p)
	}
	for _, tc := range []struct {
		at        time.Duration
		bytes     int64
		wantBytes int64
	}{
		{5 * time.Second, 20, 50},  // older
		{14 * time.Second, 70, 50}, // newer, but within mover.ProgressRefresh
		{18 * time.Second, 80, 80}, // a refresh's worth newer
	} {
		f.Logs = line(tc.at, tc.bytes)
		if err := f.observeProgress(ctx, get(), job); err != nil {
			t.Fatal(err)
		}
		if p := get().Status.Progress; p.BytesRead != tc.wantBytes {
			t.Fatalf("after a line at %s: progress %+v, want %d bytes read", tc.at, p, tc.wantBytes)
		}
	}
	other := job.DeepCopy()
	other.Name = "snap-2"
	f.Logs = line(40*time.Second, 99)
	if err := f.observeProgress(ctx, get(), other); err != nil {
		t.Fatal(err)
	}
	if p := get().Status.Progress; p.BytesRead != 80 {
		t.Fatalf("another Job's log was taken for the run's: %+v", p)
	}
	done := get()
	done.Status.Phase = snapv1.SnapshotSucceeded
	done.Status.Progress = nil
	if err := c.Status().Update(ctx, done); err != nil {
		t.Fatal(err)
	}
	f.Logs = line(20*time.Second, 90)
	running := done.DeepCopy()
	running.Status.Phase = snapv1.SnapshotRunning // a stale read
	if err := f.observeProgress(ctx, running, job); err != nil {
		t.Fatal(err)
	}
	if p := get().Status.Progress; p != nil {
		t.Fatalf("a finished Snapshot took progress: %+v", p)
	}
}
