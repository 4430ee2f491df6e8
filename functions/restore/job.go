package restore

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
	"github.com/snapflow/snapflow/internal/privilege"
	"github.com/snapflow/snapflow/internal/repository"
	kernel "github.com/snapflow/snapflow/internal/restore"
)

// build renders the restore's mover Job and work spec through the privilege
// gate: a mover the namespace does not allow is a *privilege.NotPermitted.
func (f *Function) build(ctx context.Context, rs *snapv1.Restore, res *resolution, repo *repository.Object, mv *snapv1.MoverSpec, tgt *targetPlan, name string) (*batchv1.Job, *corev1.ConfigMap, error) {
	work, mounts, err := repository.Work(repo.Ref, repo.Obj, repo.Spec)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", repo.Key(), err)
	}
	if why := repo.ClaimProblem(mounts, "restore mover", rs.Namespace); why != "" {
		return nil, nil, fmt.Errorf("%s; use an S3 or NFS backend for a shared repository", why)
	}
	work.Create = nil // a restore never creates a repository
	wait, err := kernel.WaitTimeout(rs)
	if err != nil {
		return nil, nil, err
	}
	rw := &mover.RestoreWork{SnapshotID: res.snapshotID, Query: res.query, OnMissing: string(kernel.OnMissing(rs)),
		WaitTimeoutSeconds: int64(wait / time.Second), Options: kernel.Options(rs.Spec.Options), Nothing: res.missing, Stream: tgt.exec}
	account := ""
	if tgt.exec != nil {
		account = name
	}
	spec := mover.WorkSpec{Operation: mover.OpRestore, Target: mover.Target{Kind: "Restore", Namespace: rs.Namespace, Name: rs.Name, UID: string(rs.UID)},
		Repository: work, Restore: rw}
	c := moverjob.EffectiveCache(mv, repo.Spec.MoverDefaults)
	moverjob.CacheBudgets(&spec, c)
	owner := metav1.OwnerReference{APIVersion: snapv1.GroupVersion.String(), Kind: "Restore", Name: rs.Name, UID: rs.UID, Controller: ptr(true), BlockOwnerDeletion: ptr(true)}
	return host.BuildMoverJob(ctx, f.Client, moverjob.Params{
		Name: name, Namespace: rs.Namespace, Owner: owner,
		// Restores take a repository slot but are never queued behind backups.
		Labels: map[string]string{wellknown.LabelRestore: rs.Name, wellknown.LabelOp: mover.OpRestore, wellknown.LabelRepoPool: repository.PoolKey(repo.Ref.Kind, repo.Namespace, repo.Ref.Name)},
		Image:  f.MoverImage, ServiceAccount: f.MoverServiceAccount, Work: spec,
		PasswordSecret: repo.Spec.Encryption.PasswordSecretRef.Name, PasswordKey: repo.Spec.Encryption.PasswordSecretRef.Key,
		CredentialsSecret: mounts.Credentials, CABundle: mounts.CABundle,
		// A restore's cache is its own (never a backup's Persistent one).
		SourceClaim: tgt.mount, SourceReadOnly: false, Cache: c, ExecAccount: account,
		RepositoryClaim: mounts.RepoClaim, RepositoryNFS: mounts.RepoNFS, RepositoryHost: mounts.HostPath,
		RepositoryHostTrusted: mounts.HostTrusted,
		Mover:                 mv, Defaults: repo.Spec.MoverDefaults, FailurePolicy: rs.Spec.FailurePolicy,
	})
}

// inherit applies inheritSecurityContextFrom.snapshot: the restore runs as
// the identity the backup recorded, so restored files get their owner back
// without a root mover. Explicit settings in the Restore still win.
func inherit(m *snapv1.MoverSpec, rec *snapv1.RecordedIdentity) *snapv1.MoverSpec {
	if m == nil || m.InheritSecurityContextFrom == nil || m.InheritSecurityContextFrom.Snapshot == nil || rec == nil {
		return m
	}
	return privilege.Inherit(m, &corev1.PodSecurityContext{RunAsUser: rec.UID, RunAsGroup: rec.GID, FSGroup: rec.FSGroup})
}

// moverFor is the Restore's mover settings with the identity it inherits
// layered under them: the one its snapshot recorded, or that of a live pod
// its workloadSelector matches (read fresh, before the privilege gate). The
// condition says what was inherited; nil when nothing was asked.
func (f *Function) moverFor(ctx context.Context, rs *snapv1.Restore, rec *snapv1.RecordedIdentity, d *snapv1.MoverDefaults) (*snapv1.MoverSpec, *metav1.Condition, error) {
	m, c, err := f.inheritedMover(ctx, rs, rec)
	if c != nil && c.Status == metav1.ConditionTrue {
		// Say whom the mover runs as in the end: explicit settings may
		// override what was inherited.
		pod, sc := privilege.SecurityContexts(d, m)
		uid, gid := privilege.Effective(pod, sc)
		c.Message += "; it runs as " + privilege.Describe(uid, gid, pod.FSGroup)
	}
	return m, c, err
}

func (f *Function) inheritedMover(ctx context.Context, rs *snapv1.Restore, rec *snapv1.RecordedIdentity) (*snapv1.MoverSpec, *metav1.Condition, error) {
	m := rs.Spec.Mover
	if m == nil || m.InheritSecurityContextFrom == nil {
		return m, nil, nil
	}
	c := &metav1.Condition{Type: wellknown.ConditionSecurityContextInherited, Status: metav1.ConditionTrue, Reason: privilege.ReasonInherited, ObservedGeneration: rs.Generation}
	if m.InheritSecurityContextFrom.Snapshot != nil {
		if rec == nil || (rec.UID == nil && rec.GID == nil && rec.FSGroup == nil) {
			c.Status, c.Reason = metav1.ConditionFalse, "NothingRecorded"
			c.Message = "the snapshot recorded no mover identity (it predates the record, or was not taken by snapflow); the mover runs with its explicit and default settings"
			return m, c, nil
		}
		c.Message = "the mover inherits the identity the backup recorded (" + privilege.Describe(rec.UID, rec.GID, rec.FSGroup) + ")"
		return inherit(m, rec), c, nil
	}
	w, ni, err := host.Workload(ctx, f.Client, rs.Namespace, m.InheritSecurityContextFrom, "")
	if ni != nil {
		c.Status, c.Reason = metav1.ConditionFalse, ni.Reason
		c.Message = ni.Message + "; the mover runs with its explicit and default settings"
		return m, c, nil
	}
	if err != nil || w == nil {
		return m, nil, err
	}
	id := w.Identity
	c.Message = fmt.Sprintf("the mover inherits %s from container %s of pod %s", privilege.Describe(id.RunAsUser, id.RunAsGroup, id.FSGroup), w.Container, w.Pod)
	return privilege.Inherit(m, id), c, nil
}

func ptr[T any](v T) *T { return &v }
