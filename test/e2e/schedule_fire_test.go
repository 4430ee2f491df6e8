package e2e

import (
	"crypto/rand"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/events"
	"github.com/snapflow/snapflow/internal/repository"
)

// tick sends what a PingSource sends every minute.
func tick(t *testing.T, id string) {
	t.Helper()
	e := event.New()
	e.SetID(id)
	e.SetSource("/apis/v1/namespaces/snapflow-system/pingsources/tick")
	e.SetType(events.Ping)
	body, _ := e.MarshalJSON()
	if code := postEvent(t, env.Functions.Base+"/schedule", "application/cloudevents+json", body); code != http.StatusOK && code != http.StatusAccepted && code != http.StatusNoContent {
		t.Fatalf("tick answered %d", code)
	}
}

func scheduleSnapshots(t *testing.T, ns, sched string) []snapv1.Snapshot {
	t.Helper()
	var list snapv1.SnapshotList
	if err := env.Client.List(testContext(t), &list, client.InNamespace(ns), client.MatchingLabels{wellknown.LabelSchedule: sched}); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func getSchedule(t *testing.T, ns, name string) *snapv1.SnapshotSchedule {
	t.Helper()
	var s snapv1.SnapshotSchedule
	if err := env.Client.Get(testContext(t), clientKey(ns, name), &s); err != nil {
		t.Fatal(err)
	}
	return &s
}

// pinned ticks until schedule ns/name has pinned its next slot. A tick
// reads the API server's watch cache, which may not yet hold a schedule
// created a moment ago (its own event, or the next tick, picks it up then),
// so one tick right after the apply is not enough under load.
func pinned(t *testing.T, ns, name, id string) *snapv1.SnapshotSchedule {
	t.Helper()
	var s *snapv1.SnapshotSchedule
	eventually(t, func() error {
		tick(t, id)
		s = getSchedule(t, ns, name)
		if s.Status.NextSchedule == nil || s.Status.NextSchedule.At == nil {
			return fmt.Errorf("schedule %s/%s has not pinned its next slot: %+v", ns, name, s.Status)
		}
		return nil
	})
	return s
}

// hourlySchedule applies a SnapshotSchedule firing policy on the hour, UTC.
func hourlySchedule(t *testing.T, ns, name, policy string) {
	t.Helper()
	kubectl(t, []byte(`
apiVersion: kopiur.home-operations.com/v1alpha1
kind: SnapshotSchedule
metadata: {name: `+name+`, namespace: `+ns+`}
spec:
  policyRef: {name: `+policy+`}
  schedule: {cron: "0 * * * *", timezone: UTC}
`), 0, "apply", "-f", "-")
}

func TestScheduleFiresOnceAndDeletingItKeepsTheData(t *testing.T) {
	const ns = "schedule-fire"
	backupNamespace(t, ns, 2, "")
	kubectl(t, policy(ns, "app", "  copyMethod: Direct\n"), 0, "apply", "-f", "-")
	hourlySchedule(t, ns, "hourly", "app")
	t.Cleanup(func() { clock.Set(time.Time{}) })

	// The first tick pins the next slot, and nothing is due yet.
	s := pinned(t, ns, "hourly", "t1")
	next := s.Status.NextSchedule
	if next == nil || next.At == nil || next.Timezone != "UTC" || next.At.Minute() != 0 || !next.At.After(s.CreationTimestamp.Time) {
		t.Fatalf("nextSchedule %+v", next)
	}
	if n := len(scheduleSnapshots(t, ns, "hourly")); n != 0 {
		t.Fatalf("fired before its slot: %d", n)
	}
	// The clock passes the slot: one Snapshot named after the slot.
	clock.Set(next.At.Add(5 * time.Second))
	tick(t, "t2")
	tick(t, "t2") // a redelivered tick
	tick(t, "t3") // and the next one, still inside the hour
	kids := scheduleSnapshots(t, ns, "hourly")
	want := "hourly-" + next.At.UTC().Format("20060102150405")
	if len(kids) != 1 || kids[0].Name != want || kids[0].Labels[wellknown.LabelOrigin] != "scheduled" {
		t.Fatalf("snapshots %v, want exactly %s with origin scheduled", names(kids), want)
	}
	done := waitSnapshot(t, ns, want, snapv1.SnapshotSucceeded)
	s = getSchedule(t, ns, "hourly")
	if s.Status.LastSchedule == nil || !s.Status.LastSchedule.At.Equal(next.At) || !s.Status.NextSchedule.At.Time.Equal(next.At.Add(time.Hour)) {
		t.Fatalf("after firing: last %+v next %+v", s.Status.LastSchedule, s.Status.NextSchedule)
	}
	tick(t, "t4")
	eventually(t, func() error {
		s := getSchedule(t, ns, "hourly")
		if s.Status.LastSuccessfulSchedule == nil || s.Status.LastSuccessfulSchedule.SnapshotRef.Name != want {
			return fmt.Errorf("lastSuccessfulSchedule %+v", s.Status.LastSuccessfulSchedule)
		}
		return nil
	})

	// Deleting the schedule, then its Snapshot, keeps the kopia data
	// (onScheduleDelete defaults to Retain).
	kubectl(t, nil, 0, "-n", ns, "delete", "snapshotschedule", "hourly")
	kubectl(t, nil, 0, "-n", ns, "delete", "snapshot", want, "--wait=false")
	waitGone(t, ns, want)
	if !kopiaIDs(t, ns)[done.Status.Snapshot.KopiaSnapshotID] {
		t.Fatalf("deleting a schedule's Snapshot after the schedule must keep its kopia snapshot")
	}
}

func names(ss []snapv1.Snapshot) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Name)
	}
	return out
}

