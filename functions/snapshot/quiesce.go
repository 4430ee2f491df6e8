package snapshot

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/functions/runtime"
)

// The workload is quiesced by the beforeSnapshot hooks and resumed by the
// afterSnapshot hooks: for a VolumeGroupSnapshot once, by the member that
// cuts it; as soon as the copy the run reads exists (copyMethod Snapshot:
// its VolumeSnapshot is ready; Clone: its cloned PVC is bound), else when
// the run ends (Direct reads the live volume).

// beforeHooks runs the beforeSnapshot hooks once and reports whether the
// run may go on to staging (false while a hook runs, or once it failed).
func (f *Function) beforeHooks(ctx context.Context, s *snapv1.Snapshot, plan *runPlan) (bool, error) {
	if err := f.groupHooks(ctx, s, plan); err != nil {
		return false, err
	}
	if hooks := plan.policy.Spec.Hooks; hooks != nil && len(hooks.BeforeSnapshot) > 0 && (s.Status.Hooks == nil || s.Status.Hooks.PreCompletedAt == nil) {
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
// before that has nothing to resume; staged says it did). It reports
// waiting while a runJob hook is still running.
func (f *Function) afterHooks(ctx context.Context, s *snapv1.Snapshot, staged bool) (bool, error) {
	if s.Status.Hooks != nil && s.Status.Hooks.PostCompletedAt != nil {
		return false, nil
	}
	reached := staged || s.Status.Job != nil || hooksStarted(&s.Status)
	if !reached || s.Spec.PolicyRef == nil {
		return false, nil
	}
	pol, err := f.policyOf(ctx, s)
	if err != nil || pol == nil || pol.Spec.Hooks == nil || len(pol.Spec.Hooks.AfterSnapshot) == 0 {
		return false, err
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
			st.Hooks.QuiescedFor = &metav1.Duration{Duration: now.Sub(pre.Time)}
		}
	})
}

// groupHooks lets a member of a VolumeGroupSnapshot that is already cut
// skip its hooks: they ran once, in the member that cut the group, before
// the instant every member reads. Running them again would quiesce the
// workload for nothing. A member that started its hooks finishes them.
func (f *Function) groupHooks(ctx context.Context, s *snapv1.Snapshot, plan *runPlan) error {
	hooks := plan.policy.Spec.Hooks
	g := grouped(s, plan)
	if g == nil || hooks == nil || len(hooks.BeforeSnapshot)+len(hooks.AfterSnapshot) == 0 || hooksStarted(&s.Status) ||
		(s.Status.Hooks != nil && s.Status.Hooks.PostCompletedAt != nil) {
		return nil
	}
	cutBy, cut, err := f.groupCut(ctx, s, plan, g)
	if err != nil || !cut || cutBy == s.Name {
		return err
	}
	now := metav1.NewTime(f.now())
	if err := f.updateStatus(ctx, s, func(st *snapv1.SnapshotStatus, _ int64) {
		if st.Hooks == nil {
			st.Hooks = &snapv1.HookStamps{}
		}
		st.Hooks.PreCompletedAt, st.Hooks.PostCompletedAt, st.Hooks.GroupMember = &now, &now, cutBy
	}); err != nil {
		return err
	}
	by := "the member that cut it"
	if cutBy != "" {
		by = "Snapshot " + cutBy
	}
	if f.Recorder != nil {
		f.Recorder.Eventf(s, corev1.EventTypeNormal, ReasonGroupHooks, "hooks not run: VolumeGroupSnapshot %s is cut, and its hooks ran once for every member, in %s", g.VolumeGroupSnapshotName, by)
	}
	return nil
}

// thawCloned resumes the workload of a running Clone run once its cloned
// PVC is bound: the clone is provisioned only when the mover pod is
// scheduled (WaitForFirstConsumer), so it is taken after the mover Job is
// made, and from then on the workload need not stay quiesced for the
// upload.
func (f *Function) thawCloned(ctx context.Context, s *snapv1.Snapshot) error {
	st := s.Status.Staged
	if st == nil || st.CopyMethod != snapv1.CopyClone || st.PVCName == "" || (s.Status.Hooks != nil && s.Status.Hooks.PostCompletedAt != nil) {
		return nil
	}
	var pvc corev1.PersistentVolumeClaim
	if err := f.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: st.PVCName}, &pvc); err != nil {
		return client.IgnoreNotFound(err) // the run's end resumes it
	}
	if pvc.Status.Phase != corev1.ClaimBound || !runtime.Owned(&pvc, s) {
		return nil
	}
	_, err := f.afterHooks(ctx, s, true)
	return err
}
