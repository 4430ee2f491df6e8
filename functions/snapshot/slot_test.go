package snapshot

import (
	"context"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/scheme"
)

// slotFixture is one capped repository (a single slot), its policy and
// Snapshot s1; mutate adjusts them before the client is built.
func slotFixture(t *testing.T, mutate func(repo *snapv1.Repository, pol *snapv1.SnapshotPolicy, s1 *snapv1.Snapshot), extra ...client.Object) (client.Client, *Function) {
	t.Helper()
	const ns = "app"
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-data"}, Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}
	objs := oneRunFixture(ns, pvc)
	one := int32(1)
	repo, pol, s1 := objs[2].(*snapv1.Repository), objs[3].(*snapv1.SnapshotPolicy), objs[4].(*snapv1.Snapshot)
	repo.Spec.Concurrency = &snapv1.Concurrency{MaxConcurrentJobs: &one}
	mutate(repo, pol, s1)
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(append(objs, extra...)...).
		WithStatusSubresource(&snapv1.Snapshot{}, &snapv1.Repository{}, &batchv1.Job{}).Build()
	return c, &Function{Client: c, Namespace: "snapflow-system", MoverImage: "img"}
}

func claimed(at time.Time) func(*snapv1.Snapshot) {
	return func(s *snapv1.Snapshot) {
		s.Status.Phase = snapv1.SnapshotPending
		s.Status.Resolved = &snapv1.SnapshotResolved{Repository: &snapv1.RepositoryRef{Name: "primary"}}
		s.Status.Conditions = []metav1.Condition{{Type: wellknown.ConditionRepositorySlotAvailable, Status: metav1.ConditionTrue, Reason: ReasonSlotClaimed, LastTransitionTime: metav1.NewTime(at)}}
	}
}

func snapshotNamed(t *testing.T, c client.Client, name string) *snapv1.Snapshot {
	t.Helper()
	var s snapv1.Snapshot
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "app", Name: name}, &s); err != nil {
		t.Fatal(err)
	}
	return &s
}

// A run that holds its claim is past its gates (its hooks may have frozen
// the workload): a repository suspended or a preflight check failing
// since then do not park it, and a later run waits behind its claim.
func TestAClaimedRunGoesOn(t *testing.T) {
	ctx := context.Background()
	s2 := &snapv1.Snapshot{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "s2", UID: "uid-s2"},
		Spec: snapv1.SnapshotSpec{PolicyRef: &snapv1.PolicyRef{Name: "app"}}}
	c, f := slotFixture(t, func(repo *snapv1.Repository, pol *snapv1.SnapshotPolicy, s1 *snapv1.Snapshot) {
		repo.Spec.Suspend = true
		pol.Spec.Preflight = &snapv1.Preflight{Checks: []snapv1.PreflightCheck{{Name: "maintained", Expr: "maintenance.hasRun"}}}
		claimed(time.Now())(s1)
		s1.Status.Hooks = &snapv1.HookStamps{PreCompletedAt: &metav1.Time{Time: time.Now()}}
	}, s2)
	if err := f.ReconcileSnapshot(ctx, "app", "s2"); err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(snapshotNamed(t, c, "s2").Status.Conditions, wellknown.ConditionReady); c == nil || c.Reason != wellknown.ReasonRepositorySuspended {
		t.Fatalf("an unclaimed run of a suspended repository: %+v, want RepositorySuspended", c)
	}
	if err := f.ReconcileSnapshot(ctx, "app", "s1"); err != nil {
		t.Fatal(err)
	}
	if s := snapshotNamed(t, c, "s1"); s.Status.Job == nil {
		t.Fatalf("the claimed run did not start its mover: %+v", s.Status.Conditions)
	}
}

