package restore

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
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/mover"
	"github.com/snapflow/snapflow/internal/scheme"
)

type oneLog string

func (l oneLog) Tail(context.Context, string, string, string) (string, error) {
	return string(l), nil
}

// A running Restore takes the progress of its own Job's mover, never of a
// Job it does not own, and never once it has ended.
func TestObserveProgress(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 12, 6, 1, 0, 0, 0, time.UTC)
	rs := &snapv1.Restore{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "back", UID: "rs-uid"},
		Status: snapv1.RestoreStatus{Phase: snapv1.RestoreRestoring}}
	owned := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "back-1", UID: "job-uid",
		Labels:          map[string]string{wellknown.LabelManagedBy: wellknown.ManagedByValue},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "kopiur.home-operations.com/v1alpha1", Kind: "Restore", Name: "back", UID: "rs-uid", Controller: ptr(true)}}}}
	foreign := owned.DeepCopy()
	foreign.OwnerReferences = nil
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "back-1-x", Labels: map[string]string{"job-name": "back-1", "app.kubernetes.io/managed-by": "snapflow"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "back-1", UID: "job-uid", Controller: ptr(true)}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(rs, pod).WithStatusSubresource(&snapv1.Restore{}).Build()
	get := func() *snapv1.Restore {
		var got snapv1.Restore
		if err := c.Get(ctx, client.ObjectKeyFromObject(rs), &got); err != nil {
			t.Fatal(err)
		}
		return &got
	}
	f := &Function{Client: c, Now: func() time.Time { return t0.Add(time.Minute) },
		Logs: oneLog(mover.Progress{Started: t0, At: t0.Add(10 * time.Second), Files: 3, Bytes: 30, EstimatedBytes: 60}.String())}

	if err := f.observeProgress(ctx, get(), foreign); err != nil {
		t.Fatal(err)
	}
	if p := get().Status.Progress; p != nil {
		t.Fatalf("took the progress of a Job the Restore does not own: %+v", p)
	}
	if err := f.observeProgress(ctx, get(), owned); err != nil {
		t.Fatal(err)
	}
	if p := get().Status.Progress; p == nil || *p.FilesRestored != 3 || *p.BytesRestored != 30 || *p.Percent != 50 {
		t.Fatalf("progress %+v, want 3 files and 30 of 60 bytes", p)
	}
	done := get()
	done.Status.Phase, done.Status.Progress = snapv1.RestoreFailed, nil
	if err := c.Status().Update(ctx, done); err != nil {
		t.Fatal(err)
	}
	stale := done.DeepCopy()
	stale.Status.Phase = snapv1.RestoreRestoring
	if err := f.observeProgress(ctx, stale, owned); err != nil {
		t.Fatal(err)
	}
	if p := get().Status.Progress; p != nil {
		t.Fatalf("an ended Restore took progress: %+v", p)
	}
}
