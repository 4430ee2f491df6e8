package maintenance

import (
	"context"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	kernel "github.com/snapflow/snapflow/internal/maintenance"
	"github.com/snapflow/snapflow/internal/mover"
	"github.com/snapflow/snapflow/internal/scheme"
)

var now = time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)

func repoSpec() snapv1.RepositorySpec {
	return snapv1.RepositorySpec{
		Backend:    snapv1.Backend{Filesystem: &snapv1.FilesystemBackend{Path: "/repo", Volume: &snapv1.FilesystemVolume{PVC: &snapv1.LocalObjectRef{Name: "repo-pvc"}}}},
		Encryption: snapv1.RepositoryEncryption{PasswordSecretRef: snapv1.SecretKeyRef{Name: "pw", Key: "KOPIA_PASSWORD"}},
	}
}

func newFunction(objs ...client.Object) (*Function, client.Client) {
	objs = append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system", UID: "cluster-uid"}})
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).
		WithStatusSubresource(&snapv1.Maintenance{}, &snapv1.Repository{}, &snapv1.ClusterRepository{}).Build()
	return &Function{Client: c, Namespace: "snapflow-system", MoverImage: "img", Now: func() time.Time { return now }}, c
}

func get[T client.Object](t *testing.T, c client.Client, ns, name string, obj T) T {
	t.Helper()
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, obj); err != nil {
		t.Fatal(err)
	}
	return obj
}

// The default Maintenance follows spec.maintenance: created, its schedule
// kept in line, removed when disabled, and it steps aside for one
// written by hand.
func TestDefaultMaintenanceFollowsTheRepository(t *testing.T) {
	ctx := context.Background()
	repo := &snapv1.Repository{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "primary", UID: "repo-uid"}, Spec: repoSpec()}
	f, c := newFunction(repo)
	ref := snapv1.RepositoryRef{Kind: snapv1.KindRepository, Name: "primary", Namespace: "apps"}
	if err := f.ensureDefault(ctx, ref); err != nil {
		t.Fatal(err)
	}
	m := get(t, c, "apps", "primary", &snapv1.Maintenance{})
	if m.Labels[wellknown.LabelMaintenanceDefault] != "true" || m.OwnerReferences[0].UID != "repo-uid" ||
		m.Spec.Schedule.Quick.Cron != kernel.KopiaCadence.Quick || m.Spec.Schedule.Full.Cron != kernel.KopiaCadence.Full {
		t.Fatalf("default Maintenance %+v", m)
	}

	// A schedule of its own follows; an owner set by hand stays.
	m.Spec.Ownership = &snapv1.MaintenanceOwnership{Owner: "ops@site"}
	if err := c.Update(ctx, m); err != nil {
		t.Fatal(err)
	}
	repo = get(t, c, "apps", "primary", &snapv1.Repository{})
	repo.Spec.Maintenance = &snapv1.RepositoryMaintenance{Schedule: &snapv1.MaintenanceSchedule{Full: &snapv1.CronSpec{Cron: "0 2 * * 0"}}}
	if err := c.Update(ctx, repo); err != nil {
		t.Fatal(err)
	}
	if err := f.Resync(ctx); err != nil {
		t.Fatal(err)
	}
	m = get(t, c, "apps", "primary", &snapv1.Maintenance{})
	if m.Spec.Schedule.Full.Cron != "0 2 * * 0" || m.Spec.Ownership == nil || m.Spec.Ownership.Owner != "ops@site" {
		t.Fatalf("after the repository's schedule changed: %+v", m.Spec)
	}

	// Disabled: it goes.
	off := false
	repo.Spec.Maintenance.Enabled = &off
	if err := c.Update(ctx, repo); err != nil {
		t.Fatal(err)
	}
	if err := f.ensureDefault(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "apps", Name: "primary"}, &snapv1.Maintenance{}); !apierrors.IsNotFound(err) {
		t.Fatalf("disabled maintenance left the default Maintenance: %v", err)
	}

	// Enabled again, but someone wrote their own: no default comes back.
	repo.Spec.Maintenance = nil
	if err := c.Update(ctx, repo); err != nil {
		t.Fatal(err)
	}
	own := &snapv1.Maintenance{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "mine"}, Spec: snapv1.MaintenanceSpec{Repository: snapv1.RepositoryRef{Name: "primary"}}}
	if err := c.Create(ctx, own); err != nil {
		t.Fatal(err)
	}
	if err := f.ensureDefault(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "apps", Name: "primary"}, &snapv1.Maintenance{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a default Maintenance was made beside one written by hand: %v", err)
	}
}

