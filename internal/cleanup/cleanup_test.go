package cleanup

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
)

func snap(mut ...func(*snapv1.Snapshot)) *snapv1.Snapshot {
	s := &snapv1.Snapshot{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns", Annotations: map[string]string{}}}
	s.Status.Phase = snapv1.SnapshotSucceeded
	s.Status.Origin = snapv1.OriginScheduled
	s.Status.Snapshot = &snapv1.SnapshotRecord{KopiaSnapshotID: "k1"}
	s.Status.Resolved = &snapv1.SnapshotResolved{Repository: &snapv1.RepositoryRef{Kind: snapv1.KindRepository, Name: "r"}}
	for _, m := range mut {
		m(s)
	}
	return s
}

func TestClassify(t *testing.T) {
	cases := []struct {
		name     string
		s        *snapv1.Snapshot
		f        Facts
		action   Action
		reason   string
		external bool
	}{
		{"default deletes", snap(), Facts{}, Delete, ReasonDeleted, true},
		{"retention prune is internal", snap(func(s *snapv1.Snapshot) { s.Annotations[wellknown.AnnotationPrunedBy] = "retention" }), Facts{}, Delete, ReasonDeleted, false},
		{"unknown pruned-by counts as external", snap(func(s *snapv1.Snapshot) { s.Annotations[wellknown.AnnotationPrunedBy] = "someone" }), Facts{}, Delete, ReasonDeleted, true},
		{"skip annotation", snap(func(s *snapv1.Snapshot) { s.Annotations[wellknown.AnnotationSkipSnapshotCleanup] = "" }), Facts{}, Release, ReasonSkipAnnotation, false},
		{"retain", snap(func(s *snapv1.Snapshot) { s.Spec.DeletionPolicy = snapv1.DeletionRetain }), Facts{}, Release, ReasonRetain, false},
		{"orphan", snap(func(s *snapv1.Snapshot) { s.Spec.DeletionPolicy = snapv1.DeletionOrphan }), Facts{}, Release, ReasonOrphan, false},
		{"discovered is always retained", snap(func(s *snapv1.Snapshot) {
			s.Status.Origin = snapv1.OriginDiscovered
			s.Spec.DeletionPolicy = snapv1.DeletionDelete
		}), Facts{}, Release, ReasonRetain, false},
		{"unknown origin is left alone", snap(func(s *snapv1.Snapshot) { s.Status.Origin = "martian" }), Facts{}, Release, ReasonUnknownOrigin, false},
		{"failed run has no data", snap(func(s *snapv1.Snapshot) { s.Status.Snapshot = nil }), Facts{}, Release, ReasonNoKopiaSnapshot, false},
		{"schedule gone, Retain by default", snap(), Facts{ScheduleGone: true}, Release, ReasonRetainedOnSchedule, true},
		{"schedule gone, Delete asked", snap(func(s *snapv1.Snapshot) { s.Spec.OnScheduleDelete = snapv1.CascadeDelete }), Facts{ScheduleGone: true}, Delete, ReasonDeleted, true},
		{"policy cascade retains", snap(func(s *snapv1.Snapshot) { s.Annotations[wellknown.AnnotationPrunedBy] = "policy-cascade" }), Facts{}, Release, ReasonRetainedOnPolicy, false},
		{"policy gone, Retain", snap(), Facts{PolicyGone: true}, Release, ReasonRetainedOnPolicy, true},
		{"policy gone, Delete", snap(), Facts{PolicyGone: true, PolicyOnDelete: snapv1.CascadeDelete}, Delete, ReasonDeleted, true},
		{"namespace gone, Orphan by default", snap(), Facts{NamespaceGone: true}, Release, ReasonRetainedOnNamespace, true},
		{"namespace gone, Orphan set", snap(), Facts{NamespaceGone: true, OnNamespaceDelete: snapv1.NamespaceDeleteOrphan}, Release, ReasonRetainedOnNamespace, true},
		{"namespace gone, Delete asked", snap(), Facts{NamespaceGone: true, OnNamespaceDelete: snapv1.NamespaceDeleteDelete}, Delete, ReasonDeleted, true},
		{"namespace gone, Delete asked, deletion order does not matter", snap(), Facts{NamespaceGone: true, OnNamespaceDelete: snapv1.NamespaceDeleteDelete, ScheduleGone: true, PolicyGone: true}, Delete, ReasonDeleted, true},
		{"namespace gone, deletionPolicy Retain wins", snap(func(s *snapv1.Snapshot) { s.Spec.DeletionPolicy = snapv1.DeletionRetain }), Facts{NamespaceGone: true, OnNamespaceDelete: snapv1.NamespaceDeleteDelete}, Release, ReasonRetain, false},
		{"namespace gone, retention prune still deletes", snap(func(s *snapv1.Snapshot) { s.Annotations[wellknown.AnnotationPrunedBy] = "retention" }), Facts{NamespaceGone: true}, Delete, ReasonDeleted, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := Classify(c.s, c.f)
			if d.Action != c.action || d.Reason != c.reason || d.External != c.external {
				t.Fatalf("got %+v, want %s/%s external=%v", d, c.action, c.reason, c.external)
			}
		})
	}
}

