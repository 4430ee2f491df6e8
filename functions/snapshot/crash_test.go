package snapshot

import (
	"context"
	"errors"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/internal/scheme"
)

var errKilled = errors.New("process killed")

// dying lets writes through until the mover Job exists, then fails every
// call: a function killed between creating the Job and recording it.
type dying struct {
	client.Client
	dead bool
}

func (d *dying) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if d.dead {
		return errKilled
	}
	err := d.Client.Create(ctx, obj, opts...)
	if _, isJob := obj.(*batchv1.Job); isJob && err == nil {
		d.dead = true
	}
	return err
}

func (d *dying) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if d.dead {
		return errKilled
	}
	return d.Client.Get(ctx, key, obj, opts...)
}

func (d *dying) Status() client.SubResourceWriter {
	if d.dead {
		return deadWriter{}
	}
	return d.Client.Status()
}

type deadWriter struct{ client.SubResourceWriter }

func (deadWriter) Patch(context.Context, client.Object, client.Patch, ...client.SubResourcePatchOption) error {
	return errKilled
}

func (deadWriter) Update(context.Context, client.Object, ...client.SubResourceUpdateOption) error {
	return errKilled
}

// oneRunFixture is a namespace with a Ready filesystem Repository, a policy
// backing up pvc with copyMethod Direct, and Snapshot s1 of that policy.
func oneRunFixture(ns string, pvc *corev1.PersistentVolumeClaim) []client.Object {
	return []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		pvc,
		&snapv1.Repository{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "primary"},
			Spec: snapv1.RepositorySpec{
				Backend:    snapv1.Backend{Filesystem: &snapv1.FilesystemBackend{Path: "/repo", Volume: &snapv1.FilesystemVolume{PVC: &snapv1.LocalObjectRef{Name: "repo"}}}},
				Encryption: snapv1.RepositoryEncryption{PasswordSecretRef: snapv1.SecretKeyRef{Name: "pw", Key: "KOPIA_PASSWORD"}}},
			Status: snapv1.RepositoryStatus{Phase: snapv1.RepositoryReady}},
		&snapv1.SnapshotPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"},
			Spec: snapv1.SnapshotPolicySpec{Repository: &snapv1.RepositoryRef{Name: "primary"}, CopyMethod: snapv1.CopyDirect,
				Sources: []snapv1.Source{{PVC: &snapv1.LocalObjectRef{Name: pvc.Name}}}}},
		&snapv1.Snapshot{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s1", UID: "uid-s1"},
			Spec: snapv1.SnapshotSpec{PolicyRef: &snapv1.PolicyRef{Name: "app"}}},
	}
}

// A function killed after creating the mover Job but before recording it:
// the redelivered event, handled by a fresh instance, adopts that Job
// instead of starting a second backup, and the run converges.
func TestKilledMidRequestConvergesOnRedelivery(t *testing.T) {
	ctx := context.Background()
	ns := "app"
	objs := oneRunFixture(ns, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-data"}, Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}})
	base := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).
		WithStatusSubresource(&snapv1.Snapshot{}, &snapv1.Repository{}).Build()

	first := &Function{Client: &dying{Client: base}, Namespace: "snapflow-system", MoverImage: "img"}
	if err := first.ReconcileSnapshot(ctx, ns, "s1"); !errors.Is(err, errKilled) {
		t.Fatalf("the first instance should die after creating the Job, got %v", err)
	}
	var jobs batchv1.JobList
	if err := base.List(ctx, &jobs, client.InNamespace(ns)); err != nil || len(jobs.Items) != 1 {
		t.Fatalf("after the crash: %d jobs (%v), want the 1 it created", len(jobs.Items), err)
	}
	var s snapv1.Snapshot
	_ = base.Get(ctx, client.ObjectKey{Namespace: ns, Name: "s1"}, &s)
	if s.Status.Job != nil {
		t.Fatalf("the crash happened before the Job was recorded, yet status has %+v", s.Status.Job)
	}

	// Redelivery to a fresh instance (nothing survives in memory).
	second := &Function{Client: base, Namespace: "snapflow-system", MoverImage: "img"}
	for i := 0; i < 2; i++ { // and once more, as at-least-once delivery may
		if err := second.ReconcileSnapshot(ctx, ns, "s1"); err != nil {
			t.Fatal(err)
		}
	}
	if err := base.List(ctx, &jobs, client.InNamespace(ns)); err != nil || len(jobs.Items) != 1 {
		t.Fatalf("after redelivery: %d jobs, want still 1", len(jobs.Items))
	}
	_ = base.Get(ctx, client.ObjectKey{Namespace: ns, Name: "s1"}, &s)
	if s.Status.Phase != snapv1.SnapshotRunning || s.Status.Job == nil || s.Status.Job.Name != jobs.Items[0].Name {
		t.Fatalf("status %+v / job %+v: the fresh instance must adopt the Job", s.Status.Phase, s.Status.Job)
	}
}
