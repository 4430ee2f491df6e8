package mover

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/internal/kopia"
	"github.com/snapflow/snapflow/internal/scheme"
	"github.com/snapflow/snapflow/internal/verify"
)

// The termination message carries the report whole, and stays inside the
// 4 KiB Kubernetes keeps however long the log tail, failure or batch.
func TestTerminationMessageRoundTrip(t *testing.T) {
	at := time.Date(2026, 12, 5, 6, 0, 0, 0, time.UTC)
	long := strings.Repeat("x", 6000)
	var members []MemberOutcome
	for i := range 300 {
		members = append(members, MemberOutcome{Index: i, Message: "kopia refused: " + long[:100], Class: "Internal"})
	}
	tests := []struct {
		name    string
		summary string
		r       Report
		check   func(t *testing.T, got *Report)
	}{
		{"a snapshot result", "snapshot k1: 3 new files", Report{Phase: "Succeeded", Started: at,
			Snapshot: &Result{Start: at, End: at.Add(time.Minute), Snapshot: kopia.SnapshotResult{ID: "k1"}, Source: kopia.Source{Username: "u", Hostname: "ns.app", Path: "/data"}},
			Progress: &kopia.Progress{FilesHashed: 3}, LogTail: "dropped when nothing failed"},
			func(t *testing.T, got *Report) {
				if got.Snapshot == nil || got.Snapshot.Snapshot.ID != "k1" || got.Snapshot.Source.Hostname != "ns.app" || !got.Started.Equal(at) {
					t.Fatalf("snapshot: %+v", got.Snapshot)
				}
				if got.LogTail != "" || got.Progress != nil {
					t.Fatalf("a success carries no log tail or progress: %+v", got)
				}
			}},
		{"a failure with a huge log tail and message", long, Report{Phase: "Failed", Started: at,
			Failure: &Failure{Class: "Unreachable", Message: long, Hint: "check the endpoint"}, FailedAt: at, LogTail: long},
			func(t *testing.T, got *Report) {
				if got.Failure == nil || got.Failure.Class != "Unreachable" || got.Failure.Hint != "check the endpoint" || len(got.Failure.Message) < 200 || !got.FailedAt.Equal(at) {
					t.Fatalf("failure: %+v", got.Failure)
				}
			}},
		{"a failed verification of a long successExpr", "verification failed", Report{Phase: "Failed", Started: at,
			Verified: &VerifyReport{Work: VerifyWork{SuccessExpr: strings.Repeat("files > 0 && errors < 1 && ", 38)}, Message: "successExpr " + strings.Repeat("files > 0 && errors < 1 && ", 38) + " was false",
				Outcome: verifyOutcome("k1")}},
			func(t *testing.T, got *Report) {
				if got.Verified == nil || got.Verified.Passed || got.Verified.Outcome.SnapshotID != "k1" || !strings.HasPrefix(got.Verified.Message, "successExpr files > 0") {
					t.Fatalf("verified: %+v", got.Verified)
				}
			}},
		{"a large batch keeps what fits, deleted members go", "deleted 1\n" + FormatDeleted([]int{300}), Report{Phase: "Done",
			Members: append(members, MemberOutcome{Index: 300, Deleted: true})},
			func(t *testing.T, got *Report) {
				if len(got.Members) == 0 || got.Members[0].Index != 0 || got.Members[0].Class != "Internal" {
					t.Fatalf("members: %+v", got.Members)
				}
				for _, m := range got.Members {
					if m.Deleted {
						t.Fatalf("a deleted member is in the report: %+v", m)
					}
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := TerminationMessage(tt.summary, tt.r)
			if len(msg) > maxMessage {
				t.Fatalf("message is %d bytes, over %d", len(msg), maxMessage)
			}
			got, err := ParseReport(msg)
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, got)
			if done, err := ParseDeleted(msg, 301); err != nil || (tt.r.Phase == "Done" && (len(done) != 1 || done[0] != 300)) {
				t.Fatalf("deleted line: %v %v", done, err)
			}
		})
	}
	if _, err := ParseReport("OOMKilled\nsome log line"); !errors.Is(err, ErrNoReport) {
		t.Fatalf("a message without a report: %v", err)
	}
	if _, err := ParseReport(ReportPrefix + "{not json"); !errors.Is(err, ErrReportMismatch) {
		t.Fatalf("a broken report: %v", err)
	}
	// After a crash the message is the log tail: a report line in it that
	// is not the last line (as the mover writes it) is not taken.
	if _, err := ParseReport(ReportPrefix + `{"phase":"Succeeded"}` + "\nmover: killed"); !errors.Is(err, ErrNoReport) {
		t.Fatalf("a report line inside a log: %v", err)
	}
}

