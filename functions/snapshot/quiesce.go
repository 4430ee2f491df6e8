package snapshot

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/functions/host"
)

// The workload is quiesced by the beforeSnapshot hooks and resumed by the
// afterSnapshot hooks: for a VolumeGroupSnapshot once, by the member that
// cuts it; as soon as the copy the run reads exists (copyMethod Snapshot:
// its VolumeSnapshot is ready; Clone: its cloned PVC is bound), else when
// the run ends (Direct reads the live volume).
//
// beforeHooks runs the beforeSnapshot hooks once and reports whether the
// run may go on to staging (false while a hook runs, or once it failed).
func (f *Function) beforeHooks(ctx context.Context, s *snapv1.Snapshot, plan *runPlan) (bool, error) {
	if goOn, err := f.groupHooks(ctx, s, plan); err != nil || !goOn {
		return false, err
	}
	if hooks := plan.policy.Spec.Hooks; hooks != nil && len(hooks.BeforeSnapshot) > 0 && (s.Status.Hooks == nil || (s.Status.Hooks.PreCompletedAt == nil && s.Status.Hooks.GroupMember == "")) {
		out, err := f.runHooks(ctx, s, plan.policy, ListBefore, hooks.BeforeSnapshot)
		switch {
		case err != nil:
			return false, err
		case out.failed != "":
			// An aborted backup never creates its mover Job.
			return false, f.failRun(ctx, s, reasonHookFailed, "a beforeSnapshot hook failed, so the backup was aborted: "+out.failed, "")
		case out.pending != "":
			return false, f.updateStatus(ctx, s, func(st *snapv1.SnapshotStatus, gen int64) {
				if st.Phase == "" {
					st.Phase = snapv1.SnapshotPending
				}
				meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: wellknown.ConditionReady, Status: metav1.ConditionFalse, Reason: ReasonRunningHooks, Message: out.pending, ObservedGeneration: gen})
			})
		}
		now := metav1.NewTime(f.now())
		if err := f.updateStatus(ctx, s, func(st *snapv1.SnapshotStatus, _ int64) {
			if st.Hooks == nil {
				st.Hooks = &snapv1.HookStamps{}
			}
			st.Hooks.PreCompletedAt = &now
		}); err != nil {
			return false, err
		}
	}
	return true, nil
}

// hooksStarted says whether beforeSnapshot hooks ran or are running.
func hooksStarted(st *snapv1.SnapshotStatus) bool {
	return st.Hooks != nil && (st.Hooks.PreCompletedAt != nil || len(st.Hooks.Results) > 0)
}

// afterHooks runs the afterSnapshot hooks once, as soon as the run's
// VolumeSnapshot is ready or else when the run ends, whether it succeeded
// or failed, provided the run got as far as its hooks (a run refused
// before that has nothing to resume; staged says it did). pol is the
// run's policy when the caller has it, else nil and it is read. It reports
// waiting while a runJob hook is still running.
func (f *Function) afterHooks(ctx context.Context, s *snapv1.Snapshot, pol *snapv1.SnapshotPolicy, staged bool) (bool, error) {
	if s.Status.Hooks != nil && s.Status.Hooks.PostCompletedAt != nil {
		return false, nil
	}
	reached := staged || s.Status.Job != nil || hooksStarted(&s.Status)
	if !reached || s.Spec.PolicyRef == nil {
		return false, nil
	}
	if pol == nil {
		var err error
		if pol, err = f.policyOf(ctx, s); err != nil || pol == nil {
			return false, err
		}
	}
	if pol.Spec.Hooks == nil || len(pol.Spec.Hooks.AfterSnapshot) == 0 {
		return false, nil
	}
	out, err := f.runHooks(ctx, s, pol, ListAfter, pol.Spec.Hooks.AfterSnapshot)
	if err != nil || out.pending != "" {
		return out.pending != "", err
	}
	if out.failed != "" && f.Recorder != nil {
		f.Recorder.Event(s, corev1.EventTypeWarning, reasonHookFailed, "afterSnapshot hook failed: "+out.failed)
	}
	now := metav1.NewTime(f.now())
	return false, f.updateStatus(ctx, s, func(st *snapv1.SnapshotStatus, _ int64) {
		if st.Hooks == nil {
			st.Hooks = &snapv1.HookStamps{}
		}
		st.Hooks.PostCompletedAt = &now
		if pre := st.Hooks.PreCompletedAt; pre != nil && len(pol.Spec.Hooks.BeforeSnapshot) > 0 {
			// Until the last afterSnapshot hook ended; unknown when one failed,
			// as the workload may still be quiesced.
			end, failed := now.Time, false
			for _, r := range st.Hooks.Results {
				if r.List == ListAfter && !r.Running {
					end, failed = r.At.Time, failed || !r.Succeeded
				}
			}
			if !failed {
				st.Hooks.QuiescedFor = &metav1.Duration{Duration: end.Sub(pre.Time)}
			}
		}
	})
}