// A tenant's Maintenance of a ClusterRepository never makes its default
// step aside, and never runs.
func TestATenantCannotTakeAClusterRepositorysMaintenance(t *testing.T) {
	ctx := context.Background()
	cr := &snapv1.ClusterRepository{ObjectMeta: metav1.ObjectMeta{Name: "shared", UID: "cr-uid"}}
	cr.Spec.RepositorySpec = repoSpec()
	cr.Status.Phase = snapv1.RepositoryReady
	tenant := &snapv1.Maintenance{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "steal", CreationTimestamp: metav1.NewTime(now.Add(-time.Hour)),
		Annotations: map[string]string{wellknown.AnnotationMaintenanceRunReq: now.Add(-time.Minute).Format(time.RFC3339)}},
		Spec: snapv1.MaintenanceSpec{Repository: snapv1.RepositoryRef{Kind: snapv1.KindClusterRepository, Name: "shared"}}}
	f, c := newFunction(cr, tenant)
	if err := f.Resync(ctx); err != nil {
		t.Fatal(err)
	}
	def := get(t, c, "snapflow-system", "clusterrepository-shared", &snapv1.Maintenance{})
	if def.Spec.Repository.Kind != snapv1.KindClusterRepository {
		t.Fatalf("default Maintenance of the ClusterRepository: %+v", def.Spec)
	}
	steal := get(t, c, "tenant", "steal", &snapv1.Maintenance{})
	ready := meta.FindStatusCondition(steal.Status.Conditions, wellknown.ConditionReady)
	if ready == nil || ready.Status != metav1.ConditionFalse || !strings.Contains(ready.Message, "maintained only from namespace snapflow-system") || len(steal.Status.Runs) != 0 {
		t.Fatalf("the tenant's Maintenance: %+v", steal.Status)
	}
	var jobs batchv1.JobList
	if err := c.List(ctx, &jobs); err != nil || len(jobs.Items) != 0 {
		t.Fatalf("jobs %v, %v: none may start", jobs.Items, err)
	}
}

