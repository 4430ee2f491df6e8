package snapshot

import (
	"context"
	"errors"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/functions/host"
	"github.com/snapflow/snapflow/internal/jobwatch"
	"github.com/snapflow/snapflow/internal/mover"
	"github.com/snapflow/snapflow/internal/moverjob"
	"github.com/snapflow/snapflow/internal/privilege"
	"github.com/snapflow/snapflow/internal/projection"
	"github.com/snapflow/snapflow/internal/repository"
)

// syncPin brings the kopia pin of a finished Snapshot in line with
// spec.pin, through a short mover Job (kopia rewrites the manifest, so the
// mover records the new id). The Job's name carries the kopia id and the
// wanted state, so duplicate events start it once.
func (f *Function) syncPin(ctx context.Context, s *snapv1.Snapshot) error {
	rec := s.Status.Snapshot
	if s.DeletionTimestamp != nil || rec == nil || rec.KopiaSnapshotID == "" || s.Status.Resolved == nil || s.Status.Resolved.Repository == nil {
		return nil
	}
	projected := repository.ProjectionEnabled(s.Status.Resolved.CredentialProjection)
	if pinInSync(s) {
		if projected {
			// A finished pin Job's credential copies go with the next event.
			return projection.Sweep(ctx, f.Client, s.Namespace, f.now())
		}
		return nil
	}
	name := moverjob.Name(s.Name+"-pin", fmt.Sprintf("%s/%s/%v", s.UID, rec.KopiaSnapshotID, s.Spec.Pin))
	var existing batchv1.Job
	if err := f.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: name}, &existing); err == nil {
		if !jobwatch.Done(&existing) || !host.Owned(&existing, s) {
			return nil // running, or not this Snapshot's
		}
		// The new kopia id, or why the pin failed (the KopiaPinned condition).
		why, err := jobwatch.ApplyReport(ctx, f.Client, &existing, s.UID, mover.OpPin)
		if why != "" {
			host.Log(ctx).Info("pin job ended without a result", "snapshot", s.Namespace+"/"+s.Name, "job", name, "reason", why)
		}
		return err
	} else if !apierrors.IsNotFound(err) {
		return err
	}
	// The repository is read from status, which movers write.
	if msg := repository.AccessProblem(ctx, f.Client, s.Namespace, *s.Status.Resolved.Repository); msg != "" {
		host.Log(ctx).Info("pin not synced: the Snapshot's recorded repository is not one its namespace may use", "snapshot", s.Namespace+"/"+s.Name, "problem", msg)
		return nil
	}
	repo, err := f.getRepository(ctx, *s.Status.Resolved.Repository, s.Namespace)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if repo.Status.Phase != snapv1.RepositoryReady {
		return nil // the next event after it turns Ready retries
	}
	work, mounts, err := repository.Work(repo.Ref, repo.Obj, repo.Spec)
	if err != nil {
		return nil
	}
	work.Create = nil
	job, cm, err := host.BuildMoverJob(ctx, f.Client, moverjob.Params{
		Name: name, Namespace: s.Namespace, Owner: ownerRef(s),
		// Pinning is bookkeeping: it takes no repository slot.
		Labels: map[string]string{wellknown.LabelSnapshot: s.Name, wellknown.LabelOp: mover.OpPin},
		Image:  f.MoverImage, ServiceAccount: f.MoverServiceAccount,
		Work: mover.WorkSpec{Operation: mover.OpPin, Target: mover.Target{Kind: "Snapshot", Namespace: s.Namespace, Name: s.Name, UID: string(s.UID)},
			Repository: work, Pin: &mover.PinWork{SnapshotID: rec.KopiaSnapshotID, Pin: s.Spec.Pin}},
		PasswordSecret: repo.Spec.Encryption.PasswordSecretRef.Name, PasswordKey: repo.Spec.Encryption.PasswordSecretRef.Key,
		CredentialsSecret: mounts.Credentials, CABundle: mounts.CABundle,
		RepositoryClaim: mounts.RepoClaim, RepositoryNFS: mounts.RepoNFS, RepositoryHost: mounts.HostPath,
		RepositoryHostTrusted: mounts.HostTrusted,
		Defaults:              repo.Spec.MoverDefaults, ActiveDeadline: 600,
	})
	msg := ""
	if errors.Is(err, privilege.ErrNotPermitted) {
		msg = err.Error()
	} else if err != nil {
		return err
	}
	// Copies go only to a namespace the repository still admits, with both
	// owners' consent as it stands now.
	if msg == "" {
		msg = repository.CopyRefused(ctx, f.Client, repo, s.Namespace, projected, "the Snapshot's SnapshotPolicy")
	}
	if msg == "" {
		if err := projection.Apply(ctx, f.Client, job, repo.Homes(), true, ""); errors.Is(err, projection.ErrSource) {
			msg = err.Error()
		} else if err != nil {
			return err
		}
	}
	if msg != "" {
		if f.Recorder != nil {
			f.Recorder.Event(s, corev1.EventTypeWarning, "PinNotPossible", msg)
		}
		return nil // nothing changes until the credentials or the consent do
	}
	if err := host.CreateWorkSpec(ctx, f.Client, cm); err != nil {
		return err
	}
	if err := f.Client.Create(ctx, job); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create the pin job: %w", err)
	}
	host.Log(ctx).Info("kopia pin job created", "snapshot", s.Namespace+"/"+s.Name, "pin", s.Spec.Pin, "kopiaSnapshot", rec.KopiaSnapshotID)
	return nil
}

// pinInSync says whether kopia's pin already matches spec.pin (or there is
// no kopia snapshot to pin).
func pinInSync(s *snapv1.Snapshot) bool {
	rec := s.Status.Snapshot
	if rec == nil || rec.KopiaSnapshotID == "" {
		return true
	}
	return (rec.Pinned != nil && *rec.Pinned) == s.Spec.Pin
}