// groupHooks lets a member of a VolumeGroupSnapshot that is already cut
// skip its hooks: they ran once, in the member that cut the group, before
// the instant every member reads, and running them again would quiesce the
// workload for nothing. Only a cut the group's recorded cutter proves is
// trusted (groupCut); otherwise the member runs its own hooks, the safe
// side. A group this member would refuse is refused before any hook runs,
// so a refused run never quiesces the workload. A member that started its
// hooks finishes them.
func (f *Function) groupHooks(ctx context.Context, s *snapv1.Snapshot, plan *runPlan) (bool, error) {
	hooks := plan.policy.Spec.Hooks
	g := grouped(s, plan)
	if g == nil || hooks == nil || len(hooks.BeforeSnapshot)+len(hooks.AfterSnapshot) == 0 || hooksStarted(&s.Status) ||
		(s.Status.Hooks != nil && s.Status.Hooks.PostCompletedAt != nil) {
		return true, nil
	}
	cutBy, refused, err := f.groupCut(ctx, s, plan, g)
	switch {
	case err != nil:
		return false, err
	case refused != nil:
		return false, f.hold(ctx, s, *refused)
	case cutBy == "" || cutBy == s.Name:
		return true, nil
	}
	now := metav1.NewTime(f.now())
	if err := f.updateStatus(ctx, s, func(st *snapv1.SnapshotStatus, _ int64) {
		if st.Hooks == nil {
			st.Hooks = &snapv1.HookStamps{}
		}
		// No PreCompletedAt: this run quiesced nothing.
		st.Hooks.PostCompletedAt, st.Hooks.GroupMember = &now, cutBy
	}); err != nil {
		return false, err
	}
	if f.Recorder != nil {
		f.Recorder.Eventf(s, corev1.EventTypeNormal, ReasonGroupHooks, "hooks not run: VolumeGroupSnapshot %s is cut, and its hooks ran once for every member, in Snapshot %s", g.VolumeGroupSnapshotName, cutBy)
	}
	return true, nil
}

// quiesced says whether this run's beforeSnapshot hooks may have quiesced
// the workload and its afterSnapshot hooks have not resumed it yet.
func quiesced(st *snapv1.SnapshotStatus) bool {
	return hooksStarted(st) && (st.Hooks == nil || st.Hooks.PostCompletedAt == nil)
}

// thawCloned resumes the workload of a running Clone run once its cloned
// PVC is bound: the clone is provisioned only when the mover pod is
// scheduled (WaitForFirstConsumer), so it is taken after the mover Job is
// made, and from then on the workload need not stay quiesced for the
// upload. It is checked on the run's next event (its mover Job's, a
// progress line, a resync), as PVC events do not reach the function.
func (f *Function) thawCloned(ctx context.Context, s *snapv1.Snapshot) error {
	st := s.Status.Staged
	if st == nil || st.CopyMethod != snapv1.CopyClone || !quiesced(&s.Status) {
		return nil
	}
	// The run's own copy, by the name the run gives it (status, which movers
	// can write, only says there is one), and only while the run owns it.
	var pvc corev1.PersistentVolumeClaim
	if err := f.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: stagedName(s)}, &pvc); err != nil {
		return client.IgnoreNotFound(err) // the run's end resumes it
	}
	if pvc.Status.Phase != corev1.ClaimBound || !host.Owned(&pvc, s) {
		return nil
	}
	_, err := f.afterHooks(ctx, s, nil, true)
	return err
}
