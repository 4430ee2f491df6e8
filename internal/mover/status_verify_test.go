package mover

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/internal/scheme"
)

// A failed verification exits non-zero, so its Job retries the pod; by then
// a later run may hold the tier's entry, and the retry must neither start
// again nor overwrite that run with its own, older result.
func TestLateVerifyReportDoesNotOverwriteALaterRun(t *testing.T) {
	ctx := context.Background()
	early, later := time.Date(2026, 12, 3, 12, 5, 58, 0, time.UTC), time.Date(2026, 12, 4, 3, 0, 0, 0, time.UTC)
	ref := snapv1.RepositoryRef{Kind: snapv1.KindRepository, Name: "primary"}
	p := &snapv1.SnapshotPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "app", UID: "p-uid"},
		Status: snapv1.SnapshotPolicyStatus{VerificationRuns: []snapv1.VerificationRun{{Tier: "quick", Repository: ref, Slot: metav1.NewTime(later), Phase: "Running", Job: "app-verify-quick-later"}}}}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(p).WithStatusSubresource(&snapv1.SnapshotPolicy{}).Build()
	work := VerifyWork{Tier: "quick", RepositoryKind: "Repository", RepositoryName: "primary", Slot: early}
	k := &KubeReporter{Client: c, Target: Target{Kind: "SnapshotPolicy", Namespace: "ns", Name: "app", UID: "p-uid"}, Verify: &work}

	if err := k.verifyStarted(ctx); err != ErrAlreadyFinished {
		t.Fatalf("a retried pod of an earlier run started: %v", err)
	}
	if err := k.VerifyDone(ctx, VerifyReport{Work: work, Message: "found 1 error(s)", At: early}); err != nil {
		t.Fatal(err)
	}
	var live snapv1.SnapshotPolicy
	if err := c.Get(ctx, client.ObjectKeyFromObject(p), &live); err != nil {
		t.Fatal(err)
	}
	if r := live.Status.VerificationRuns[0]; !r.Slot.Time.Equal(later) || r.Phase != "Running" || r.Message != "" {
		t.Fatalf("the later run was overwritten: %+v", r)
	}
	// The run's own report is recorded.
	work.Slot = later
	if err := k.VerifyDone(ctx, VerifyReport{Work: work, Passed: true, Message: "ok", At: later}); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(p), &live); err != nil {
		t.Fatal(err)
	}
	if r := live.Status.VerificationRuns[0]; r.Phase != "Passed" {
		t.Fatalf("the run's own report was dropped: %+v", r)
	}
}