// A requested run starts one Job for its slot, however often the event
// comes; it runs as this cluster's owner.
func TestARequestedRunStartsOneJob(t *testing.T) {
	ctx := context.Background()
	repo := &snapv1.Repository{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "primary", UID: "repo-uid"}, Spec: repoSpec(),
		Status: snapv1.RepositoryStatus{Phase: snapv1.RepositoryReady}}
	capacity := resource.MustParse("2Gi")
	content, metadata := int64(100), int64(300)
	repo.Spec.MoverDefaults = &snapv1.MoverDefaults{Cache: &snapv1.MoverCache{Capacity: &capacity, ContentCacheSizeMb: &content, MetadataCacheSizeMb: &metadata}}
	asked := now.Add(-time.Minute)
	m := &snapv1.Maintenance{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "primary", UID: "m-uid", CreationTimestamp: metav1.NewTime(now.Add(-time.Hour)),
		Annotations: map[string]string{wellknown.AnnotationMaintenanceRunReq: asked.Format(time.RFC3339), wellknown.AnnotationMaintenanceRunMode: "full"}},
		Spec: snapv1.MaintenanceSpec{Repository: snapv1.RepositoryRef{Name: "primary"}, Schedule: &snapv1.MaintenanceSchedule{Full: &snapv1.CronSpec{Cron: "0 3 * * *"}}}}
	own := int64(500)
	m.Spec.Mover = &snapv1.MoverSpec{Cache: &snapv1.MoverCache{ContentCacheSizeMb: &own}}
	f, c := newFunction(repo, m)
	for range 3 {
		if err := f.Reconcile(ctx, "apps", "primary"); err != nil {
			t.Fatal(err)
		}
	}
	var jobs batchv1.JobList
	if err := c.List(ctx, &jobs, client.InNamespace("apps")); err != nil {
		t.Fatal(err)
	}
	if len(jobs.Items) != 1 {
		t.Fatalf("%d jobs, want one", len(jobs.Items))
	}
	j := jobs.Items[0]
	if j.Labels[wellknown.LabelMaintenance] != "primary" || j.Labels[wellknown.LabelOp] != mover.OpMaintenance || j.Labels[wellknown.LabelRepoPool] != "" {
		t.Fatalf("job labels %v: a maintenance job names its Maintenance and takes no pool slot", j.Labels)
	}
	var cm corev1.ConfigMap
	if err := c.Get(ctx, client.ObjectKey{Namespace: "apps", Name: j.Name}, &cm); err != nil {
		t.Fatal(err)
	}
	spec, err := mover.Parse([]byte(cm.Data[mover.WorkSpecKey]))
	if err != nil {
		t.Fatal(err)
	}
	if w := spec.Maintenance; w.Mode != "full" || w.Owner != "snapflow@cluster-uid" || !w.Slot.Equal(asked) || w.Takeover || spec.Repository.Create != nil {
		t.Fatalf("work %+v", w)
	}
	// The Maintenance's cache overlays the repository's field by field.
	if spec.ContentCacheMB != 500 || spec.MetadataCacheMB != 300 {
		t.Fatalf("cache budgets content %d metadata %d, want the Maintenance's 500 and the repository's 300", spec.ContentCacheMB, spec.MetadataCacheMB)
	}
	var cacheVol *corev1.Volume
	for i, v := range j.Spec.Template.Spec.Volumes {
		if v.Name == "cache" {
			cacheVol = &j.Spec.Template.Spec.Volumes[i]
		}
	}
	if cacheVol == nil || cacheVol.EmptyDir == nil || cacheVol.EmptyDir.SizeLimit == nil || cacheVol.EmptyDir.SizeLimit.String() != "2Gi" {
		t.Fatalf("cache volume %+v, want an emptyDir capped at the repository's 2Gi", cacheVol)
	}
	got := get(t, c, "apps", "primary", &snapv1.Maintenance{})
	if len(got.Status.Runs) != 1 || got.Status.Runs[0].Phase != mover.MaintenanceRunning || got.Status.Runs[0].Job != j.Name {
		t.Fatalf("runs %+v", got.Status.Runs)
	}
}

// With safety none a run waits while another Job of the repository runs.
func TestSafetyNoneWaitsForTheRepositorysJobs(t *testing.T) {
	ctx := context.Background()
	repo := &snapv1.Repository{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "primary", UID: "repo-uid"}, Spec: repoSpec(),
		Status: snapv1.RepositoryStatus{Phase: snapv1.RepositoryReady}}
	m := &snapv1.Maintenance{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "primary", UID: "m-uid", CreationTimestamp: metav1.NewTime(now.Add(-time.Hour)),
		Annotations: map[string]string{wellknown.AnnotationMaintenanceRunReq: now.Add(-time.Minute).Format(time.RFC3339), wellknown.AnnotationMaintenanceSafety: "none"}},
		Spec: snapv1.MaintenanceSpec{Repository: snapv1.RepositoryRef{Name: "primary"}}}
	backup := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "backup", Labels: map[string]string{wellknown.LabelRepoPool: "x"}}}
	f, c := newFunction(repo, m, backup)
	// The pool key of this repository, whatever its encoding.
	backup.Labels[wellknown.LabelRepoPool] = poolOf(t, f)
	if err := c.Update(ctx, backup); err != nil {
		t.Fatal(err)
	}
	if err := f.Reconcile(ctx, "apps", "primary"); err != nil {
		t.Fatal(err)
	}
	got := get(t, c, "apps", "primary", &snapv1.Maintenance{})
	if c := meta.FindStatusCondition(got.Status.Conditions, wellknown.ConditionReady); c == nil || c.Reason != "WaitingForRepositoryJobs" || len(got.Status.Runs) != 0 {
		t.Fatalf("status %+v: want a wait naming the running job", got.Status)
	}
}

