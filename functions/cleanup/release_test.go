package cleanup

import (
	"context"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	kernel "github.com/snapflow/snapflow/internal/cleanup"
	"github.com/snapflow/snapflow/internal/kopia"
	"github.com/snapflow/snapflow/internal/mover"
	"github.com/snapflow/snapflow/internal/moverjob"
	"github.com/snapflow/snapflow/internal/scheme"
)

// A finished batch releases exactly the members its own pod reported in
// its termination message; a look-alike pod's message, a member the
// report does not name, or a recreated Snapshot under a member's name are
// never released.
func TestReleaseFinishedTrustsOnlyTheBatchPod(t *testing.T) {
	ctx := context.Background()
	now := metav1.NewTime(time.Date(2026, 12, 4, 3, 0, 0, 0, time.UTC))
	snap := func(name, uid string) *snapv1.Snapshot {
		return &snapv1.Snapshot{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name, UID: types.UID(uid),
			DeletionTimestamp: &now, Finalizers: []string{wellknown.FinalizerSnapshotCleanup}}}
	}
	work := mover.WorkSpec{Operation: mover.OpDelete, Repository: mover.Repository{Backend: kopia.Backend{Filesystem: &kopia.FilesystemBackend{Path: "/r"}}},
		Target: mover.Target{Kind: "Repository", Namespace: "app", Name: "primary"},
		Delete: &mover.DeleteWork{Members: []mover.DeleteMember{
			{Namespace: "app", Name: "a", UID: "ua", SnapshotID: "k1"},
			{Namespace: "app", Name: "b", UID: "ub", SnapshotID: "k2"},
			{Namespace: "app", Name: "c", UID: "old-uc", SnapshotID: "k3"},
			// Deleting, but not in this repository's pool: a tampered spec.
			{Namespace: "app", Name: "d", UID: "ud", SnapshotID: "k4"},
		}}}
	body, err := work.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	// The Job pins the spec it was made with; the ConfigMap is the
	// tenant's to edit.
	pinned := func(work string) *batchv1.Job {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "snapdel-1", UID: "job-uid", Labels: map[string]string{wellknown.LabelManagedBy: wellknown.ManagedByValue}},
			Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{
				{Name: moverjob.ContainerName, Args: []string{"mover", "--work-digest", mover.Digest([]byte(work))}}}}}}}
	}
	job := pinned(body)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "snapdel-1", Labels: map[string]string{wellknown.LabelManagedBy: wellknown.ManagedByValue}},
		Data: map[string]string{mover.WorkSpecKey: body}}
	terminated := func(name string, owned bool, msg string, at time.Time) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name, Labels: map[string]string{"job-name": "snapdel-1", "app.kubernetes.io/managed-by": "snapflow"}, CreationTimestamp: metav1.NewTime(at)},
			Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "mover", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: msg}}}}}}
		if owned {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "snapdel-1", UID: "job-uid", Controller: ptrTo(true)}}
			p.Spec = *job.Spec.Template.Spec.DeepCopy() // as the Job controller makes it
		}
		return p
	}
	repo := &snapv1.Repository{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "primary"}}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(
		repo, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "app"}},
		snap("a", "ua"), snap("b", "ub"), snap("c", "new-uc"), snap("d", "ud"), cm,
		terminated("mover-pod", true, "deleted 1 kopia snapshots\n"+mover.FormatDeleted([]int{0, 2, 3}), now.Time),
		// Newer, but not the Job's: a tenant's pod with the right label.
		terminated("forged", false, mover.FormatDeleted([]int{0, 1, 2}), now.Add(time.Minute)),
	).Build()
	f := &Function{Client: c}
	pool := map[types.UID]*snapv1.Snapshot{"ua": snap("a", "ua"), "ub": snap("b", "ub"), "new-uc": snap("c", "new-uc")}
	ref := snapv1.RepositoryRef{Kind: snapv1.KindRepository, Namespace: "app", Name: "primary"}
	// A spec edited after the batch started (here: the Job pinned an
	// earlier one) releases nothing.
	if released, err := f.releaseFinished(ctx, pinned(body+" "), pool, ref); err != nil || len(released) != 0 {
		t.Fatalf("with an edited work spec released %v (%v), want nothing", released, err)
	}
	released, err := f.releaseFinished(ctx, job, pool, ref)
	if err != nil {
		t.Fatal(err)
	}
	if len(released) != 1 || !released["ua"] {
		t.Fatalf("released %v, want only a", released)
	}
	var s snapv1.Snapshot
	if err := c.Get(ctx, client.ObjectKey{Namespace: "app", Name: "a"}, &s); !apierrors.IsNotFound(err) {
		t.Fatalf("a keeps its finalizer: %v", err)
	}
	for _, name := range []string{"b", "c", "d"} {
		if err := c.Get(ctx, client.ObjectKey{Namespace: "app", Name: name}, &s); err != nil || len(s.Finalizers) != 1 {
			t.Fatalf("%s was released (%v)", name, err)
		}
	}
}

