package repousage

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
)

func TestExplain(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	n := func(v int64) *int64 { return &v }
	snap := func(ns, name, policy, path string, age time.Duration, added, size int64, mutate ...func(*snapv1.Snapshot)) snapv1.Snapshot {
		end := metav1.NewTime(now.Add(-age))
		s := snapv1.Snapshot{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{wellknown.LabelConfig: policy}, CreationTimestamp: end},
			Status: snapv1.SnapshotStatus{Phase: snapv1.SnapshotSucceeded,
				Resolved: &snapv1.SnapshotResolved{Repository: &snapv1.RepositoryRef{Kind: snapv1.KindRepository, Name: "primary"}},
				Snapshot: &snapv1.SnapshotRecord{KopiaSnapshotID: "k-" + name, Identity: &snapv1.Identity{Username: "app", Hostname: ns + ".cluster", SourcePath: path}},
				Timing:   &snapv1.Timing{EndTime: &end},
				Stats:    &snapv1.SnapshotStats{BytesNew: n(added), SizeBytes: n(size)}},
		}
		for _, m := range mutate {
			m(&s)
		}
		return s
	}
	// As the cleanup function leaves one it is deleting.
	deleting := func(s *snapv1.Snapshot) {
		s.DeletionTimestamp, s.Status.Phase = &metav1.Time{Time: now}, snapv1.SnapshotDeleting
	}
	unchanged := func(s *snapv1.Snapshot) { s.Status.Phase = snapv1.SnapshotUnchanged }
	retain := func(s *snapv1.Snapshot) { s.Spec.DeletionPolicy = snapv1.DeletionRetain }
	pin := func(s *snapv1.Snapshot) { s.Spec.Pin = true }
	other := func(s *snapv1.Snapshot) { s.Status.Resolved.Repository.Name = "offsite" }
	failed := func(s *snapv1.Snapshot) { s.Status.Phase = snapv1.SnapshotFailed }
	keepLatest := func(ns, name string, k int32) snapv1.SnapshotPolicy {
		return snapv1.SnapshotPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: snapv1.SnapshotPolicySpec{Retention: &snapv1.Retention{KeepLatest: &k}}}
	}
	in := Input{
		Repository: snapv1.RepositoryRef{Kind: snapv1.KindRepository, Namespace: "app", Name: "primary"},
		Stats:      &snapv1.StorageStats{StoredBytes: n(10_000), ReclaimableBytes: n(2_000), BlobCount: n(12)},
		Now:        now,
		Snapshots: []snapv1.Snapshot{
			snap("app", "db-1", "db", "/data", 40*24*time.Hour, 5000, 5000, retain),
			snap("app", "db-2", "db", "/data", 3*24*time.Hour, 400, 5200),
			snap("app", "db-3", "db", "/data", time.Hour, 100, 5300),
			snap("app", "db-0", "db", "/data", 50*24*time.Hour, 900, 4000, deleting),
			snap("app", "web-1", "web", "/www", 10*24*time.Hour, 300, 300, pin),
			snap("app", "web-2", "web", "/www", 2*time.Hour, 50, 310),
			snap("app", "web-x", "web", "/www", time.Hour, 999, 999, failed),      // holds no data
			snap("app", "web-u", "web", "/www", time.Hour, 0, 310, unchanged),     // saved nothing of its own
			snap("app", "db-off", "db", "/data", 30*time.Minute, 777, 777, other), // another repository
			snap("billing", "x-1", "x", "/x", time.Hour, 1, 1),                    // its own primary
		},
		Policies: []snapv1.SnapshotPolicy{keepLatest("app", "db", 1), keepLatest("app", "web", 1)},
	}
	rep := Explain(in)
	if rep.Repository != "Repository/app/primary" || *rep.StoredBytes != 10_000 || *rep.ReclaimableBytes != 2_000 || len(rep.Notes) != 1 || !strings.Contains(rep.Notes[0], "budget") {
		t.Fatalf("report header %+v", rep)
	}
	if len(rep.Groups) != 2 {
		t.Fatalf("groups %+v, want db and web", rep.Groups)
	}
	db, web := rep.Groups[0], rep.Groups[1]
	if db.Identity != "app@app.cluster:/data" || db.Policy != "app/db" || db.Snapshots != 4 || db.LatestSize != 5300 {
		t.Errorf("db group %+v", db)
	}
	if db.Added != (Ages{Day: 100, Week: 400, Older: 5900}) {
		t.Errorf("db added by age %+v", db.Added)
	}
	// keepLatest 1 keeps the policy's newest, db-off in another repository,
	// so db-1 (whose Retain keeps its data), db-2 and db-3 go here.
	if db.Prunes != 3 || db.PrunedAdded != 5500 || db.PrunesKeepData != 1 || db.Pinned != 1 || db.PinnedAdded != 5000 || db.Deleting != 1 {
		t.Errorf("db retention and pins %+v", db)
	}
	if web.Snapshots != 2 || web.Prunes != 0 || web.Pinned != 1 || web.PinnedAdded != 300 || web.Added != (Ages{Day: 50, Month: 300}) {
		t.Errorf("web group %+v", web)
	}
	if rep.Total.Snapshots != 6 || rep.Total.Total() != 6750 || rep.Total.Prunes != 3 || rep.Total.Pinned != 2 || rep.Total.Identity != "TOTAL" {
		t.Errorf("total %+v", rep.Total)
	}

	// Retention prunes nothing in a suspended repository, nor for a
	// suspended policy.
	in.RepositorySuspended = true
	if rep := Explain(in); rep.Total.Prunes != 0 {
		t.Errorf("a suspended repository: %d prunes", rep.Total.Prunes)
	}
	in.RepositorySuspended = false
	in.Policies[0].Spec.Suspend = true
	if rep := Explain(in); rep.Total.Prunes != 0 {
		t.Errorf("a suspended policy: %d prunes", rep.Total.Prunes)
	}
	in.Policies[0].Spec.Suspend = false

	// Without a counted full run, the report says how to get one.
	in.Stats = nil
	in.Snapshots[1].Status.Stats = nil
	rep = Explain(in)
	if len(rep.Notes) != 3 || !strings.Contains(rep.Notes[0], "maintenance run") || !strings.Contains(rep.Notes[2], "1 Snapshots") {
		t.Errorf("notes %q", rep.Notes)
	}
}