func poolOf(t *testing.T, f *Function) string {
	t.Helper()
	m := &snapv1.Maintenance{ObjectMeta: metav1.ObjectMeta{Namespace: "apps"}, Spec: snapv1.MaintenanceSpec{Repository: snapv1.RepositoryRef{Name: "primary"}}}
	repo, why, err := f.repository(context.Background(), m, nil)
	if err != nil || why != "" {
		t.Fatal(err, why)
	}
	return poolKeyOf(repo)
}

// A start recorded after its own result (a redelivered event that read the
// Maintenance before the mover's report was applied) leaves the result.
func TestALateStartKeepsTheResult(t *testing.T) {
	ctx := context.Background()
	slot := now.Add(-time.Minute)
	m := &snapv1.Maintenance{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "primary", UID: "m-uid"},
		Status: snapv1.MaintenanceStatus{Runs: []snapv1.MaintenanceRun{{Mode: "full", Slot: metav1.NewTime(slot), Phase: mover.MaintenanceSucceeded, Message: "done"}}}}
	f, c := newFunction(m)
	stale := m.DeepCopy()
	stale.Status.Runs = nil
	if err := f.record(ctx, stale, "full", slot, true, func(r *snapv1.MaintenanceRun) { r.Phase, r.Message = mover.MaintenanceRunning, "started" }); err != nil {
		t.Fatal(err)
	}
	if got := get(t, c, "apps", "primary", &snapv1.Maintenance{}).Status.Runs[0]; got.Phase != mover.MaintenanceSucceeded || got.Message != "done" {
		t.Fatalf("a late start overwrote the result: %+v", got)
	}
	// A new slot starts normally.
	if err := f.record(ctx, stale, "full", now, true, func(r *snapv1.MaintenanceRun) { r.Phase = mover.MaintenanceRunning }); err != nil {
		t.Fatal(err)
	}
	if got := get(t, c, "apps", "primary", &snapv1.Maintenance{}).Status.Runs[0]; got.Phase != mover.MaintenanceRunning || !got.Slot.Time.Equal(now) {
		t.Fatalf("the next slot did not start: %+v", got)
	}
}

// Of two Maintenances of one repository only the older runs; scheduled
// runs never take the safety none a requested one may.
func TestOnlyTheOlderOfTwoMaintenancesRuns(t *testing.T) {
	ctx := context.Background()
	repo := &snapv1.Repository{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "primary", UID: "repo-uid"}, Spec: repoSpec(),
		Status: snapv1.RepositoryStatus{Phase: snapv1.RepositoryReady}}
	mk := func(name string, age time.Duration) *snapv1.Maintenance {
		return &snapv1.Maintenance{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name, UID: "uid-" + types.UID(name), CreationTimestamp: metav1.NewTime(now.Add(-age)),
			Annotations: map[string]string{wellknown.AnnotationMaintenanceSafety: "none"}},
			Spec: snapv1.MaintenanceSpec{Repository: snapv1.RepositoryRef{Name: "primary"}, Schedule: &snapv1.MaintenanceSchedule{Quick: &snapv1.CronSpec{Cron: "30 * * * *"}}}}
	}
	f, c := newFunction(repo, mk("old", 3*time.Hour), mk("new", 2*time.Hour))
	for _, name := range []string{"new", "old"} {
		if err := f.Reconcile(ctx, "apps", name); err != nil {
			t.Fatal(err)
		}
	}
	newer := get(t, c, "apps", "new", &snapv1.Maintenance{})
	if r := meta.FindStatusCondition(newer.Status.Conditions, wellknown.ConditionReady); r == nil || r.Reason != "DuplicateMaintenance" || len(newer.Status.Runs) != 0 {
		t.Fatalf("the newer Maintenance: %+v", newer.Status)
	}
	var jobs batchv1.JobList
	if err := c.List(ctx, &jobs, client.InNamespace("apps")); err != nil || len(jobs.Items) != 1 {
		t.Fatalf("jobs %d (%v), want the older one's only", len(jobs.Items), err)
	}
	if o := metav1.GetControllerOf(&jobs.Items[0]); o == nil || o.Name != "old" {
		t.Fatalf("the job belongs to %+v, want old", o)
	}
	if _, reclaiming := jobs.Items[0].Labels[wellknown.LabelReclaiming]; reclaiming {
		t.Fatal("a scheduled run took safety none")
	}
}
