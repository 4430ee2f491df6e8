package verify

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/internal/kopia"
	"github.com/snapflow/snapflow/internal/mover"
	"github.com/snapflow/snapflow/internal/repository"
	"github.com/snapflow/snapflow/internal/scheme"
	kernel "github.com/snapflow/snapflow/internal/verify"
)

// A deep verification restores into scratch space: a PVC of the policy's
// capacity and class, else of the repository's moverDefaults.scratch
// (either kind), else an emptyDir, with a warning when a class was given
// without a capacity.
func TestBuildDeepScratch(t *testing.T) {
	ctx := context.Background()
	q := func(s string) *resource.Quantity { v := resource.MustParse(s); return &v }
	str := func(s string) *string { return &s }
	three := int32(3)
	s3Spec := func(scratch *snapv1.Scratch) snapv1.RepositorySpec {
		spec := snapv1.RepositorySpec{Backend: snapv1.Backend{S3: &snapv1.S3Backend{Bucket: "b", Endpoint: "s3.example.com", Auth: &snapv1.ObjectStoreAuth{SecretRef: &snapv1.SecretRef{Name: "s3-keys"}}}},
			Encryption: snapv1.RepositoryEncryption{PasswordSecretRef: snapv1.SecretKeyRef{Name: "pw", Key: "password"}}}
		if scratch != nil {
			spec.MoverDefaults = &snapv1.MoverDefaults{Scratch: scratch}
		}
		return spec
	}
	namespaced := func(scratch *snapv1.Scratch) *repository.Object {
		return repository.FromRepository(&snapv1.Repository{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "primary"}, Spec: s3Spec(scratch)})
	}
	cluster := func(scratch *snapv1.Scratch) *repository.Object {
		return repository.FromCluster(&snapv1.ClusterRepository{ObjectMeta: metav1.ObjectMeta{Name: "shared"}, Spec: snapv1.ClusterRepositorySpec{RepositorySpec: s3Spec(scratch)}}, "snapflow-system")
	}
	for _, tc := range []struct {
		name      string
		deep      snapv1.DeepVerification
		repo      *repository.Object
		wantClaim string // "class/capacity" of the ephemeral claim, "" for an emptyDir
		warning   string
	}{
		{"the policy's capacity, class and parallelism", snapv1.DeepVerification{Capacity: q("20Gi"), StorageClassName: str("fast"), Parallel: &three}, namespaced(nil), "fast/20Gi", ""},
		{"the policy's capacity wins over the repository's scratch", snapv1.DeepVerification{Capacity: q("5Gi")},
			namespaced(&snapv1.Scratch{Capacity: q("50Gi"), StorageClassName: str("slow")}), "/5Gi", ""},
		{"a Repository's moverDefaults.scratch", snapv1.DeepVerification{}, namespaced(&snapv1.Scratch{Capacity: q("50Gi"), StorageClassName: str("slow")}), "slow/50Gi", ""},
		{"the policy's class with the repository's capacity", snapv1.DeepVerification{StorageClassName: str("fast")},
			namespaced(&snapv1.Scratch{Capacity: q("50Gi"), StorageClassName: str("slow")}), "fast/50Gi", ""},
		{"a ClusterRepository's moverDefaults.scratch", snapv1.DeepVerification{}, cluster(&snapv1.Scratch{Capacity: q("8Gi")}), "/8Gi", ""},
		{"no capacity anywhere", snapv1.DeepVerification{}, namespaced(nil), "", ""},
		{"a class without a capacity", snapv1.DeepVerification{StorageClassName: str("fast")}, namespaced(nil), "", "ScratchStorageClassIgnored"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := record.NewFakeRecorder(4)
			f := &Function{Client: fake.NewClientBuilder().WithScheme(scheme.New()).Build(), MoverImage: "snapflow:1", MoverServiceAccount: "snapflow-mover", Recorder: rec}
			deep := tc.deep
			p := &snapv1.SnapshotPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "db", UID: "p-uid"},
				Spec: snapv1.SnapshotPolicySpec{Verification: &snapv1.Verification{Deep: &deep}}}
			latest := &snapv1.Snapshot{Status: snapv1.SnapshotStatus{Snapshot: &snapv1.SnapshotRecord{KopiaSnapshotID: "k1"}}}
			job, cm, err := f.build(ctx, p, tc.repo.Ref, kernel.Deep, latest, tc.repo, time.Date(2026, 12, 7, 3, 0, 0, 0, time.UTC))
			if err != nil {
				t.Fatal(err)
			}
			var work mover.WorkSpec
			if err := json.Unmarshal([]byte(cm.Data[mover.WorkSpecKey]), &work); err != nil || work.Verify == nil {
				t.Fatalf("work spec %q: %v", cm.Data[mover.WorkSpecKey], err)
			}
			if want := 0; tc.deep.Parallel != nil && work.Verify.DeepParallel != int(*tc.deep.Parallel) || tc.deep.Parallel == nil && work.Verify.DeepParallel != want {
				t.Fatalf("deepParallel %d, want %v", work.Verify.DeepParallel, tc.deep.Parallel)
			}
			var scratch *corev1.Volume
			for i, v := range job.Spec.Template.Spec.Volumes {
				if v.Name == "scratch" {
					scratch = &job.Spec.Template.Spec.Volumes[i]
				}
			}
			if scratch == nil {
				t.Fatalf("no scratch volume in %+v", job.Spec.Template.Spec.Volumes)
			}
			got := ""
			if e := scratch.Ephemeral; e != nil {
				s := e.VolumeClaimTemplate.Spec
				class := ""
				if s.StorageClassName != nil {
					class = *s.StorageClassName
				}
				got = class + "/" + s.Resources.Requests.Storage().String()
			} else if scratch.EmptyDir == nil {
				t.Fatalf("scratch is neither a claim nor an emptyDir: %+v", scratch.VolumeSource)
			}
			if got != tc.wantClaim {
				t.Fatalf("scratch claim %q, want %q", got, tc.wantClaim)
			}
			var events []string
			for len(rec.Events) > 0 {
				events = append(events, <-rec.Events)
			}
			if joined := strings.Join(events, "\n"); (tc.warning == "") != (joined == "") || !strings.Contains(joined, tc.warning) {
				t.Fatalf("events %q, want %q", events, tc.warning)
			}
		})
	}
}

