package snapshot

import (
	"time"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
)

// HasData says whether s finished with a kopia snapshot that can be read
// back (what restores resolve and verification checks), and is not being
// deleted.
func HasData(s *snapv1.Snapshot) bool {
	switch s.Status.Phase {
	case snapv1.SnapshotSucceeded, snapv1.SnapshotUnchanged, snapv1.SnapshotDiscovered:
	default:
		return false
	}
	return s.DeletionTimestamp == nil && s.Status.Snapshot != nil && s.Status.Snapshot.KopiaSnapshotID != ""
}

// TakenAt is when s's backup ran: its start, or its creation before that
// is recorded.
func TakenAt(s *snapv1.Snapshot) time.Time {
	if t := s.Status.Timing; t != nil && t.StartTime != nil {
		return t.StartTime.Time
	}
	return s.CreationTimestamp.Time
}