// The function writes a report only as the results of its own work spec,
// once, and never a report that names another source or snapshot.
func TestApplyWritesOnlyTheWorkSpecsResult(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2026, 12, 5, 6, 0, 0, 0, time.UTC)
	src := kopia.Source{Username: "u", Hostname: "billing.app", Path: "/data"}
	newClient := func() client.Client {
		s := &snapv1.Snapshot{ObjectMeta: metav1.ObjectMeta{Namespace: "billing", Name: "s", UID: "s-uid"},
			Status: snapv1.SnapshotStatus{Phase: snapv1.SnapshotRunning}}
		rs := &snapv1.Restore{ObjectMeta: metav1.ObjectMeta{Namespace: "billing", Name: "rs", UID: "rs-uid"}}
		return fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(s, rs).WithStatusSubresource(&snapv1.Snapshot{}, &snapv1.Restore{}).Build()
	}
	snapSpec := &WorkSpec{Operation: OpSnapshot, Target: Target{Kind: "Snapshot", Namespace: "billing", Name: "s", UID: "s-uid"},
		Snapshot: &SnapshotWork{Source: src}}
	ok := Report{Started: at, Snapshot: &Result{Start: at, End: at.Add(time.Minute), Source: src, Snapshot: kopia.SnapshotResult{ID: "k1"}}}

	t.Run("a result is written once", func(t *testing.T) {
		c := newClient()
		if err := ok.Apply(ctx, c, snapSpec); err != nil {
			t.Fatal(err)
		}
		var s snapv1.Snapshot
		if err := c.Get(ctx, client.ObjectKey{Namespace: "billing", Name: "s"}, &s); err != nil {
			t.Fatal(err)
		}
		if s.Status.Phase != snapv1.SnapshotSucceeded || s.Status.Snapshot == nil || s.Status.Snapshot.KopiaSnapshotID != "k1" {
			t.Fatalf("status: %+v", s.Status)
		}
		// A second, different report (a redelivery, or a forged pod) changes nothing.
		other := ok
		other.Snapshot = &Result{Source: src, Snapshot: kopia.SnapshotResult{ID: "k2"}}
		if err := other.Apply(ctx, c, snapSpec); err != nil {
			t.Fatal(err)
		}
		if err := c.Get(ctx, client.ObjectKey{Namespace: "billing", Name: "s"}, &s); err != nil {
			t.Fatal(err)
		}
		if s.Status.Snapshot.KopiaSnapshotID != "k1" {
			t.Fatalf("a finished Snapshot took a second result: %+v", s.Status.Snapshot)
		}
	})
	restoreSpec := &WorkSpec{Operation: OpRestore, Target: Target{Kind: "Restore", Namespace: "billing", Name: "rs", UID: "rs-uid"},
		Repository: Repository{NamespaceBound: true}, Restore: &RestoreWork{SnapshotID: "k1"}}
	for _, tc := range []struct {
		name string
		spec *WorkSpec
		r    Report
	}{
		{"another kopia source", snapSpec, Report{Started: at, Snapshot: &Result{Source: kopia.Source{Username: "u", Hostname: "payroll.app", Path: "/data"}}}},
		{"another snapshot than the work named", restoreSpec, Report{Started: at, Restored: &RestoreResult{SnapshotID: "k9", Source: src}}},
		{"another namespace's snapshot in a shared repository", &WorkSpec{Operation: OpRestore, Target: restoreSpec.Target,
			Repository: Repository{NamespaceBound: true}, Restore: &RestoreWork{}},
			Report{Started: at, Resolved: &RestoreResolution{SnapshotID: "k9", Source: kopia.Source{Hostname: "payroll.app"}}}},
		{"members the batch did not have", &WorkSpec{Operation: OpDelete, Delete: &DeleteWork{Members: []DeleteMember{{Name: "a"}}}},
			Report{Members: []MemberOutcome{{Index: 3, Message: "x"}}}},
		{"no result at all", snapSpec, Report{Started: at}},
	} {
		t.Run("refused: "+tc.name, func(t *testing.T) {
			c := newClient()
			if err := tc.r.Apply(ctx, c, tc.spec); !errors.Is(err, ErrReportMismatch) {
				t.Fatalf("got %v, want ErrReportMismatch", err)
			}
			var s snapv1.Snapshot
			if err := c.Get(ctx, client.ObjectKey{Namespace: "billing", Name: "s"}, &s); err != nil {
				t.Fatal(err)
			}
			var rs snapv1.Restore
			if err := c.Get(ctx, client.ObjectKey{Namespace: "billing", Name: "rs"}, &rs); err != nil {
				t.Fatal(err)
			}
			if s.Status.Phase != snapv1.SnapshotRunning || s.Status.Snapshot != nil || rs.Status.Resolved != nil || rs.Status.Phase.IsTerminal() {
				t.Fatalf("a refused report was written: %+v %+v", s.Status, rs.Status)
			}
		})
	}
}

func verifyOutcome(id string) verify.Outcome { return verify.Outcome{SnapshotID: id} }
