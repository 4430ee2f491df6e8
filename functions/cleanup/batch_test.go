package cleanup

import (
	"context"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/kopia"
	"github.com/snapflow/snapflow/internal/mover"
	"github.com/snapflow/snapflow/internal/moverjob"
	"github.com/snapflow/snapflow/internal/scheme"
)

// A finished batch Job is trusted only when the Lease recorded its UID at
// creation. A Job found under the holder's name otherwise, one placed there
// first by whoever may create Jobs in the namespace, releases nothing: a
// look-alike of snapflow's is removed so the members go into a new batch,
// any other Job is left alone and the deletions wait.
func TestSettleBatchTrustsOnlyTheRecordedJob(t *testing.T) {
	ctx := context.Background()
	now := metav1.NewTime(time.Date(2026, 12, 7, 3, 0, 0, 0, time.UTC))
	ref := snapv1.RepositoryRef{Kind: snapv1.KindRepository, Namespace: "app", Name: "primary"}
	repo := &repoState{ref: ref, homeNS: "app", obj: &snapv1.Repository{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "primary"}}}
	work := mover.WorkSpec{Operation: mover.OpDelete, Repository: mover.Repository{Backend: kopia.Backend{Filesystem: &kopia.FilesystemBackend{Path: "/r"}}},
		Target: mover.Target{Kind: "Repository", Namespace: "app", Name: "primary"},
		Delete: &mover.DeleteWork{Members: []mover.DeleteMember{{Namespace: "app", Name: "a", UID: "ua", SnapshotID: "k1"}}}}
	body, err := work.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	const name = "snapdel-1"
	ours := map[string]string{wellknown.LabelManagedBy: wellknown.ManagedByValue, wellknown.LabelOp: wellknown.OpDeleteBatch}
	cases := []struct {
		name         string
		recorded     string // the UID on the Lease
		labels       map[string]string
		wantReleased bool
		wantJobGone  bool
		wantBlocks   bool // the Job is returned as the running batch
	}{
		{name: "recorded", recorded: "job-uid", labels: ours, wantReleased: true, wantJobGone: true},
		{name: "not recorded, look-alike", labels: ours, wantJobGone: true},
		{name: "another UID recorded", recorded: "other", labels: ours, wantJobGone: true},
		{name: "not recorded, someone else's", labels: map[string]string{"app": "x"}, wantBlocks: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			snap := &snapv1.Snapshot{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "a", UID: "ua",
				DeletionTimestamp: &now, Finalizers: []string{wellknown.FinalizerSnapshotCleanup}},
				Status: snapv1.SnapshotStatus{Cleanup: &snapv1.CleanupStatus{Batch: name, Attempts: 1}}}
			job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name, UID: "job-uid", Labels: tc.labels},
				Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{
					{Name: moverjob.ContainerName, Args: []string{"mover", "--work-digest", mover.Digest([]byte(body))}}}}}},
				Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}}}
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name, Labels: map[string]string{wellknown.LabelManagedBy: wellknown.ManagedByValue}},
				Data: map[string]string{mover.WorkSpecKey: body}}
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "p", Labels: map[string]string{"job-name": name, "app.kubernetes.io/managed-by": "snapflow"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: name, UID: "job-uid", Controller: ptrTo(true)}}},
				Spec: *job.Spec.Template.Spec.DeepCopy(),
				Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "mover", State: corev1.ContainerState{
					Terminated: &corev1.ContainerStateTerminated{Message: mover.FormatDeleted([]int{0})}}}}}}
			holder := name
			lease := &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "snapflow-system", Name: leaseName(repo)}, Spec: coordv1.LeaseSpec{HolderIdentity: &holder}}
			if tc.recorded != "" {
				lease.Annotations = map[string]string{wellknown.AnnotationBatchJobUID: tc.recorded}
			}
			c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(
				&snapv1.Repository{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "primary"}},
				&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "app"}},
				snap, job, cm, pod, lease).WithStatusSubresource(snap).Build()
			rec := record.NewFakeRecorder(4)
			f := &Function{Client: c, Recorder: rec, Namespace: "snapflow-system"}
			running, released, err := f.settleBatch(ctx, repo, map[types.UID]*snapv1.Snapshot{"ua": snap})
			if err != nil {
				t.Fatal(err)
			}
			if got := released["ua"]; got != tc.wantReleased {
				t.Errorf("released a: %v, want %v", got, tc.wantReleased)
			}
			var s snapv1.Snapshot
			if err := c.Get(ctx, client.ObjectKeyFromObject(snap), &s); tc.wantReleased != apierrors.IsNotFound(err) {
				t.Errorf("snapshot a after settle: %v (finalizers %v)", err, s.Finalizers)
			}
			// A member left in a batch that is gone leaves it, so the next
			// batch, even of the same name, counts as another attempt.
			if !tc.wantReleased && tc.wantJobGone && (s.Status.Cleanup == nil || s.Status.Cleanup.Batch != "") {
				t.Errorf("member still in the removed batch: %+v", s.Status.Cleanup)
			}
			if (running != nil) != tc.wantBlocks {
				t.Errorf("batch still running: %v, want %v", running != nil, tc.wantBlocks)
			}
			// Someone else's Job blocking the deletions says so.
			blocked := false
			for len(rec.Events) > 0 {
				if e := <-rec.Events; strings.Contains(e, "DeletionBatchBlocked") {
					blocked = strings.Contains(e, name)
				}
			}
			if blocked != tc.wantBlocks {
				t.Errorf("DeletionBatchBlocked event naming the Job: %v, want %v", blocked, tc.wantBlocks)
			}
			err = c.Get(ctx, client.ObjectKeyFromObject(job), &batchv1.Job{})
			if gone := apierrors.IsNotFound(err); gone != tc.wantJobGone {
				t.Errorf("job gone: %v (%v), want %v", gone, err, tc.wantJobGone)
			}
			var l coordv1.Lease
			if err := c.Get(ctx, client.ObjectKeyFromObject(lease), &l); err != nil {
				t.Fatal(err)
			}
			free := l.Spec.HolderIdentity == nil
			if free != !tc.wantBlocks || (free && l.Annotations[wellknown.AnnotationBatchJobUID] != "") {
				t.Errorf("lease holder %v annotations %v after settle", l.Spec.HolderIdentity, l.Annotations)
			}
		})
	}
}