// A ClusterRepository that keeps its repository on a PVC cannot be
// verified from a tenant's namespace: the build says so instead of
// rendering a Job that could never mount it.
func TestBuildRefusesAClusterRepositoryOnAPVC(t *testing.T) {
	spec := snapv1.RepositorySpec{Backend: snapv1.Backend{Filesystem: &snapv1.FilesystemBackend{Path: "/r", Volume: &snapv1.FilesystemVolume{PVC: &snapv1.LocalObjectRef{Name: "repo-claim"}}}},
		Encryption: snapv1.RepositoryEncryption{PasswordSecretRef: snapv1.SecretKeyRef{Name: "pw", Key: "password"}}}
	repo := repository.FromCluster(&snapv1.ClusterRepository{ObjectMeta: metav1.ObjectMeta{Name: "shared"}, Spec: snapv1.ClusterRepositorySpec{RepositorySpec: spec}}, "snapflow-system")
	f := &Function{Client: fake.NewClientBuilder().WithScheme(scheme.New()).Build(), MoverImage: "snapflow:1"}
	p := &snapv1.SnapshotPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "db"},
		Spec: snapv1.SnapshotPolicySpec{Verification: &snapv1.Verification{Quick: &snapv1.QuickVerification{}}}}
	latest := &snapv1.Snapshot{Status: snapv1.SnapshotStatus{Snapshot: &snapv1.SnapshotRecord{KopiaSnapshotID: "k1"}}}
	_, _, err := f.build(context.Background(), p, repo.Ref, kernel.Quick, latest, repo, time.Now())
	if err == nil || !strings.Contains(err.Error(), "keeps its repository on a PVC of namespace snapflow-system, which a verify job in namespace app cannot mount; use an S3 or NFS backend") {
		t.Fatalf("err %v", err)
	}
}

