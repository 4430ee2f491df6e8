package snapshot

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/preflight"
	"github.com/snapflow/snapflow/internal/repository"
	"github.com/snapflow/snapflow/internal/validate"
)

// preflightHolds evaluates the policy's preflight checks against the
// repository as it is now. It reports true when the run must not start:
// held (Pending, re-evaluated on every resync) or, past the timeout,
// failed. status.preflightSince is when the current hold began: a run that
// passes clears it, so a later hold (say, behind a busy slot) is timed
// afresh. The caller checks only runs that hold no slot claim yet.
func (f *Function) preflightHolds(ctx context.Context, s *snapv1.Snapshot, p *runPlan) (bool, error) {
	pf := p.policy.Spec.Preflight
	if pf == nil || len(pf.Checks) == 0 {
		return false, nil
	}
	maints, err := f.maintenancesOf(ctx, p.repo)
	if err != nil {
		return false, err
	}
	now := f.now()
	var since metav1.Time
	if s.Status.PreflightSince != nil {
		since = *s.Status.PreflightSince
	}
	v := preflight.Decide(pf, preflight.Vars(p.repo.Status, maints, now), since.Time, now)
	if v.Pass {
		if s.Status.PreflightSince == nil {
			return false, nil
		}
		return false, f.updateStatus(ctx, s, func(st *snapv1.SnapshotStatus, gen int64) {
			st.PreflightSince = nil
			meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: wellknown.ConditionReady, Status: metav1.ConditionFalse, Reason: preflight.ReasonPassed, Message: v.Message, ObservedGeneration: gen})
		})
	}
	if v.TimedOut {
		return true, f.failRun(ctx, s, preflight.ClassTimeout, v.Message, "")
	}
	stamp := metav1.NewTime(now.Truncate(1e9))
	return true, f.updateStatus(ctx, s, func(st *snapv1.SnapshotStatus, gen int64) {
		pending(st, s)
		if st.PreflightSince == nil {
			st.PreflightSince = &stamp
		}
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: wellknown.ConditionReady, Status: metav1.ConditionFalse, Reason: preflight.ReasonHeld, Message: v.Message, ObservedGeneration: gen})
	})
}

// maintenancesOf lists the Maintenances that maintain r: those of the
// namespace allowed to maintain it (a ClusterRepository's maintenance
// namespace, a Repository's own) that name it.
func (f *Function) maintenancesOf(ctx context.Context, r *repository.Object) ([]snapv1.Maintenance, error) {
	ns := f.maintenanceNamespace(r)
	var list snapv1.MaintenanceList
	if err := f.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("list the maintenances of namespace %s for the preflight checks: %w", ns, err)
	}
	key := validate.RepoKey(r.Ref, r.Namespace)
	out := list.Items[:0]
	for _, m := range list.Items {
		if validate.RepoKey(m.Spec.Repository, m.Namespace) == key {
			out = append(out, m)
		}
	}
	return out, nil
}

// maintenanceNamespace is where r's Maintenances may live: a Repository's
// own namespace, or the one a ClusterRepository names for maintenance.
func (f *Function) maintenanceNamespace(r *repository.Object) string {
	if cr, ok := r.Obj.(*snapv1.ClusterRepository); ok {
		return validate.MaintenanceNamespace(cr, f.Namespace)
	}
	return r.Namespace
}