// The delivery that creates the batch Job records its UID; a second
// delivery of the same batch takes the Lease without wiping the record, and
// a new holder starts with none.
func TestBatchLeaseRecordsTheCreatedJob(t *testing.T) {
	ctx := context.Background()
	repo := &repoState{ref: snapv1.RepositoryRef{Kind: snapv1.KindRepository, Namespace: "app", Name: "primary"}, homeNS: "app"}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).Build()
	f := &Function{Client: c, Namespace: "snapflow-system", Now: func() time.Time { return time.Date(2026, 12, 7, 3, 0, 0, 0, time.UTC) }}
	lease := func() *coordv1.Lease {
		var l coordv1.Lease
		if err := c.Get(ctx, client.ObjectKey{Namespace: "snapflow-system", Name: leaseName(repo)}, &l); err != nil {
			t.Fatal(err)
		}
		return &l
	}
	if ok, err := f.acquire(ctx, repo, "snapdel-1"); err != nil || !ok {
		t.Fatalf("first acquire: %v %v", ok, err)
	}
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "snapdel-1", UID: "u1"}}
	if err := f.recordBatch(ctx, repo, job); err != nil {
		t.Fatal(err)
	}
	if ok, err := f.acquire(ctx, repo, "snapdel-1"); err != nil || !ok {
		t.Fatalf("second delivery's acquire: %v %v", ok, err)
	}
	if l := lease(); !ownBatch(l, job) {
		t.Fatalf("record lost: %v", l.Annotations)
	}
	if ok, err := f.acquire(ctx, repo, "snapdel-2"); err != nil || ok {
		t.Fatalf("another batch took a held Lease: %v %v", ok, err)
	}
	// Recording for a name that no longer holds the Lease writes nothing.
	if err := f.recordBatch(ctx, repo, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "snapdel-2", UID: "u2"}}); err != nil {
		t.Fatal(err)
	}
	if l := lease(); l.Annotations[wellknown.AnnotationBatchJobUID] != "u1" {
		t.Fatalf("record overwritten: %v", l.Annotations)
	}
	// Freed and taken by the next batch: no record until its Job exists.
	l := lease()
	l.Spec.HolderIdentity = nil
	if err := c.Update(ctx, l); err != nil {
		t.Fatal(err)
	}
	if ok, err := f.acquire(ctx, repo, "snapdel-2"); err != nil || !ok {
		t.Fatalf("acquire of a free Lease: %v %v", ok, err)
	}
	if l := lease(); l.Annotations[wellknown.AnnotationBatchJobUID] != "" {
		t.Fatalf("a new holder inherited the old record: %v", l.Annotations)
	}
}

// Removing a finished batch deletes its work spec only when it is
// snapflow's: a ConfigMap of that name without the label is its owner's.
func TestRemoveBatchLeavesOthersConfigMaps(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		labels   map[string]string
		wantGone bool
	}{
		{map[string]string{wellknown.LabelManagedBy: wellknown.ManagedByValue}, true},
		{map[string]string{"app": "mine"}, false},
	} {
		job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "snapdel-1", UID: "job-uid"}}
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "snapdel-1", Labels: tc.labels}}
		c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(job, cm).Build()
		if err := (&Function{Client: c}).removeBatch(ctx, job); err != nil {
			t.Fatal(err)
		}
		err := c.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{})
		if gone := apierrors.IsNotFound(err); gone != tc.wantGone {
			t.Errorf("labels %v: ConfigMap gone %v (%v), want %v", tc.labels, gone, err, tc.wantGone)
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(job), &batchv1.Job{}); !apierrors.IsNotFound(err) {
			t.Errorf("the finished Job is still there: %v", err)
		}
	}
}
