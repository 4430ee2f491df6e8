package retention

import (
	"reflect"
	"sort"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
)

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func kept(vs []Verdict) []string {
	var out []string
	for _, v := range vs {
		if v.Keep {
			out = append(out, v.Name)
		}
	}
	sort.Strings(out)
	return out
}

// daily returns one candidate per day at 02:00 UTC, named by date, newest last.
func daily(from string, days int) []Candidate {
	start := at(from)
	var out []Candidate
	for i := 0; i < days; i++ {
		t := start.AddDate(0, 0, i)
		out = append(out, Candidate{Name: t.Format("2006-01-02"), Time: t})
	}
	return out
}

func TestSelect(t *testing.T) {
	tests := []struct {
		name  string
		r     snapv1.Retention
		cands []Candidate
		want  []string
	}{
		{"keepLatest", snapv1.Retention{KeepLatest: ptr.To[int32](2)}, daily("2026-01-01T02:00:00Z", 5), []string{"2026-01-04", "2026-01-05"}},
		{"keepDaily", snapv1.Retention{KeepDaily: ptr.To[int32](3)}, daily("2026-01-01T02:00:00Z", 5), []string{"2026-01-03", "2026-01-04", "2026-01-05"}},
		// 2026-01-01 is a Thursday of ISO week 2026-W01; 2025-12-29..31 are W01 too.
		{"ISO weeks across a new year", snapv1.Retention{KeepWeekly: ptr.To[int32](2)}, daily("2025-12-20T02:00:00Z", 14), []string{"2025-12-28", "2026-01-02"}},
		{"monthly keeps the newest of each month", snapv1.Retention{KeepMonthly: ptr.To[int32](2)}, daily("2026-01-25T02:00:00Z", 14), []string{"2026-01-31", "2026-02-07"}},
		{"annual", snapv1.Retention{KeepAnnual: ptr.To[int32](5)}, daily("2025-12-30T02:00:00Z", 4), []string{"2025-12-31", "2026-01-02"}},
		{"N counts periods that have a snapshot, not calendar periods", snapv1.Retention{KeepDaily: ptr.To[int32](2)},
			[]Candidate{{Name: "a", Time: at("2026-01-01T02:00:00Z")}, {Name: "b", Time: at("2026-01-05T02:00:00Z")}, {Name: "c", Time: at("2026-01-10T02:00:00Z")}}, []string{"b", "c"}},
		{"hourly within a day", snapv1.Retention{KeepHourly: ptr.To[int32](2)},
			[]Candidate{{Name: "a", Time: at("2026-01-01T10:05:00Z")}, {Name: "b", Time: at("2026-01-01T10:50:00Z")}, {Name: "c", Time: at("2026-01-01T11:10:00Z")}}, []string{"b", "c"}},
		{"ties broken by name", snapv1.Retention{KeepLatest: ptr.To[int32](1)},
			[]Candidate{{Name: "z", Time: at("2026-01-01T00:00:00Z")}, {Name: "a", Time: at("2026-01-01T00:00:00Z")}}, []string{"a"}},
		{"union of buckets", snapv1.Retention{KeepLatest: ptr.To[int32](1), KeepDaily: ptr.To[int32](2)},
			[]Candidate{{Name: "d1", Time: at("2026-01-01T02:00:00Z")}, {Name: "d2a", Time: at("2026-01-02T01:00:00Z")}, {Name: "d2b", Time: at("2026-01-02T23:00:00Z")}}, []string{"d1", "d2b"}},
		{"pinned always kept", snapv1.Retention{KeepLatest: ptr.To[int32](1)},
			[]Candidate{{Name: "old", Time: at("2020-01-01T00:00:00Z"), Pinned: true}, {Name: "new", Time: at("2026-01-01T00:00:00Z")}, {Name: "mid", Time: at("2024-01-01T00:00:00Z")}}, []string{"new", "old"}},
		{"per-source buckets", snapv1.Retention{KeepLatest: ptr.To[int32](1)},
			[]Candidate{{Name: "a1", Time: at("2026-01-01T00:00:00Z"), Bucket: "pvc/ns/a"}, {Name: "a2", Time: at("2026-01-02T00:00:00Z"), Bucket: "pvc/ns/a"},
				{Name: "b1", Time: at("2026-01-01T00:00:00Z"), Bucket: "pvc/ns/b"}}, []string{"a2", "b1"}},
		{"excluded candidates are never pruned", snapv1.Retention{KeepLatest: ptr.To[int32](1)},
			[]Candidate{{Name: "failed", Time: at("2020-01-01T00:00:00Z"), Excluded: "phase Failed"}, {Name: "new", Time: at("2026-01-01T00:00:00Z")}, {Name: "old", Time: at("2025-01-01T00:00:00Z")}}, []string{"failed", "new"}},
		{"non-UTC times use UTC periods", snapv1.Retention{KeepDaily: ptr.To[int32](1)},
			[]Candidate{{Name: "late", Time: at("2026-01-01T23:30:00-05:00")}, {Name: "early", Time: at("2026-01-02T01:00:00Z")}}, []string{"late"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := kept(Select(tc.r, tc.cands)); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("kept %v, want %v", got, tc.want)
			}
		})
	}
}