func TestForbidSkipsAndReplaceWaitsForAQueuedRun(t *testing.T) {
	const ns = "schedule-concurrency"
	// The runs upload 4 MiB at 256 KiB/s: still running when Replace
	// comes, however fast the machine, so Replace cancels a live mover.
	backupNamespace(t, ns, 1, "  concurrency: {maxConcurrentJobs: 1}\n  moverDefaults: {throttle: {uploadBytesPerSecond: 262144}}\n")
	writeRandom(t, filepath.Join(env.Functions.Node.PVCDir(ns, "app-data"), "big"), 4<<20)
	kubectl(t, policy(ns, "app", "  copyMethod: Direct\n"), 0, "apply", "-f", "-")
	// Another run holds the repository's only slot, so the first firing parks.
	blocker := &batchv1.Job{}
	blocker.Namespace, blocker.Name = ns, "slot-holder"
	blocker.Labels = map[string]string{wellknown.LabelRepoPool: repository.PoolKey(snapv1.KindRepository, ns, "primary"), wellknown.LabelManagedBy: wellknown.ManagedByValue}
	blocker.Spec.Template.Spec = corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "sleep", Image: "busybox", Command: []string{"sleep", "120"}}}}
	if err := asFunction(t, "snapshot").Create(testContext(t), blocker); err != nil {
		t.Fatal(err)
	}
	kubectl(t, []byte(`
apiVersion: kopiur.home-operations.com/v1alpha1
kind: SnapshotSchedule
metadata: {name: often, namespace: `+ns+`}
spec:
  policyRef: {name: app}
  schedule: {cron: "*/5 * * * *"}
`), 0, "apply", "-f", "-")
	t.Cleanup(func() { clock.Set(time.Time{}) })
	first := pinned(t, ns, "often", "c1").Status.NextSchedule.At.Time
	clock.Set(first.Add(time.Second))
	tick(t, "c2")
	if kids := scheduleSnapshots(t, ns, "often"); len(kids) != 1 {
		t.Fatalf("first slot: %v", names(kids))
	}
	eventually(t, func() error {
		k := scheduleSnapshots(t, ns, "often")[0]
		if c := meta.FindStatusCondition(k.Status.Conditions, wellknown.ConditionRepositorySlotAvailable); c == nil || c.Status != "False" {
			return fmt.Errorf("the first run should be parked: %+v", k.Status.Conditions)
		}
		return nil
	})
	// Forbid (the default): the next slot is skipped while the first run is unfinished.
	clock.Set(first.Add(5*time.Minute + time.Second))
	tick(t, "c3")
	if kids := scheduleSnapshots(t, ns, "often"); len(kids) != 1 {
		t.Fatalf("Forbid must not fire over an unfinished run: %v", names(kids))
	}
	s := getSchedule(t, ns, "often")
	if c := meta.FindStatusCondition(s.Status.Conditions, "Scheduled"); c == nil || !strings.Contains(c.Message, "concurrencyPolicy is Forbid") {
		t.Fatalf("Scheduled condition %+v", c)
	}
	// Replace waits while the old run is only queued.
	kubectl(t, nil, 0, "-n", ns, "patch", "snapshotschedule", "often", "--type=merge", "-p", `{"spec":{"schedule":{"concurrencyPolicy":"Replace"}}}`)
	clock.Set(first.Add(10*time.Minute + time.Second))
	tick(t, "c4")
	s = getSchedule(t, ns, "often")
	if c := meta.FindStatusCondition(s.Status.Conditions, wellknown.ConditionReplacementHeld); c == nil || c.Status != "True" {
		t.Fatalf("ReplacementHeld %+v", s.Status.Conditions)
	}
	if kids := scheduleSnapshots(t, ns, "often"); len(kids) != 1 {
		t.Fatalf("Replace must wait for a queued run: %v", names(kids))
	}
	// Once the slot frees the old run starts, so it is no longer merely
	// queued: the held slot fires and replaces it (its Job is deleted, the
	// Snapshot stamped replaced-run and removed).
	old := scheduleSnapshots(t, ns, "often")[0].Name
	if err := env.Client.Delete(testContext(t), blocker, client.PropagationPolicy("Background")); err != nil {
		t.Fatal(err)
	}
	var fresh string
	eventually(t, func() error {
		tick(t, "c5")
		for _, k := range scheduleSnapshots(t, ns, "often") {
			if k.Name == old && k.DeletionTimestamp == nil {
				// Throttled, it cannot finish first: Replace must cancel it.
				return fmt.Errorf("the old run %s is still there (phase %s)", old, k.Status.Phase)
			}
			if k.Name == old && k.DeletionTimestamp != nil && k.Annotations[wellknown.AnnotationPrunedBy] != wellknown.PrunedByReplacedRun {
				return fmt.Errorf("the replaced run must be stamped %s: %v", wellknown.PrunedByReplacedRun, k.Annotations)
			}
			if k.Name != old {
				fresh = k.Name
			}
		}
		if fresh == "" {
			return fmt.Errorf("the held slot has not fired: %v", names(scheduleSnapshots(t, ns, "often")))
		}
		return nil
	})
	if !strings.HasSuffix(fresh, first.Add(10*time.Minute).UTC().Format("20060102150405")) {
		t.Fatalf("the new run %s should carry the held slot's time", fresh)
	}
	waitSnapshot(t, ns, fresh, snapv1.SnapshotSucceeded)
}

