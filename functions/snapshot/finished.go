package snapshot

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
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

// MoverNotPermitted says why a privileged mover may not run in namespace
// ns, or "" when the namespace has opted in. fix is the settings-side way out.
func MoverNotPermitted(ctx context.Context, c client.Client, ns, fix string) (string, error) {
	var nsObj corev1.Namespace
	if err := c.Get(ctx, client.ObjectKey{Name: ns}, &nsObj); err != nil {
		return "", err
	}
	if nsObj.Annotations[wellknown.AnnotationPrivilegedMovers] == "true" {
		return "", nil
	}
	return fmt.Sprintf("the mover would run as root or privileged; annotate namespace %s with %s=\"true\" to allow it, or %s", ns, wellknown.AnnotationPrivilegedMovers, fix), nil
}
