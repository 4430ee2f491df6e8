package restore

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/mover"
	"github.com/snapflow/snapflow/internal/repository"
)

func i64(v int64) *int64 { return &v }

func TestInheritSecurityContextFromSnapshot(t *testing.T) {
	rec := &snapv1.RecordedIdentity{UID: i64(1000), GID: i64(2000), FSGroup: i64(3000), Src: "explicit"}
	inheritSnap := &snapv1.InheritSecurityContextFrom{Snapshot: &snapv1.Empty{}}
	tests := []struct {
		name          string
		m             *snapv1.MoverSpec
		rec           *snapv1.RecordedIdentity
		uid, gid, fsg *int64
	}{
		{"no mover settings: nothing inherited", nil, rec, nil, nil, nil},
		{"not asked: nothing inherited", &snapv1.MoverSpec{}, rec, nil, nil, nil},
		{"asked, nothing recorded", &snapv1.MoverSpec{InheritSecurityContextFrom: inheritSnap}, nil, nil, nil, nil},
		{"asked: the recorded identity", &snapv1.MoverSpec{InheritSecurityContextFrom: inheritSnap}, rec, i64(1000), i64(2000), i64(3000)},
		{"explicit settings win", &snapv1.MoverSpec{InheritSecurityContextFrom: inheritSnap, PodSecurityContext: &corev1.PodSecurityContext{RunAsUser: i64(42)}}, rec, i64(42), i64(2000), i64(3000)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := inherit(tt.m, tt.rec)
			var pod *corev1.PodSecurityContext
			if got != nil {
				pod = got.PodSecurityContext
			}
			eq := func(a, b *int64) bool { return (a == nil && b == nil) || (a != nil && b != nil && *a == *b) }
			if pod == nil {
				if tt.uid != nil {
					t.Fatalf("no pod security context, want uid %d", *tt.uid)
				}
				return
			}
			if !eq(pod.RunAsUser, tt.uid) || !eq(pod.RunAsGroup, tt.gid) || !eq(pod.FSGroup, tt.fsg) {
				t.Fatalf("pod security context %+v", pod)
			}
			if tt.m != nil && tt.m.PodSecurityContext != nil && tt.m.PodSecurityContext.RunAsGroup != nil {
				t.Fatal("inherit changed the Restore's own spec")
			}
		})
	}
}

func TestRestoreJobTakesASlotAndWritesTheTarget(t *testing.T) {
	q := resource.MustParse("1Gi")
	rs := &snapv1.Restore{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "r", UID: "uid-1"},
		Spec: snapv1.RestoreSpec{Target: snapv1.RestoreTarget{PVC: &snapv1.NewPVCTarget{Name: "t", Capacity: &q}}}}
	spec := &snapv1.RepositorySpec{
		Backend:    snapv1.Backend{Filesystem: &snapv1.FilesystemBackend{Path: "/repo", Volume: &snapv1.FilesystemVolume{PVC: &snapv1.LocalObjectRef{Name: "repo-pvc"}}}},
		Encryption: snapv1.RepositoryEncryption{PasswordSecretRef: snapv1.SecretKeyRef{Name: "pw", Key: "KOPIA_PASSWORD"}},
		Create:     &snapv1.RepositoryCreate{Enabled: true},
	}
	repo := &repository.Object{Ref: snapv1.RepositoryRef{Kind: snapv1.KindRepository, Name: "primary"}, Namespace: "ns", Spec: spec, Status: &snapv1.RepositoryStatus{}}
	f := &Function{MoverImage: "img"}
	// No client: a default restore mover needs no namespace opt-in, so the
	// gate never reads one.
	job, cm, err := f.build(context.Background(), rs, &resolution{repo: repo.Ref, snapshotID: "k1"}, repo, rs.Spec.Mover, &targetPlan{mount: "t"}, "r-job")
	if err != nil {
		t.Fatal(err)
	}
	if job.Labels[wellknown.LabelRepoPool] != repository.PoolKey(snapv1.KindRepository, "ns", "primary") || job.Labels[wellknown.LabelOp] != mover.OpRestore {
		t.Errorf("labels %v: a restore takes a slot in its repository's pool", job.Labels)
	}
	var target *corev1.VolumeMount
	for i, m := range job.Spec.Template.Spec.Containers[0].VolumeMounts {
		if m.Name == "source" {
			target = &job.Spec.Template.Spec.Containers[0].VolumeMounts[i]
		}
	}
	if target == nil || target.ReadOnly {
		t.Fatalf("the target PVC must be mounted read-write: %+v", job.Spec.Template.Spec.Containers[0].VolumeMounts)
	}
	w, err := mover.Parse([]byte(cm.Data[mover.WorkSpecKey]))
	if err != nil {
		t.Fatal(err)
	}
	if w.Repository.Create != nil || w.Restore.SnapshotID != "k1" || w.Restore.OnMissing != "Fail" || !w.Restore.Options.OverwriteFiles {
		t.Errorf("work spec %+v / %+v: a restore never creates a repository and keeps kopia's defaults", w.Repository, w.Restore)
	}

	// The Restore's own cache budgets reach kopia.
	mv := &snapv1.MoverSpec{Cache: &snapv1.MoverCache{ContentCacheSizeMb: ptr(int64(64)), MetadataCacheSizeMb: ptr(int64(32))}}
	_, cm, err = f.build(context.Background(), rs, &resolution{repo: repo.Ref, snapshotID: "k1"}, repo, mv, &targetPlan{mount: "t"}, "r-job")
	if err != nil {
		t.Fatal(err)
	}
	if w, err = mover.Parse([]byte(cm.Data[mover.WorkSpecKey])); err != nil || w.ContentCacheMB != 64 || w.MetadataCacheMB != 32 {
		t.Errorf("work spec cache budgets %d/%d (%v), want the Restore's 64/32", w.ContentCacheMB, w.MetadataCacheMB, err)
	}
}
