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
	"github.com/snapflow/snapflow/functions/runtime"
	"github.com/snapflow/snapflow/functions/snapshot"
	"github.com/snapflow/snapflow/internal/mover"
	"github.com/snapflow/snapflow/internal/moverjob"
	"github.com/snapflow/snapflow/internal/restoreplan"
)

// build renders the restore's mover Job and work spec through the privilege
// gate: a mover the namespace does not allow is a *privilege.NotPermitted.
func (f *Function) build(ctx context.Context, rs *snapv1.Restore, res *resolution, repo *snapshot.RepositoryObject, pvc, name string) (*batchv1.Job, *corev1.ConfigMap, error) {
	work, mounts, err := snapshot.RepositoryWork(repo.Ref, repo.Obj, repo.Spec)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", repo.Key(), err)
	}
	if repo.Ref.Kind == snapv1.KindClusterRepository && mounts.RepoClaim != "" {
		return nil, nil, fmt.Errorf("ClusterRepository %s keeps its repository on a PVC, which a mover in namespace %s cannot mount; use an S3 or NFS backend for a shared repository", repo.Ref.Name, rs.Namespace)
	}
	work.Create = nil // a restore never creates a repository
	wait, err := restoreplan.WaitTimeout(rs)
	if err != nil {
		return nil, nil, err
	}
	rw := &mover.RestoreWork{SnapshotID: res.snapshotID, Query: res.query, OnMissing: string(restoreplan.OnMissing(rs)),
		WaitTimeoutSeconds: int64(wait / time.Second), Options: restoreplan.Options(rs.Spec.Options), Nothing: res.missing}
	spec := mover.WorkSpec{Operation: mover.OpRestore, Target: mover.Target{Kind: "Restore", Namespace: rs.Namespace, Name: rs.Name, UID: string(rs.UID)},
		Repository: work, Restore: rw}
	mv := inherit(rs.Spec.Mover, res.recorded)
	c := moverjob.EffectiveCache(mv, repo.Spec.MoverDefaults)
	if c != nil {
		if c.ContentCacheSizeMb != nil {
			spec.ContentCacheMB = *c.ContentCacheSizeMb
		}
		if c.MetadataCacheSizeMb != nil {
			spec.MetadataCacheMB = *c.MetadataCacheSizeMb
		}
	}
	owner := metav1.OwnerReference{APIVersion: snapv1.GroupVersion.String(), Kind: "Restore", Name: rs.Name, UID: rs.UID, Controller: ptr(true), BlockOwnerDeletion: ptr(true)}
	return runtime.BuildMoverJob(ctx, f.Client, moverjob.Params{
		Name: name, Namespace: rs.Namespace, Owner: owner,
		// Restores take a repository slot but are never queued behind backups.
		Labels: map[string]string{wellknown.LabelRestore: rs.Name, wellknown.LabelOp: mover.OpRestore, wellknown.LabelRepoPool: snapshot.PoolKey(repo.Ref.Kind, repo.Namespace, repo.Ref.Name)},
		Image:  f.MoverImage, ServiceAccount: f.MoverServiceAccount, Work: spec,
		PasswordSecret: repo.Spec.Encryption.PasswordSecretRef.Name, PasswordKey: repo.Spec.Encryption.PasswordSecretRef.Key,
		CredentialsSecret: mounts.Credentials, CABundle: mounts.CABundle,
		// A restore's cache is its own (never a backup's Persistent one).
		SourceClaim: pvc, SourceReadOnly: false, Cache: c,
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
	out := m.DeepCopy()
	pod := &corev1.PodSecurityContext{RunAsUser: rec.UID, RunAsGroup: rec.GID, FSGroup: rec.FSGroup}
	if p := m.PodSecurityContext; p != nil {
		pod = p.DeepCopy()
		if pod.RunAsUser == nil {
			pod.RunAsUser = rec.UID
		}
		if pod.RunAsGroup == nil {
			pod.RunAsGroup = rec.GID
		}
		if pod.FSGroup == nil {
			pod.FSGroup = rec.FSGroup
		}
	}
	out.PodSecurityContext = pod
	return out
}

func ptr[T any](v T) *T { return &v }