func TestRunOnCreateAndStartingDeadline(t *testing.T) {
	const ns = "schedule-oncreate"
	backupNamespace(t, ns, 1, "")
	kubectl(t, policy(ns, "app", "  copyMethod: Direct\n"), 0, "apply", "-f", "-")
	kubectl(t, []byte(`
apiVersion: kopiur.home-operations.com/v1alpha1
kind: SnapshotSchedule
metadata: {name: eager, namespace: `+ns+`}
spec:
  policyRef: {name: app}
  schedule: {cron: "0 3 * * *", runOnCreate: true, startingDeadlineSeconds: 60}
`), 0, "apply", "-f", "-")
	t.Cleanup(func() { clock.Set(time.Time{}) })
	created := getSchedule(t, ns, "eager").CreationTimestamp.Time
	clock.Set(created.Add(2 * time.Second))
	pinned(t, ns, "eager", "o1")
	kids := scheduleSnapshots(t, ns, "eager")
	if len(kids) != 1 || kids[0].Name != "eager-"+created.UTC().Format("20060102150405") {
		t.Fatalf("runOnCreate should fire once at creation: %v", names(kids))
	}
	next := getSchedule(t, ns, "eager").Status.NextSchedule.At.Time
	if next.UTC().Hour() != 3 || next.UTC().Minute() != 0 {
		t.Fatalf("after the creation run the next slot should be 03:00 UTC, got %s", next)
	}
	// The function was down for two minutes past 03:00: the slot is skipped, not run late.
	clock.Set(next.Add(2 * time.Minute))
	tick(t, "o2")
	if kids := scheduleSnapshots(t, ns, "eager"); len(kids) != 1 {
		t.Fatalf("an expired slot must not fire: %v", names(kids))
	}
	s := getSchedule(t, ns, "eager")
	if c := meta.FindStatusCondition(s.Status.Conditions, "Scheduled"); c == nil || c.Reason != "SkipExpiredSlot" || !strings.Contains(c.Message, "startingDeadlineSeconds") {
		t.Fatalf("Scheduled condition %+v", c)
	}
	if !s.Status.NextSchedule.At.Time.Equal(next.Add(24 * time.Hour)) {
		t.Fatalf("the skipped slot should advance to the next day: %s", s.Status.NextSchedule.At)
	}
	ev := kubectl(t, nil, 0, "-n", ns, "get", "events", "--field-selector", "reason=SkipExpiredSlot", "-o", "name").Stdout
	if strings.TrimSpace(ev) == "" {
		t.Error("a SkipExpiredSlot event should be recorded")
	}
}

