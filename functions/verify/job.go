package verify

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/functions/host"
	"github.com/snapflow/snapflow/internal/mover"
	"github.com/snapflow/snapflow/internal/moverjob"
	"github.com/snapflow/snapflow/internal/repository"
	"github.com/snapflow/snapflow/internal/validate"
	kernel "github.com/snapflow/snapflow/internal/verify"
)

// build renders one verification's mover Job. Its name is derived from the
// policy, tier, repository and slot, so a duplicate event cannot start a
// second run for the same slot.
func (f *Function) build(ctx context.Context, p *snapv1.SnapshotPolicy, ref snapv1.RepositoryRef, tier string, latest *snapv1.Snapshot, repo *repository.Object, slot time.Time) (*batchv1.Job, *corev1.ConfigMap, error) {
	work, mounts, err := repository.Work(repo.Ref, repo.Obj, repo.Spec)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", repo.Key(), err)
	}
	if why := repo.ClaimProblem(mounts, "verify job", p.Namespace); why != "" {
		return nil, nil, fmt.Errorf("%s; use an S3 or NFS backend for a shared repository", why)
	}
	work.Create = nil
	v := p.Spec.Verification
	vw := &mover.VerifyWork{Tier: tier, SnapshotID: latest.Status.Snapshot.KopiaSnapshotID,
		RepositoryKind: string(ref.Kind), RepositoryName: ref.Name, RepositoryNamespace: ref.Namespace, Slot: slot, SuccessExpr: v.SuccessExpr}
	if v.VerifyFilesPercent != nil {
		vw.Quick.FilesPercent = float64(*v.VerifyFilesPercent)
	}
	var scratch *corev1.VolumeSource
	switch tier {
	case kernel.Quick:
		q := v.Quick
		if q.FileParallelism != nil {
			vw.Quick.Parallelism = int(*q.FileParallelism)
		} else if q.Parallel != nil {
			vw.Quick.Parallelism = int(*q.Parallel)
		}
		if q.FileQueueLength != nil {
			vw.Quick.FileQueueLength = int(*q.FileQueueLength)
		}
		if q.MaxErrors != nil {
			vw.Quick.MaxErrors = int(*q.MaxErrors)
		}
	case kernel.Deep:
		d := v.Deep
		if d.Parallel != nil {
			vw.DeepParallel = int(*d.Parallel)
		}
		scratch = scratchVolume(d, repo.Spec.MoverDefaults)
		if scratch.EmptyDir != nil && d.StorageClassName != nil && f.Recorder != nil {
			f.Recorder.Event(p, corev1.EventTypeWarning, "ScratchStorageClassIgnored", fmt.Sprintf(
				"spec.verification.deep.storageClassName %q is ignored without deep.capacity: the scratch volume is an emptyDir; set a capacity to get a PVC of that class", *d.StorageClassName))
		}
	}
	spec := mover.WorkSpec{Operation: mover.OpVerify, Target: mover.Target{Kind: "SnapshotPolicy", Namespace: p.Namespace, Name: p.Name, UID: string(p.UID)},
		Repository: work, Verify: vw}
	name := moverjob.Name(moverjob.Prefix(p.Name, 40)+"-verify-"+tier, fmt.Sprintf("%s/%s/%s/%d", p.UID, tier, validate.RepoKey(ref, p.Namespace), slot.Unix()))
	owner := metav1.OwnerReference{APIVersion: snapv1.GroupVersion.String(), Kind: "SnapshotPolicy", Name: p.Name, UID: p.UID, Controller: ptr(true), BlockOwnerDeletion: ptr(true)}
	// Verification is outside the repository pool: it never parks a backup.
	job, cm, err := host.BuildMoverJob(ctx, f.Client, moverjob.Params{
		Name: name, Namespace: p.Namespace, Owner: owner,
		Labels: map[string]string{wellknown.LabelVerify: p.Name, wellknown.LabelOp: mover.OpVerify},
		Image:  f.MoverImage, ServiceAccount: f.MoverServiceAccount, Work: spec,
		PasswordSecret: repo.Spec.Encryption.PasswordSecretRef.Name, PasswordKey: repo.Spec.Encryption.PasswordSecretRef.Key,
		CredentialsSecret: mounts.Credentials, CABundle: mounts.CABundle, Scratch: scratch,
		RepositoryClaim: mounts.RepoClaim, RepositoryNFS: mounts.RepoNFS, RepositoryHost: mounts.HostPath,
		RepositoryHostTrusted: mounts.HostTrusted,
		Mover:                 p.Spec.Mover, Defaults: repo.Spec.MoverDefaults,
	})
	return job, cm, err
}

// scratchVolume is where deep verification restores: a generic ephemeral
// PVC when a capacity is given (so large volumes do not fill the node), an
// emptyDir otherwise.
func scratchVolume(d *snapv1.DeepVerification, defaults *snapv1.MoverDefaults) *corev1.VolumeSource {
	capacity, class := d.Capacity, d.StorageClassName
	if capacity == nil && defaults != nil && defaults.Scratch != nil {
		capacity = defaults.Scratch.Capacity
		if class == nil {
			class = defaults.Scratch.StorageClassName
		}
	}
	if capacity == nil {
		return &corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}
	}
	return &corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: class,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: *capacity}},
		},
	}}}
}

func ptr[T any](v T) *T { return &v }