// A mover that did not exit 0 releases nothing: with FallbackToLogsOnError
// its message may be its log.
func TestReleaseFinishedNeedsACleanExit(t *testing.T) {
	ctx := context.Background()
	now := metav1.NewTime(time.Date(2026, 12, 4, 3, 0, 0, 0, time.UTC))
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "snapdel-2", UID: "job-uid"}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "p", Labels: map[string]string{"job-name": "snapdel-2", "app.kubernetes.io/managed-by": "snapflow"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "snapdel-2", UID: "job-uid", Controller: ptrTo(true)}}},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "mover", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Message: mover.FormatDeleted([]int{0})}}}}}}
	s := &snapv1.Snapshot{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "a", UID: "ua", DeletionTimestamp: &now, Finalizers: []string{wellknown.FinalizerSnapshotCleanup}}}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(pod, s).Build()
	f := &Function{Client: c}
	released, err := f.releaseFinished(ctx, job, map[types.UID]*snapv1.Snapshot{"ua": s}, snapv1.RepositoryRef{Kind: snapv1.KindRepository, Namespace: "app", Name: "primary"})
	if err != nil || len(released) != 0 {
		t.Fatalf("released %v (%v), want nothing", released, err)
	}
}

func ptrTo[T any](v T) *T { return &v }

// A Snapshot a batch was to delete but that is released with its data
// kept (here by the skip annotation) says so before its finalizer goes:
// the exporter counts a deletion's outcome from the last state it sees.
func TestAKeptReleaseAfterABatchSaysSo(t *testing.T) {
	ctx := context.Background()
	now := metav1.NewTime(time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC))
	s := &snapv1.Snapshot{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "a", UID: "ua", DeletionTimestamp: &now,
		Finalizers: []string{wellknown.FinalizerSnapshotCleanup}},
		Status: snapv1.SnapshotStatus{Conditions: []metav1.Condition{{Type: wellknown.ConditionDeletionHeld, Status: metav1.ConditionFalse,
			Reason: wellknown.ReasonDeletionInProgress, LastTransitionTime: now}}}}
	var seen []string
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(s).WithStatusSubresource(s).WithInterceptorFuncs(interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			if sn, ok := obj.(*snapv1.Snapshot); ok {
				if cd := meta.FindStatusCondition(sn.Status.Conditions, wellknown.ConditionDeletionHeld); cd != nil {
					seen = append(seen, "status:"+cd.Reason)
				}
			}
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			seen = append(seen, "update")
			return c.Update(ctx, obj, opts...)
		},
	}).Build()
	f := &Function{Client: c}
	if err := f.release(ctx, s, kernel.ReasonSkipAnnotation, "kept"); err != nil {
		t.Fatal(err)
	}
	if want := "status:" + kernel.ReasonSkipAnnotation + " update"; strings.Join(seen, " ") != want {
		t.Fatalf("writes %v, want %s", seen, want)
	}
	// A release whose data the batch deleted writes no status first.
	seen = nil
	s2 := s.DeepCopy()
	s2.Name, s2.UID, s2.ResourceVersion = "b", "ub", ""
	if err := c.Create(ctx, s2); err != nil {
		t.Fatal(err)
	}
	if err := f.release(ctx, s2, kernel.ReasonDeleted, "deleted"); err != nil {
		t.Fatal(err)
	}
	if strings.Join(seen, " ") != "update" {
		t.Fatalf("writes %v, want only the finalizer's update", seen)
	}
	// Deleted by a batch while the breaker held it: the condition says
	// deleted before the finalizer goes.
	seen = nil
	s3 := s.DeepCopy()
	s3.Name, s3.UID, s3.ResourceVersion = "c", "uc", ""
	s3.Status.Conditions[0].Reason = kernel.ReasonBreaker
	if err := c.Create(ctx, s3); err != nil {
		t.Fatal(err)
	}
	if err := f.release(ctx, s3, kernel.ReasonDeleted, "deleted"); err != nil {
		t.Fatal(err)
	}
	if want := "status:" + kernel.ReasonDeleted + " update"; strings.Join(seen, " ") != want {
		t.Fatalf("writes %v, want %s", seen, want)
	}
}