// The second count settles two runs claiming at once, and a claim made
// by a twin delivery of the same run never blocks that run.
func TestTakeSlot(t *testing.T) {
	ctx := context.Background()
	other := &snapv1.Snapshot{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "other", UID: "uid-other"},
		Spec: snapv1.SnapshotSpec{PolicyRef: &snapv1.PolicyRef{Name: "app"}}}
	c, f := slotFixture(t, func(_ *snapv1.Repository, _ *snapv1.SnapshotPolicy, s1 *snapv1.Snapshot) {
		claimed(time.Now())(s1) // a twin delivery claimed already
	})
	s1 := snapshotNamed(t, c, "s1")
	plan, problem, err := f.plan(ctx, s1)
	if err != nil || problem != nil {
		t.Fatal(err, problem)
	}
	if held, msg, err := f.takeSlot(ctx, s1, plan); err != nil || held {
		t.Fatalf("its own claim held the run: %v %q", err, msg)
	}
	if err := c.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	// Another run's claim, made while this one was counting.
	other = snapshotNamed(t, c, "other")
	claimed(time.Now())(other)
	if err := c.Status().Update(ctx, other); err != nil {
		t.Fatal(err)
	}
	if held, msg, err := f.takeSlot(ctx, s1, plan); err != nil || !held {
		t.Fatalf("another run's claim on the only slot: held %v %q %v, want held", held, msg, err)
	}
}

// A run held by another gate before its hooks gives its claim back; one
// whose hooks started keeps it.
func TestHoldGivesTheClaimBackUnlessFrozen(t *testing.T) {
	ctx := context.Background()
	for _, frozen := range []bool{false, true} {
		c, f := slotFixture(t, func(_ *snapv1.Repository, _ *snapv1.SnapshotPolicy, s1 *snapv1.Snapshot) {
			claimed(time.Now())(s1)
			if frozen {
				s1.Status.Hooks = &snapv1.HookStamps{Results: []snapv1.HookResult{{List: ListBefore, Kind: "runJob", Running: true}}}
			}
		})
		s1 := snapshotNamed(t, c, "s1")
		if err := f.hold(ctx, s1, gate{cond: wellknown.ConditionReady, reason: ReasonSourceNotFound, message: "gone"}); err != nil {
			t.Fatal(err)
		}
		kept := claimOf(snapshotNamed(t, c, "s1")) != nil
		if kept != frozen {
			t.Errorf("hooks started %v: claim kept %v", frozen, kept)
		}
	}
}

func TestStartingLimit(t *testing.T) {
	hook := func(timeout string) snapv1.Hook {
		return snapv1.Hook{WorkloadExec: &snapv1.WorkloadExecHook{Command: []string{"fsfreeze"}, Timeout: timeout}}
	}
	tests := []struct {
		name    string
		spec    snapv1.SnapshotPolicySpec
		staged  *snapv1.Staged
		want    time.Duration
		bounded bool
	}{
		{"no hooks: the default staging timeout and the margin", snapv1.SnapshotPolicySpec{}, nil, 15 * time.Minute, true},
		{"direct still counts staging: a volume policy may stage", snapv1.SnapshotPolicySpec{CopyMethod: snapv1.CopyDirect}, nil, 15 * time.Minute, true},
		{"each hook's timeout and its minute", snapv1.SnapshotPolicySpec{
			Hooks: &snapv1.Hooks{BeforeSnapshot: []snapv1.Hook{hook("1h"), hook("")}, AfterSnapshot: []snapv1.Hook{hook("3h")}}}, nil, 15*time.Minute + 61*time.Minute + 6*time.Minute, true},
		{"a longer staging timeout", snapv1.SnapshotPolicySpec{Staging: &snapv1.Staging{Timeout: "2h"}}, nil, 2*time.Hour + 5*time.Minute, true},
		{"no staging limit, not staging yet: the hooks are bounded", snapv1.SnapshotPolicySpec{Staging: &snapv1.Staging{Timeout: "0"}}, nil, 5 * time.Minute, true},
		{"no staging limit, staging", snapv1.SnapshotPolicySpec{Staging: &snapv1.Staging{Timeout: "0"}}, &snapv1.Staged{CopyMethod: snapv1.CopySnapshot}, 5 * time.Minute, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, bounded := StartingLimit(&snapv1.SnapshotPolicy{Spec: tt.spec}, &snapv1.Snapshot{Status: snapv1.SnapshotStatus{Staged: tt.staged}})
			if got != tt.want || bounded != tt.bounded {
				t.Fatalf("got %s bounded %v, want %s bounded %v", got, bounded, tt.want, tt.bounded)
			}
		})
	}
}