// Policies whose repositories disagree on scheduleDefaults.timezone leave
// the schedule on UTC, and the schedule says so.
func TestAmbiguousInheritedTimezoneFallsBackToUTC(t *testing.T) {
	const ns = "schedule-tz"
	kubectl(t, []byte(`
apiVersion: v1
kind: Namespace
metadata: {name: `+ns+`}
---
apiVersion: v1
kind: Secret
metadata: {name: kopia-password, namespace: `+ns+`}
stringData: {KOPIA_PASSWORD: pw}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: app-data, namespace: `+ns+`}
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
---
apiVersion: kopiur.home-operations.com/v1alpha1
kind: Repository
metadata: {name: berlin, namespace: `+ns+`}
spec:
  backend: {filesystem: {path: /b}}
  encryption: {passwordSecretRef: {name: kopia-password, key: KOPIA_PASSWORD}}
  scheduleDefaults: {timezone: Europe/Berlin, jitter: 10m}
---
apiVersion: kopiur.home-operations.com/v1alpha1
kind: Repository
metadata: {name: newyork, namespace: `+ns+`}
spec:
  backend: {filesystem: {path: /n}}
  encryption: {passwordSecretRef: {name: kopia-password, key: KOPIA_PASSWORD}}
  scheduleDefaults: {timezone: America/New_York, jitter: 5m}
---
apiVersion: kopiur.home-operations.com/v1alpha1
kind: SnapshotPolicy
metadata: {name: eu, namespace: `+ns+`, labels: {tier: db}}
spec: {repository: {name: berlin}, sources: [{pvc: {name: app-data}}]}
---
apiVersion: kopiur.home-operations.com/v1alpha1
kind: SnapshotPolicy
metadata: {name: us, namespace: `+ns+`, labels: {tier: db}}
spec: {repository: {name: newyork}, sources: [{pvc: {name: app-data}}]}
---
apiVersion: kopiur.home-operations.com/v1alpha1
kind: SnapshotSchedule
metadata: {name: dbs, namespace: `+ns+`}
spec:
  policySelector: {matchLabels: {tier: db}}
  schedule: {cron: "0 2 * * *"}
`), 0, "apply", "-f", "-")
	s := pinned(t, ns, "dbs", "tz1")
	c := meta.FindStatusCondition(s.Status.Conditions, wellknown.ConditionTimezoneDefaultAmbiguous)
	if c == nil || c.Status != "True" || !strings.Contains(c.Message, "timezone") || strings.Contains(c.Message, "jitter") {
		t.Fatalf("TimezoneDefaultAmbiguous %+v", s.Status.Conditions)
	}
	// The jitter disagreement has a condition of its own.
	c = meta.FindStatusCondition(s.Status.Conditions, wellknown.ConditionJitterDefaultAmbiguous)
	if c == nil || c.Status != "True" || !strings.Contains(c.Message, "scheduleDefaults.jitter") {
		t.Fatalf("JitterDefaultAmbiguous %+v", s.Status.Conditions)
	}
	if n := s.Status.NextSchedule; n == nil || n.Timezone != "UTC" || n.At.UTC().Hour() != 2 {
		t.Fatalf("nextSchedule %+v, want 02:00 UTC", n)
	}
}