// A quick verification's tuning reaches the mover's work spec:
// fileParallelism (or the older parallel), the file queue, the error
// budget and the share of files read.
func TestBuildQuickTuning(t *testing.T) {
	i32 := func(v int32) *int32 { return &v }
	repo := repository.FromRepository(&snapv1.Repository{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "primary"},
		Spec: snapv1.RepositorySpec{Backend: snapv1.Backend{S3: &snapv1.S3Backend{Bucket: "b", Endpoint: "s3.example.com", Auth: &snapv1.ObjectStoreAuth{SecretRef: &snapv1.SecretRef{Name: "s3-keys"}}}},
			Encryption: snapv1.RepositoryEncryption{PasswordSecretRef: snapv1.SecretKeyRef{Name: "pw", Key: "password"}}}})
	for _, tc := range []struct {
		name    string
		quick   snapv1.QuickVerification
		percent *int32
		want    kopia.VerifyOptions
	}{
		{"defaults", snapv1.QuickVerification{}, nil, kopia.VerifyOptions{}},
		{"parallel alone", snapv1.QuickVerification{Parallel: i32(3)}, nil, kopia.VerifyOptions{Parallelism: 3}},
		{"fileParallelism wins over parallel", snapv1.QuickVerification{Parallel: i32(3), FileParallelism: i32(6)}, nil, kopia.VerifyOptions{Parallelism: 6}},
		{"queue, error budget and share of files", snapv1.QuickVerification{FileQueueLength: i32(500), MaxErrors: i32(7)}, i32(25),
			kopia.VerifyOptions{FileQueueLength: 500, MaxErrors: 7, FilesPercent: 25}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &Function{Client: fake.NewClientBuilder().WithScheme(scheme.New()).Build(), MoverImage: "snapflow:1", MoverServiceAccount: "snapflow-mover"}
			quick := tc.quick
			p := &snapv1.SnapshotPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "db", UID: "p-uid"},
				Spec: snapv1.SnapshotPolicySpec{Verification: &snapv1.Verification{Quick: &quick, VerifyFilesPercent: tc.percent}}}
			latest := &snapv1.Snapshot{Status: snapv1.SnapshotStatus{Snapshot: &snapv1.SnapshotRecord{KopiaSnapshotID: "k1"}}}
			_, cm, err := f.build(context.Background(), p, repo.Ref, kernel.Quick, latest, repo, time.Date(2026, 12, 7, 3, 0, 0, 0, time.UTC))
			if err != nil {
				t.Fatal(err)
			}
			var work mover.WorkSpec
			if err := json.Unmarshal([]byte(cm.Data[mover.WorkSpecKey]), &work); err != nil || work.Verify == nil {
				t.Fatalf("work spec %q: %v", cm.Data[mover.WorkSpecKey], err)
			}
			if work.Verify.Quick != tc.want || work.Verify.Tier != kernel.Quick || work.Verify.SnapshotID != "k1" {
				t.Fatalf("quick %+v (tier %s, snapshot %s), want %+v over k1", work.Verify.Quick, work.Verify.Tier, work.Verify.SnapshotID, tc.want)
			}
		})
	}
}

// A quick tier stored in the old flat shape (cron, jitter, timezone on the
// tier itself; refused for new writes) is still scheduled as written.
func TestTierScheduleReadsTheFlatShape(t *testing.T) {
	repo := repository.FromRepository(&snapv1.Repository{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "primary"}})
	for _, tc := range []struct {
		name  string
		quick snapv1.QuickVerification
		tz    string
		jit   time.Duration
	}{
		{"flat", snapv1.QuickVerification{Cron: "0 3 * * *", Timezone: "Europe/Berlin", Jitter: "10m"}, "Europe/Berlin", 10 * time.Minute},
		{"nested wins", snapv1.QuickVerification{Cron: "0 3 * * *", Timezone: "Europe/Berlin",
			Schedule: &snapv1.CronSpec{Cron: "0 4 * * *", Timezone: "Asia/Tokyo"}}, "Asia/Tokyo", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			quick := tc.quick
			p := &snapv1.SnapshotPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "db", UID: "p-uid"},
				Spec: snapv1.SnapshotPolicySpec{Verification: &snapv1.Verification{Quick: &quick}}}
			spec, err := tierSchedule(p, kernel.Quick, repo)
			if err != nil || spec == nil {
				t.Fatalf("spec %+v, err %v", spec, err)
			}
			if spec.Location.String() != tc.tz || spec.Jitter != tc.jit {
				t.Fatalf("timezone %s jitter %s, want %s and %s", spec.Location, spec.Jitter, tc.tz, tc.jit)
			}
		})
	}
}
