package snapshot

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
)

func TestHasDataAndTakenAt(t *testing.T) {
	rec := &snapv1.SnapshotRecord{KopiaSnapshotID: "k1"}
	now := metav1.NewTime(time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC))
	tests := []struct {
		name string
		s    snapv1.Snapshot
		want bool
	}{
		{"succeeded with data", snapv1.Snapshot{Status: snapv1.SnapshotStatus{Phase: snapv1.SnapshotSucceeded, Snapshot: rec}}, true},
		{"unchanged points at data", snapv1.Snapshot{Status: snapv1.SnapshotStatus{Phase: snapv1.SnapshotUnchanged, Snapshot: rec}}, true},
		{"discovered", snapv1.Snapshot{Status: snapv1.SnapshotStatus{Phase: snapv1.SnapshotDiscovered, Snapshot: rec}}, true},
		{"failed", snapv1.Snapshot{Status: snapv1.SnapshotStatus{Phase: snapv1.SnapshotFailed, Snapshot: rec}}, false},
		{"running", snapv1.Snapshot{Status: snapv1.SnapshotStatus{Phase: snapv1.SnapshotRunning}}, false},
		{"no kopia id", snapv1.Snapshot{Status: snapv1.SnapshotStatus{Phase: snapv1.SnapshotSucceeded, Snapshot: &snapv1.SnapshotRecord{}}}, false},
		{"being deleted", snapv1.Snapshot{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}, Status: snapv1.SnapshotStatus{Phase: snapv1.SnapshotSucceeded, Snapshot: rec}}, false},
	}
	for _, tt := range tests {
		if got := HasData(&tt.s); got != tt.want {
			t.Errorf("%s: HasData = %v", tt.name, got)
		}
	}
	s := snapv1.Snapshot{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: now}}
	if !TakenAt(&s).Equal(now.Time) {
		t.Error("without timing, TakenAt is the creation time")
	}
	start := metav1.NewTime(now.Add(time.Hour))
	s.Status.Timing = &snapv1.Timing{StartTime: &start}
	if !TakenAt(&s).Equal(start.Time) {
		t.Error("TakenAt is the recorded start")
	}
}