// writeRandom writes n bytes that neither compress nor deduplicate.
func writeRandom(t *testing.T, path string, n int) {
	t.Helper()
	buf := make([]byte, n)
	if _, err := rand.Read(buf); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A schedule none of whose backups succeeds goes BackupStale once two of
// its slots have passed, says so on its condition and in one
// dev.snapflow.backup.stale CloudEvent, and a later tick sends no second.
func TestAScheduleWithoutSuccessGoesStale(t *testing.T) {
	const ns = "schedule-stale"
	backupNamespace(t, ns, 1, "")
	// Its source is gone: every run waits, none succeeds.
	kubectl(t, []byte(`
apiVersion: kopiur.home-operations.com/v1alpha1
kind: SnapshotPolicy
metadata: {name: lost, namespace: `+ns+`}
spec:
  repository: {name: primary}
  copyMethod: Direct
  sources: [{pvc: {name: not-there}}]
`), 0, "apply", "-f", "-")
	hourlySchedule(t, ns, "hourly", "lost")
	t.Cleanup(func() { clock.Set(time.Time{}) })
	s := pinned(t, ns, "hourly", "stale-1")
	if c := meta.FindStatusCondition(s.Status.Conditions, wellknown.ConditionBackupStale); c != nil && c.Status == metav1.ConditionTrue {
		t.Fatalf("stale before any slot passed: %+v", c)
	}
	clock.Set(s.CreationTimestamp.Add(2*time.Hour + 5*time.Minute))
	staleIDs := func() map[string]bool {
		ids := map[string]bool{}
		for _, e := range env.Functions.Emitted.Events() {
			if e.Type() == events.BackupStale && e.Subject() == ns+"/hourly" {
				ids[e.ID()] = true
			}
		}
		return ids
	}
	eventually(t, func() error {
		tick(t, "stale-2")
		c := meta.FindStatusCondition(getSchedule(t, ns, "hourly").Status.Conditions, wellknown.ConditionBackupStale)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != "NoRecentSuccess" || !strings.Contains(c.Message, "SnapshotPolicy lost") {
			return fmt.Errorf("BackupStale %+v", c)
		}
		if n := len(staleIDs()); n != 1 {
			return fmt.Errorf("%d %s events", n, events.BackupStale)
		}
		return nil
	})
	tick(t, "stale-3")
	if n := len(staleIDs()); n != 1 {
		t.Fatalf("a later tick announced the same stale spell again: %d events", n)
	}
	e, _ := env.Functions.Emitted.Find(events.BackupStale, ns+"/hourly")
	var d events.BackupStaleData
	if err := e.DataAs(&d); err != nil || d.Schedule != "hourly" || d.LastSuccess != "" || len(d.Policies) != 1 || d.Policies[0] != "lost" {
		t.Fatalf("data %+v (%v)", d, err)
	}
	clock.Set(time.Time{})
}
