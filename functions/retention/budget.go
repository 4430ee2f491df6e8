package retention

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/cleanup"
	"github.com/snapflow/snapflow/internal/repository"
	kernel "github.com/snapflow/snapflow/internal/retention"
)

// ReasonBudgetExceeded marks a policy whose retention prunes are held.
const ReasonBudgetExceeded = "RetentionBudgetExceeded"

// budget runs the restore-point loss budget over this pass's GFS prunes.
func (f *Function) budget(ctx context.Context, p *snapv1.SnapshotPolicy, verdicts []kernel.Verdict) (kernel.BudgetResult, int, error) {
	points := 0
	var cands []kernel.Candidate
	for _, v := range verdicts {
		if v.Excluded != "" {
			continue
		}
		points++
		if !v.Keep {
			cands = append(cands, v.Candidate)
		}
	}
	threshold, err := f.threshold(ctx, p)
	if err != nil {
		return kernel.BudgetResult{}, 0, err
	}
	ack, bad := cleanup.AckOf(p.Annotations, f.now())
	if bad != "" && f.Recorder != nil {
		f.Recorder.Event(p, corev1.EventTypeWarning, "InvalidAcknowledgement", bad)
	}
	return kernel.Budget(kernel.BudgetInput{
		State: stateOf(p.Status.Retention), Threshold: threshold, Ack: ack,
		RestorePoints: points, Prune: cands, Now: f.now(),
	}), threshold, nil
}

// threshold is the smallest positive deletionProtection.threshold among the
// policy's repositories: the strictest owner wins. One that cannot be found
// counts with the default, never as "disabled".
func (f *Function) threshold(ctx context.Context, p *snapv1.SnapshotPolicy) (int, error) {
	refs := p.Spec.Repositories
	if p.Spec.Repository != nil {
		refs = append([]snapv1.RepositoryRef{*p.Spec.Repository}, refs...)
	}
	// 0 disables: it counts only when every repository says so, so a
	// tenant's own repository added to the list cannot switch off the
	// budget a shared repository's owner set.
	t := 0
	for _, ref := range refs {
		v := cleanup.DefaultThreshold
		r, err := repository.Get(ctx, f.Client, "", ref, p.Namespace)
		switch {
		case err == nil:
			v = cleanup.ThresholdOf(r.Spec)
		case !apierrors.IsNotFound(err):
			return 0, fmt.Errorf("read repository %s for the retention budget: %w", ref.Name, err)
		}
		if v > 0 && (t == 0 || v < t) {
			t = v
		}
	}
	if len(refs) == 0 {
		return cleanup.DefaultThreshold, nil
	}
	return t, nil
}

// recordBudgetLocked writes the budget over the status p was read with
// (optimistic lock); nothing is written when nothing changed.
func (f *Function) recordBudgetLocked(ctx context.Context, p *snapv1.SnapshotPolicy, b kernel.BudgetResult, threshold int) error {
	live := p.DeepCopy()
	if live.Status.Retention == nil {
		live.Status.Retention = &snapv1.RetentionStatus{}
	}
	recordBudget(live, b, threshold)
	if equality.Semantic.DeepEqual(live.Status, p.Status) {
		return nil
	}
	return f.Client.Status().Patch(ctx, live, client.MergeFromWithOptions(p, client.MergeFromWithOptimisticLock{}))
}

func stateOf(r *snapv1.RetentionStatus) kernel.BudgetState {
	if r == nil || r.Breaker == nil {
		return kernel.BudgetState{}
	}
	s := kernel.BudgetState{WindowStart: r.Breaker.WindowStart.Time, Peak: int(r.Breaker.Peak), Held: r.Breaker.Held}
	if r.Breaker.HeldSince != nil {
		s.HeldSince = r.Breaker.HeldSince.Time
	}
	return s
}

// recordBudget writes the budget into the live status and its condition.
func recordBudget(live *snapv1.SnapshotPolicy, b kernel.BudgetResult, threshold int) {
	st := &snapv1.RetentionBreakerStatus{
		WindowStart: metav1.NewTime(b.State.WindowStart), Peak: int32(b.State.Peak),
		Threshold: int32(threshold), Held: b.Held,
	}
	if !b.State.HeldSince.IsZero() {
		t := metav1.NewTime(b.State.HeldSince)
		st.HeldSince = &t
	}
	live.Status.Retention.Breaker = st
	if len(b.Held) == 0 {
		meta.RemoveStatusCondition(&live.Status.Conditions, wellknown.ConditionMassDeletionHeld)
		return
	}
	meta.SetStatusCondition(&live.Status.Conditions, metav1.Condition{
		Type: wellknown.ConditionMassDeletionHeld, Status: metav1.ConditionTrue, Reason: ReasonBudgetExceeded,
		Message: heldMessage(live, b, threshold), ObservedGeneration: live.Generation,
	})
}

func heldMessage(p *snapv1.SnapshotPolicy, b kernel.BudgetResult, threshold int) string {
	return fmt.Sprintf("retention holds %d Snapshot(s) it would prune (%s): the policy may lose at most %d restore point(s) per %gh "+
		"(the smallest deletionProtection.threshold of its repositories), so they are kept until the window rolls over. "+
		"If the new retention is intended, prune them now with: %s",
		len(b.Held), strings.Join(b.Held, ", "), threshold, kernel.BudgetWindow.Hours(), cleanup.AckCommandFor("snapshotpolicy/"+p.Name+" -n "+p.Namespace, b.State.HeldSince))
}
