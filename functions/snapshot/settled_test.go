package snapshot

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/internal/repository"
)

// The resync skips a repository only when ReconcileRepository would do
// nothing for it; anything with work left (a new generation, a retry, a
// probe due, credentials to reap) is reconciled.
func TestSettled(t *testing.T) {
	now := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	f := &Function{Now: func() time.Time { return now }, Namespace: "snapflow-system"}
	observed := metav1.NewTime(now.Add(-10 * time.Minute)) // default probe interval 30m: not due
	repo := func(mutate func(*snapv1.Repository)) *repository.Object {
		r := &snapv1.Repository{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "primary", Generation: 2},
			Status: snapv1.RepositoryStatus{Phase: snapv1.RepositoryReady, ObservedGeneration: 2,
				StorageStats: &snapv1.StorageStats{LastObservedAt: &observed}}}
		if mutate != nil {
			mutate(r)
		}
		return repository.FromRepository(r)
	}
	off := false
	for _, tc := range []struct {
		name string
		r    *repository.Object
		want bool
	}{
		{"connected, probe not due", repo(nil), true},
		{"degraded, probe not due", repo(func(r *snapv1.Repository) { r.Status.Phase = snapv1.RepositoryDegraded }), true},
		{"suspended while failing", repo(func(r *snapv1.Repository) { r.Spec.Suspend, r.Status.Phase = true, snapv1.RepositoryFailed }), true},
		{"being deleted", repo(func(r *snapv1.Repository) { r.DeletionTimestamp = &metav1.Time{Time: now} }), true},
		{"a new generation", repo(func(r *snapv1.Repository) { r.Generation = 3 }), false},
		{"failed", repo(func(r *snapv1.Repository) { r.Status.Phase = snapv1.RepositoryFailed }), false},
		{"pending", repo(func(r *snapv1.Repository) { r.Status.Phase = snapv1.RepositoryPending }), false},
		{"retry state to clear", repo(func(r *snapv1.Repository) { r.Status.Connect = &snapv1.ConnectStatus{Generation: 1} }), false},
		{"probe due", repo(func(r *snapv1.Repository) {
			r.Status.StorageStats.LastObservedAt = &metav1.Time{Time: now.Add(-31 * time.Minute)}
		}), false},
		{"probe due but probes off", repo(func(r *snapv1.Repository) {
			r.Status.StorageStats.LastObservedAt = &metav1.Time{Time: now.Add(-31 * time.Minute)}
			r.Spec.Health = &snapv1.Health{Probe: &snapv1.HealthProbe{Enabled: &off}}
		}), true},
	} {
		if got := f.settled(tc.r); got != tc.want {
			t.Errorf("%s: settled = %v, want %v", tc.name, got, tc.want)
		}
	}

	// A ClusterRepository whose credentials live outside snapflow's
	// namespace has copies to reap after its Jobs: never skipped.
	cr := func(secretNS string) *repository.Object {
		c := &snapv1.ClusterRepository{ObjectMeta: metav1.ObjectMeta{Name: "shared", Generation: 1},
			Status: snapv1.RepositoryStatus{Phase: snapv1.RepositoryReady, ObservedGeneration: 1, StorageStats: &snapv1.StorageStats{LastObservedAt: &observed}}}
		c.Spec.Backend.S3 = &snapv1.S3Backend{Bucket: "b", Auth: &snapv1.ObjectStoreAuth{SecretRef: &snapv1.SecretRef{Name: "keys", Namespace: secretNS}}}
		return repository.FromCluster(c, f.Namespace)
	}
	if !f.settled(cr("")) {
		t.Error("a ClusterRepository with its Secret in snapflow's namespace should be settled")
	}
	if f.settled(cr("vault")) {
		t.Error("a ClusterRepository whose Secret is projected from another namespace is never settled")
	}
}
