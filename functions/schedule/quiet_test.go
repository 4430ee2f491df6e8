package schedule

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
)

func TestQuiet(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *snapv1.ScheduleRef {
		return &snapv1.ScheduleRef{At: &metav1.Time{Time: now.Add(d)}}
	}
	deleting := metav1.NewTime(now)
	tests := []struct {
		name string
		s    snapv1.SnapshotSchedule
		want bool
	}{
		{"next slot ahead", snapv1.SnapshotSchedule{Status: snapv1.SnapshotScheduleStatus{NextSchedule: at(time.Minute)}}, true},
		{"next slot due", snapv1.SnapshotSchedule{Status: snapv1.SnapshotScheduleStatus{NextSchedule: at(0)}}, false},
		{"next slot past", snapv1.SnapshotSchedule{Status: snapv1.SnapshotScheduleStatus{NextSchedule: at(-time.Hour)}}, false},
		{"nothing pinned yet", snapv1.SnapshotSchedule{}, false},
		{"being deleted", snapv1.SnapshotSchedule{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &deleting}, Status: snapv1.SnapshotScheduleStatus{NextSchedule: at(time.Minute)}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := quiet(&tt.s, now); got != tt.want {
				t.Fatalf("quiet = %v, want %v", got, tt.want)
			}
		})
	}
}