func TestBreaker(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	pending := func(n int) []Pending {
		var ps []Pending
		for i := 0; i < n; i++ {
			ps = append(ps, Pending{Name: string(rune('a' + i)), DeletedAt: now.Add(-time.Duration(n-i) * time.Minute)})
		}
		return ps
	}
	b, msg := BreakerOf(&snapv1.RepositorySpec{}, nil, now)
	if b.Threshold != 10 || msg != "" {
		t.Fatalf("default %+v %q", b, msg)
	}
	if held := b.Held(pending(9)); held != nil {
		t.Fatalf("below the threshold nothing is held: %v", held)
	}
	if held := b.Held(pending(10)); len(held) != 10 {
		t.Fatalf("at the threshold every deletion is held: %v", held)
	}
	// An acknowledgement releases only deletions up to its instant.
	ps := pending(15)
	ack := ps[9].DeletedAt
	b, _ = BreakerOf(&snapv1.RepositorySpec{}, map[string]string{wellknown.AnnotationAllowMassDeletion: ack.Format(time.RFC3339)}, now)
	if held := b.Held(ps); len(held) != 5 {
		t.Fatalf("ack at the 10th deletion should hold the 5 later ones, held %v", held)
	}
	// A far-future ack would stand for every deletion to come: ignored with a
	// message. One within the clock skew clamps to now; garbage is ignored.
	b, msg = BreakerOf(&snapv1.RepositorySpec{}, map[string]string{wellknown.AnnotationAllowMassDeletion: now.Add(time.Hour).Format(time.RFC3339)}, now)
	if !b.Ack.IsZero() || !strings.Contains(msg, "in the future") {
		t.Fatalf("future ack honoured: %v %q", b.Ack, msg)
	}
	b, _ = BreakerOf(&snapv1.RepositorySpec{}, map[string]string{wellknown.AnnotationAllowMassDeletion: now.Add(30 * time.Second).Format(time.RFC3339)}, now)
	if !b.Ack.Equal(now) {
		t.Fatalf("an ack within the skew not clamped: %v", b.Ack)
	}
	b, msg = BreakerOf(&snapv1.RepositorySpec{}, map[string]string{wellknown.AnnotationAllowMassDeletion: "yes please"}, now)
	if !b.Ack.IsZero() || !strings.Contains(msg, "not an RFC3339") {
		t.Fatalf("bad ack: %+v %q", b, msg)
	}
	b, _ = BreakerOf(&snapv1.RepositorySpec{DeletionProtection: &snapv1.DeletionProtection{Threshold: ptr.To[int32](0)}}, nil, now)
	if held := b.Held(pending(50)); held != nil {
		t.Fatalf("threshold 0 disables the breaker: %v", held)
	}
	cmd := AckCommand(snapv1.RepositoryRef{Kind: snapv1.KindRepository, Name: "r"}, "ns", ps)
	if cmd != "kubectl annotate --overwrite repository/r -n ns "+wellknown.AnnotationAllowMassDeletion+"="+ps[14].DeletedAt.Format(time.RFC3339) {
		t.Fatalf("ack command %q", cmd)
	}
}