func TestReasons(t *testing.T) {
	vs := Select(snapv1.Retention{KeepLatest: ptr.To[int32](1), KeepDaily: ptr.To[int32](1), KeepMonthly: ptr.To[int32](1)}, daily("2026-01-01T02:00:00Z", 3))
	last := vs[2]
	if !reflect.DeepEqual(last.Reasons, []string{ReasonLatest, ReasonDaily, ReasonMonthly}) {
		t.Fatalf("reasons = %v", last.Reasons)
	}
	if got := Prune(vs); !reflect.DeepEqual(got, []string{"2026-01-01", "2026-01-02"}) {
		t.Fatalf("prune = %v", got)
	}
}

func TestFromSnapshot(t *testing.T) {
	end := metav1.NewTime(at("2026-03-01T02:03:04Z"))
	s := &snapv1.Snapshot{
		ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "billing", CreationTimestamp: metav1.NewTime(at("2026-03-01T02:00:00Z"))},
		Spec: snapv1.SnapshotSpec{Pin: true, Repository: &snapv1.RepositoryRef{Name: "offsite"},
			Source: &snapv1.SnapshotSource{Target: snapv1.SnapshotTarget{PVC: snapv1.PVCTarget{Name: "orders"}}}},
		Status: snapv1.SnapshotStatus{Phase: snapv1.SnapshotSucceeded, Snapshot: &snapv1.SnapshotRecord{KopiaSnapshotID: "k1"}, Timing: &snapv1.Timing{EndTime: &end}},
	}
	c := FromSnapshot(s, true)
	if c.Excluded != "" || !c.Pinned || !c.Time.Equal(end.Time) || c.Bucket != "pvc/billing/orders repo/Repository/billing/offsite" {
		t.Fatalf("candidate = %+v", c)
	}
	// A policy writing to one repository has one bucket per source: a pin
	// left from when it had several does not split it.
	if c := FromSnapshot(s, false); c.Bucket != "pvc/billing/orders" {
		t.Fatalf("single-repository bucket = %q", c.Bucket)
	}
	s.Status.Snapshot = nil
	if c := FromSnapshot(s, true); c.Excluded != "no kopia snapshot recorded" {
		t.Fatalf("phantom succeeded: %+v", c)
	}
	s.Status.Phase = snapv1.SnapshotUnchanged
	if c := FromSnapshot(s, true); c.Excluded != "phase Unchanged" {
		t.Fatalf("unchanged: %+v", c)
	}
}

// A policy shrunk from two repositories to one: its old pinned Snapshots
// and its new unpinned ones share one window, so the old ones age out.
func TestShrunkPolicyPrunesItsOldPins(t *testing.T) {
	snap := func(name, ts, repo string) *snapv1.Snapshot {
		end := metav1.NewTime(at(ts))
		s := &snapv1.Snapshot{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "billing"},
			Status: snapv1.SnapshotStatus{Phase: snapv1.SnapshotSucceeded, Snapshot: &snapv1.SnapshotRecord{KopiaSnapshotID: name}, Timing: &snapv1.Timing{EndTime: &end}}}
		if repo != "" {
			s.Spec.Repository = &snapv1.RepositoryRef{Name: repo}
		}
		return s
	}
	snaps := []*snapv1.Snapshot{
		snap("old-a", "2026-01-01T00:00:00Z", "a"), snap("old-b", "2026-01-01T00:00:00Z", "b"),
		snap("new-1", "2026-01-02T00:00:00Z", ""), snap("new-2", "2026-01-03T00:00:00Z", ""),
	}
	cands := make([]Candidate, len(snaps))
	for i, s := range snaps {
		cands[i] = FromSnapshot(s, false)
	}
	got := Prune(Select(snapv1.Retention{KeepLatest: ptr.To[int32](2)}, cands))
	sort.Strings(got)
	if !reflect.DeepEqual(got, []string{"old-a", "old-b"}) {
		t.Fatalf("prune = %v, want the old pinned runs", got)
	}
}
