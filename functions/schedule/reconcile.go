package schedule

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/events"
	"github.com/snapflow/snapflow/functions/host"
	"github.com/snapflow/snapflow/functions/snapshot"
	"github.com/snapflow/snapflow/internal/conditions"
	"github.com/snapflow/snapflow/internal/fanout"
	"github.com/snapflow/snapflow/internal/kubemeta"
	"github.com/snapflow/snapflow/internal/moverjob"
	"github.com/snapflow/snapflow/internal/repository"
	kernel "github.com/snapflow/snapflow/internal/schedule"
	"github.com/snapflow/snapflow/internal/slots"
)

// Condition types and reasons of a schedule.
const (
	condScheduled      = "Scheduled"
	reasonSkipExpired  = "SkipExpiredSlot"
	reasonSkipForbid   = "SkippedConcurrentRun"
	reasonFired        = "Fired"
	reasonFiringFailed = "FiringFailed"
	reasonNoPolicy     = "PolicyNotFound"
	reasonInvalid      = "InvalidSchedule"
	reasonScheduled    = "Scheduled"
	reasonSuspended    = "Suspended"
	// reasonPolicySuspended: a slot passed without a run for a policy
	// whose spec.suspend is true.
	reasonPolicySuspended = "PolicySuspended"
	reasonReplaced        = "ReplacedRun"
	reasonNotInherited    = "Ambiguous"
)

// Reconcile fires whatever is due for one schedule and records the rest.
func (f *Function) Reconcile(ctx context.Context, ns, name string) error {
	var s snapv1.SnapshotSchedule
	if err := f.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &s); err != nil {
		return client.IgnoreNotFound(err)
	}
	if s.DeletionTimestamp != nil {
		return nil
	}
	invalid := func(err error) error {
		return f.writeStatus(ctx, &s, func(st *snapv1.SnapshotScheduleStatus, gen int64) {
			setCond(&st.Conditions, wellknown.ConditionReady, false, reasonInvalid, err.Error(), gen)
		})
	}
	r, err := f.resolve(ctx, &s)
	if err != nil {
		return invalid(err)
	}
	// A cron that parses but never fires (February 31st) is invalid too:
	// found here, before anything below could call the schedule Ready.
	if _, err := f.nextFrom(&s, r); err != nil {
		return invalid(err)
	}
	if err := f.observe(ctx, &s, r); err != nil {
		return err
	}
	now := f.now()
	// Fire at most a bounded number of due slots per call (a long outage
	// does not mint a backlog: each expired slot is skipped or fired once).
	for i := 0; i < 3; i++ {
		fired, err := f.step(ctx, &s, r, now)
		if err != nil || !fired {
			if err != nil {
				return err
			}
			break
		}
		gen := s.Generation
		if err := f.Client.Get(ctx, client.ObjectKeyFromObject(&s), &s); err != nil {
			return client.IgnoreNotFound(err)
		}
		if s.Generation != gen {
			// Edited meanwhile: the next slot is decided on the new spec.
			if r, err = f.resolve(ctx, &s); err != nil {
				return invalid(err)
			}
		}
	}
	return f.history(ctx, &s, r)
}

// observe keeps the schedule's kstatus current between firings: Ready
// from the start (kubectl wait, GitOps health), not only once it has
// fired; Ready again once an invalid spec or a missing policy is fixed;
// Ready=False while no policy matches; and status.observedGeneration
// following every edit. A firing's own outcome (FiringFailed, Fired) stands
// until the next firing decides, so no two writers alternate.
func (f *Function) observe(ctx context.Context, s *snapv1.SnapshotSchedule, r *resolved) error {
	c := meta.FindStatusCondition(s.Status.Conditions, wellknown.ConditionReady)
	reason, msg, ready := reasonScheduled, "the schedule is valid and waits for its next slot", true
	if len(r.policies) == 0 {
		reason, msg, ready = reasonNoPolicy, "no SnapshotPolicy matches spec.policyRef or spec.policySelector in "+s.Namespace+": slots are held until one does", false
	}
	settled := c != nil && c.Reason != reasonInvalid && c.Reason != reasonNoPolicy
	switch {
	case c != nil && c.Reason == reason && c.ObservedGeneration == s.Generation && s.Status.ObservedGeneration == s.Generation:
		return nil
	case settled && ready && c.ObservedGeneration == s.Generation && s.Status.ObservedGeneration == s.Generation:
		return nil // a firing's outcome stands
	}
	return f.writeStatus(ctx, s, func(st *snapv1.SnapshotScheduleStatus, gen int64) {
		st.ObservedGeneration = gen
		if have := meta.FindStatusCondition(st.Conditions, wellknown.ConditionReady); have != nil && settled && ready {
			// Only the generation moves; the firing's outcome stays.
			conditions.Observed(&st.Conditions, have.Status == metav1.ConditionTrue, false, have.Reason, have.Message, gen)
			return
		}
		setCond(&st.Conditions, wellknown.ConditionReady, ready, reason, msg, gen)
	})
}

// step handles the pinned next slot: pin it if missing or stale, and fire
// (or skip) it when due. It reports whether the caller should look again:
// a slot was consumed, or the spec changed under the decision.
func (f *Function) step(ctx context.Context, s *snapv1.SnapshotSchedule, r *resolved, now time.Time) (bool, error) {
	next := s.Status.NextSchedule
	stale := next == nil || next.At == nil || next.Timezone != r.tz || next.Jitter != r.jitter
	if stale {
		at, err := f.nextFrom(s, r)
		if err != nil {
			return false, f.writeStatus(ctx, s, func(st *snapv1.SnapshotScheduleStatus, gen int64) {
				setCond(&st.Conditions, wellknown.ConditionReady, false, reasonInvalid, err.Error(), gen)
			})
		}
		next = &snapv1.ScheduleRef{At: &metav1.Time{Time: at}, Timezone: r.tz, Jitter: r.jitter}
		if err := f.writeStatus(ctx, s, func(st *snapv1.SnapshotScheduleStatus, gen int64) {
			st.ObservedGeneration = gen
			st.NextSchedule = next
			f.notes(st, r, gen)
		}); err != nil {
			return false, err
		}
	}
	if s.Spec.Schedule.Suspend {
		return false, f.writeStatus(ctx, s, func(st *snapv1.SnapshotScheduleStatus, gen int64) {
			setCond(&st.Conditions, condScheduled, false, reasonSuspended, "spec.schedule.suspend is true: no slot fires", gen)
		})
	}
	if now.Before(next.At.Time) {
		return false, nil
	}
	slot := f.slotOf(s, r, next.At.Time)
	after, err := kernel.Next(r.spec, slot, 1)
	if err != nil {
		return false, err
	}
	pinned := func(st *snapv1.SnapshotScheduleStatus) bool {
		return st.NextSchedule != nil && st.NextSchedule.At != nil && st.NextSchedule.At.Equal(next.At)
	}
	// advance spends the pinned slot. A decision that only records (a skip,
	// a give-up) needs the spec it was made on to be live; a firing already
	// happened and is recorded whatever the spec says now.
	advance := func(decided bool, mutate func(*snapv1.SnapshotScheduleStatus, int64)) (bool, error) {
		applied := false
		err := f.writeStatus(ctx, s, func(st *snapv1.SnapshotScheduleStatus, gen int64) {
			applied = false
			// Only the writer that still sees this slot pinned advances it,
			// and only if it decided on the spec that is still live: a skip
			// decided under Forbid must not spend a slot the user has just
			// switched to Replace. The next event decides again, and a
			// firing repeated there mints the same names.
			if (decided && gen != s.Generation) || !pinned(st) {
				return
			}
			applied = true
			st.NextSchedule = &snapv1.ScheduleRef{At: &metav1.Time{Time: after[0].At}, Timezone: r.tz, Jitter: r.jitter}
			if mutate != nil {
				mutate(st, gen)
			}
		})
		return applied, err
	}
	if d := s.Spec.Schedule.StartingDeadlineSeconds; d != nil && now.Sub(next.At.Time) > time.Duration(*d)*time.Second {
		msg := fmt.Sprintf("the slot due at %s was missed by %s, more than startingDeadlineSeconds (%ds); skipped", next.At.UTC().Format(time.RFC3339), now.Sub(next.At.Time).Round(time.Second), *d)
		failing := false
		if c := meta.FindStatusCondition(s.Status.Conditions, condScheduled); c != nil && c.Reason == reasonFiringFailed {
			msg += "; its firing kept failing: " + c.Message
			failing = true
		}
		ok, err := advance(true, func(st *snapv1.SnapshotScheduleStatus, gen int64) {
			setCond(&st.Conditions, condScheduled, true, reasonSkipExpired, msg, gen)
			if failing {
				// Not ready until a slot fires again; the message is the
				// outcome, no longer a promise of retries.
				setCond(&st.Conditions, wellknown.ConditionReady, false, reasonFiringFailed, msg, gen)
			}
		})
		if ok {
			f.event(s, true, reasonSkipExpired, "%s", msg)
		}
		return true, err
	}
	// A firing refused for a reason the user can fix (a missing policy or
	// global ConfigMap, a namespace label, a selector) keeps its slot and is
	// tried again on each tick until the slot's deadline, so the fix still
	// fires it; only then is the slot spent.
	giveUp := retryUntil(next.At.Time, after[0].At, s.Spec.Schedule.StartingDeadlineSeconds)
	hold := func(reason, msg string) error {
		msg = fmt.Sprintf("%s; retried on each tick until %s", msg, giveUp.UTC().Format(time.RFC3339))
		return f.writeStatus(ctx, s, func(st *snapv1.SnapshotScheduleStatus, gen int64) {
			if gen != s.Generation || !pinned(st) {
				return
			}
			setCond(&st.Conditions, condScheduled, false, reasonFiringFailed, msg, gen)
			setCond(&st.Conditions, wellknown.ConditionReady, false, reason, msg, gen)
		})
	}
	if len(r.policies) == 0 {
		msg := fmt.Sprintf("slot %s: no SnapshotPolicy matches spec.policyRef or spec.policySelector in %s", slot.UTC().Format(time.RFC3339), s.Namespace)
		if now.Before(giveUp) {
			return false, hold(reasonNoPolicy, msg)
		}
		_, err := advance(true, func(st *snapv1.SnapshotScheduleStatus, gen int64) {
			setCond(&st.Conditions, condScheduled, false, reasonFiringFailed, msg, gen)
			setCond(&st.Conditions, wellknown.ConditionReady, false, reasonNoPolicy, msg, gen)
		})
		return true, err
	}
	// Concurrency with unfinished runs of this schedule.
	kids, err := f.children(ctx, s)
	if err != nil {
		return false, err
	}
	var active []snapv1.Snapshot
	for _, k := range kids {
		// This slot's own Snapshots (a retried firing) are not another run.
		// A cancelled run stays active until its afterSnapshot hooks ran,
		// so the next run's freeze never comes before its thaw.
		_, cancelling := k.Annotations[wellknown.AnnotationCancelRequested]
		unfinished := !k.Status.Phase.IsTerminal() || (cancelling && !snapshot.Finished(&k))
		if unfinished && k.DeletionTimestamp == nil && !containsSlot(k.Name, slot) {
			active = append(active, k)
		}
	}
	// Replacing deletes a run and firing creates them: both are decided on
	// the spec that is live now, not the one this call read first (a Job's
	// deletion cannot be made conditional on the schedule's generation, so
	// one round trip of a window remains).
	if edited, err := f.editedSince(ctx, s); err != nil || edited {
		return edited, err
	}
	switch s.Spec.Schedule.ConcurrencyPolicy {
	case snapv1.ConcurrencyAllow:
	case snapv1.ConcurrencyReplace:
		if reason, held, err := f.replace(ctx, s, active, next.At.Time); err != nil || held != "" {
			if err != nil {
				return false, err
			}
			return false, f.writeStatus(ctx, s, func(st *snapv1.SnapshotScheduleStatus, gen int64) {
				if gen != s.Generation || !pinned(st) {
					return
				}
				setCond(&st.Conditions, wellknown.ConditionReplacementHeld, true, reason, held, gen)
			})
		}
	default: // Forbid
		if len(active) > 0 {
			msg := fmt.Sprintf("the slot due at %s was skipped: %d run(s) of this schedule are unfinished (%s) and concurrencyPolicy is Forbid", next.At.UTC().Format(time.RFC3339), len(active), active[0].Name)
			ok, err := advance(true, func(st *snapv1.SnapshotScheduleStatus, gen int64) {
				setCond(&st.Conditions, condScheduled, true, reasonSkipForbid, msg, gen)
			})
			if ok {
				f.event(s, false, reasonSkipForbid, "%s", msg)
			}
			return true, err
		}
	}
	var minted, failed, suspended []string
	for i := range r.policies {
		p := &r.policies[i]
		if p.Spec.Suspend {
			// A suspended recipe is skipped, not queued: its slots pass.
			suspended = append(suspended, p.Name)
			continue
		}
		// So is one whose every repository is suspended; with some of
		// them suspended, only those repositories' runs are left out.
		paused, all, err := repository.SuspendedRepositories(ctx, f.Client, p)
		if err != nil {
			return false, err
		}
		if all {
			suspended = append(suspended, fmt.Sprintf("%s (every repository suspended: %s)", p.Name, strings.Join(paused, ", ")))
			continue
		}
		base := fanout.Base(s.Name, slot)
		if s.Spec.PolicySelector != nil {
			base = fanout.Base(s.Name+"-"+p.Name, slot)
		}
		onDelete := snapv1.CascadeRetain
		if s.Spec.Deletion != nil && s.Spec.Deletion.OnScheduleDelete != "" {
			onDelete = s.Spec.Deletion.OnScheduleDelete
		}
		names, err := snapshot.Mint(ctx, f.Client, p, base, snapshot.Minted{
			Origin: snapv1.OriginScheduled, OnScheduleDelete: onDelete,
			Labels: map[string]string{wellknown.LabelSchedule: s.Name, wellknown.LabelScheduleUID: string(s.UID)},
			Skip:   paused,
		})
		if err != nil && transientMint(err) {
			// The slot stays pinned and the redelivered event (or the next
			// tick) fires it again; minting is idempotent by name.
			return false, fmt.Errorf("fire slot %s for policy %s: %w", slot.UTC().Format(time.RFC3339), p.Name, err)
		}
		// A firing that left contested PVCs out still minted the others.
		minted = append(minted, names...)
		if err != nil {
			f.event(s, true, reasonFiringFailed, "policy %s: %v", p.Name, err)
			failed = append(failed, fmt.Sprintf("policy %s: %v", p.Name, err))
			continue
		}
	}
	if len(suspended) > 0 {
		f.event(s, false, reasonPolicySuspended, "slot %s: skipped for suspended SnapshotPolicy %s", slot.UTC().Format(time.RFC3339), strings.Join(suspended, ", "))
	}
	msg := fmt.Sprintf("slot %s created %d Snapshot(s)", slot.UTC().Format(time.RFC3339), len(minted))
	if len(failed) > 0 && now.Before(giveUp) {
		host.Log(ctx).Info("firing failed; the slot is held", "schedule", s.Namespace+"/"+s.Name, "slot", slot, "snapshots", minted, "until", giveUp)
		return false, hold(reasonFiringFailed, firingFailures(msg, failed))
	}
	host.Log(ctx).Info("fired", "schedule", s.Namespace+"/"+s.Name, "slot", slot, "snapshots", minted, "suspendedPolicies", suspended)
	if len(minted) > 0 {
		f.event(s, false, reasonFired, "slot %s: created %s", slot.UTC().Format(time.RFC3339), strings.Join(minted, ", "))
	}
	_, err = advance(false, func(st *snapv1.SnapshotScheduleStatus, gen int64) {
		ref := &snapv1.ScheduleRef{At: &metav1.Time{Time: slot}, Timezone: r.tz, Jitter: r.jitter}
		if len(minted) > 0 {
			ref.SnapshotRef = &snapv1.LocalObjectRef{Name: minted[0]}
		}
		st.LastSchedule = ref
		meta.RemoveStatusCondition(&st.Conditions, wellknown.ConditionReplacementHeld)
		if len(failed) > 0 {
			// Given up at the deadline: the conditions keep why until a
			// later slot fires.
			why := firingFailures(msg+"; the slot was given up at its deadline", failed)
			setCond(&st.Conditions, condScheduled, false, reasonFiringFailed, why, gen)
			setCond(&st.Conditions, wellknown.ConditionReady, false, reasonFiringFailed, why, gen)
			return
		}
		setCond(&st.Conditions, condScheduled, true, reasonFired, msg, gen)
		setCond(&st.Conditions, wellknown.ConditionReady, true, reasonFired, "the schedule fires on time", gen)
	})
	return true, err
}

// editedSince says whether s's spec changed since it was read; the caller's
// loop then reads it again and decides on the new spec.
func (f *Function) editedSince(ctx context.Context, s *snapv1.SnapshotSchedule) (bool, error) {
	var live snapv1.SnapshotSchedule
	if err := f.Client.Get(ctx, client.ObjectKeyFromObject(s), &live); err != nil {
		return false, err
	}
	return live.UID == s.UID && live.Generation != s.Generation, nil
}

// retryUntil is when a slot whose firing keeps failing is given up: at its
// starting deadline, and at the latest when the following slot is due, so
// one slot's retries never delay or merge with the next.
func retryUntil(due, following time.Time, deadlineSeconds *int64) time.Time {
	if deadlineSeconds != nil {
		if d := due.Add(time.Duration(*deadlineSeconds) * time.Second); d.Before(following) {
			return d
		}
	}
	return following
}

// transientMint says a firing failed for a reason that passes on its own
// (an API server or webhook hiccup): the event is redelivered. Refusals
// that last until someone acts (admission denial, a fan-out over the cap,
// no PVC selected) are held on the schedule's conditions instead and
// tried again on each tick until retryUntil.
func transientMint(err error) bool {
	return !snapshot.MintRefused(err) && !apierrors.IsNotFound(err)
}

// firingFailures joins why policies created nothing, bounded so that a
// selector over many failing policies cannot outgrow a condition message.
func firingFailures(msg string, failed []string) string {
	const maxShown, maxLen = 5, 4000
	shown := failed
	if len(shown) > maxShown {
		shown = shown[:maxShown]
	}
	out := msg + "; " + strings.Join(shown, "; ")
	if len(failed) > maxShown {
		out += fmt.Sprintf("; and %d more (see the schedule's Events)", len(failed)-maxShown)
	}
	if len(out) > maxLen {
		out = out[:maxLen] + "…"
	}
	return out
}

func containsSlot(name string, slot time.Time) bool {
	return strings.Contains(name, "-"+slot.UTC().Format(fanout.SlotFormat))
}

// nextFrom is the first firing after the schedule's last slot (or its
// creation); with runOnCreate and no slot yet, the creation instant itself.
func (f *Function) nextFrom(s *snapv1.SnapshotSchedule, r *resolved) (time.Time, error) {
	if s.Spec.Schedule.RunOnCreate && s.Status.LastSchedule == nil {
		return s.CreationTimestamp.Time, nil
	}
	from := s.CreationTimestamp.Time
	if l := s.Status.LastSchedule; l != nil && l.At != nil {
		from = l.At.Time
	}
	fs, err := kernel.Next(r.spec, from, 1)
	if err != nil {
		return time.Time{}, err
	}
	return fs[0].At, nil
}

// slotOf recovers the cron slot whose jittered firing is at.
func (f *Function) slotOf(s *snapv1.SnapshotSchedule, r *resolved, at time.Time) time.Time {
	if s.Spec.Schedule.RunOnCreate && s.Status.LastSchedule == nil && at.Equal(s.CreationTimestamp.Time) {
		return at.Truncate(time.Second)
	}
	fs, err := kernel.Next(r.spec, at.Add(-r.spec.Jitter-time.Minute), 3)
	if err == nil {
		for _, fi := range fs {
			if fi.At.Equal(at) {
				return fi.Slot
			}
		}
	}
	return at
}

// notes records whether the timezone or jitter could not be inherited,
// each on its own condition.
func (f *Function) notes(st *snapv1.SnapshotScheduleStatus, r *resolved, gen int64) {
	for typ, note := range map[string]string{wellknown.ConditionTimezoneDefaultAmbiguous: r.notes.Timezone, wellknown.ConditionJitterDefaultAmbiguous: r.notes.Jitter} {
		if note != "" {
			setCond(&st.Conditions, typ, true, reasonNotInherited, note, gen)
		} else {
			meta.RemoveStatusCondition(&st.Conditions, typ)
		}
	}
}

// startingLimit is StartingLimit for run k's policy, read fresh; a run
// whose policy is gone gets the slot claim's lease.
func (f *Function) startingLimit(ctx context.Context, k *snapv1.Snapshot) (time.Duration, bool, error) {
	if k.Spec.PolicyRef == nil {
		return slots.ClaimLease, true, nil
	}
	ns := k.Namespace
	if k.Spec.PolicyRef.Namespace != "" {
		ns = k.Spec.PolicyRef.Namespace
	}
	var pol snapv1.SnapshotPolicy
	if err := f.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: k.Spec.PolicyRef.Name}, &pol); apierrors.IsNotFound(err) {
		return slots.ClaimLease, true, nil
	} else if err != nil {
		return 0, false, fmt.Errorf("read the policy of run %s: %w", k.Name, err)
	}
	limit, bounded := snapshot.StartingLimit(&pol, k)
	return limit, bounded, nil
}

// replace cancels the unfinished runs before a new slot fires. A run
// only queued for a slot, or one still in its beforeSnapshot hooks (no
// mover Job yet), is waited for. Any other is asked to stop
// (AnnotationCancelRequested): the snapshot function deletes its mover Job
// and ends it Failed, which runs its afterSnapshot hooks, so a workload
// quiesced for it is resumed; the slot waits until it has ended, and
// history then removes it stamped pruned-by: replaced-run. A finished run
// is never touched.
func (f *Function) replace(ctx context.Context, s *snapv1.SnapshotSchedule, active []snapv1.Snapshot, slot time.Time) (reason, held string, err error) {
	for i := range active {
		k := &active[i]
		if c := meta.FindStatusCondition(k.Status.Conditions, wellknown.ConditionRepositorySlotAvailable); c != nil && c.Status == metav1.ConditionFalse {
			return "OldRunQueued", fmt.Sprintf("the previous run %s is queued for a repository slot; the new slot fires once it started or finished", k.Name), nil
		}
		since, starting := snapshot.Starting(k)
		if !starting {
			continue
		}
		limit, bounded, err := f.startingLimit(ctx, k)
		if err != nil {
			return "", "", err
		}
		if bounded && f.now().Sub(since) > limit {
			// Stuck past its hook and staging timeouts: it is cancelled below.
			continue
		}
		// Its Job may exist before status records it; only a run with
		// neither is still in its before-snapshot hooks.
		err = f.Client.Get(ctx, client.ObjectKey{Namespace: k.Namespace, Name: moverjob.Name(k.Name, string(k.UID))}, &batchv1.Job{})
		if apierrors.IsNotFound(err) {
			until := "it has staged its volume (its policy's staging timeout is 0: no limit)"
			if bounded {
				until = "after " + limit.String() + " (its hook and staging timeouts)"
			}
			return "OldRunStarting", fmt.Sprintf("the previous run %s is starting (its hooks may have quiesced the application); the new slot fires once its mover runs or it finished, or %s", k.Name, until), nil
		}
		if err != nil {
			return "", "", fmt.Errorf("read the mover Job of run %s: %w", k.Name, err)
		}
	}
	var names []string
	for i := range active {
		k := &active[i]
		names = append(names, k.Name)
		if _, asked := k.Annotations[wellknown.AnnotationCancelRequested]; asked {
			continue
		}
		why := wellknown.CancelReplaced + slot.UTC().Format(time.RFC3339) + " (concurrencyPolicy Replace)"
		patch, err := kubemeta.AnnotationsPatch(map[string]string{wellknown.AnnotationCancelRequested: why})
		if err != nil {
			return "", "", err
		}
		if err := f.Client.Patch(ctx, k, patch); client.IgnoreNotFound(err) != nil {
			return "", "", fmt.Errorf("ask run %s to stop: %w", k.Name, err)
		}
		f.event(s, false, reasonReplaced, "cancelling the unfinished run %s for the slot due at %s", k.Name, slot.UTC().Format(time.RFC3339))
	}
	if len(names) == 0 {
		return "", "", nil
	}
	return "OldRunCancelling", fmt.Sprintf("the previous run(s) %s are being cancelled (mover stopped, afterSnapshot hooks run); the new slot fires once they ended", strings.Join(names, ", ")), nil
}

// replaced prunes the runs Replace cancelled once they have ended and
// their afterSnapshot hooks ran.
func (f *Function) replaced(ctx context.Context, kids []snapv1.Snapshot) error {
	for i := range kids {
		k := &kids[i]
		// Only a run that ended as cancelled (written by the snapshot
		// function, not by whoever may annotate Snapshots): one whose
		// mover finished first keeps its backup.
		if k.DeletionTimestamp != nil || !strings.HasPrefix(k.Annotations[wellknown.AnnotationCancelRequested], wellknown.CancelReplaced) || !snapshot.Finished(k) || !snapshot.Cancelled(k) {
			continue
		}
		if err := snapshot.Prune(ctx, f.Client, k, wellknown.PrunedByReplacedRun); err != nil {
			return err
		}
	}
	return nil
}

// history updates lastSuccessfulSchedule and consecutiveFailures and prunes
// Failed runs beyond failedJobsHistoryLimit, newest kept, per repository.
func (f *Function) history(ctx context.Context, s *snapv1.SnapshotSchedule, r *resolved) error {
	kids, err := f.children(ctx, s)
	if err != nil {
		return err
	}
	if err := f.replaced(ctx, kids); err != nil {
		return err
	}
	sort.Slice(kids, func(i, j int) bool { return endOf(&kids[i]).After(endOf(&kids[j])) })
	var lastOK *snapv1.Snapshot
	failures := int32(0)
	counting := true
	for i := range kids {
		k := &kids[i]
		switch k.Status.Phase {
		case snapv1.SnapshotSucceeded, snapv1.SnapshotUnchanged:
			if lastOK == nil {
				lastOK = k
			}
			counting = false
		case snapv1.SnapshotFailed:
			// A run stopped on purpose (Replace, or a person) is no failure.
			if counting && !snapshot.Cancelled(k) {
				failures++
			}
		}
	}
	limit := DefaultFailedHistory
	if l := s.Spec.FailedJobsHistoryLimit; l != nil {
		limit = int(*l)
	}
	perRepo := map[string]int{}
	for i := range kids {
		k := &kids[i]
		if k.Status.Phase != snapv1.SnapshotFailed || k.DeletionTimestamp != nil {
			continue
		}
		key := ""
		if k.Spec.Repository != nil {
			key = string(k.Spec.Repository.Kind) + "/" + k.Spec.Repository.Namespace + "/" + k.Spec.Repository.Name
		}
		perRepo[key]++
		if perRepo[key] <= limit {
			continue
		}
		if err := snapshot.Prune(ctx, f.Client, k, wellknown.PrunedByFailedHistory); err != nil {
			return err
		}
	}
	if err := f.writeStatus(ctx, s, func(st *snapv1.SnapshotScheduleStatus, _ int64) {
		st.ConsecutiveFailures = failures
		if lastOK != nil {
			at := metav1.NewTime(endOf(lastOK))
			st.LastSuccessfulSchedule = &snapv1.ScheduleRef{At: &at, SnapshotRef: &snapv1.LocalObjectRef{Name: lastOK.Name}}
		}
	}); err != nil {
		return err
	}
	var last *time.Time
	if lastOK != nil {
		t := endOf(lastOK)
		last = &t
	} else if l := s.Status.LastSuccessfulSchedule; l != nil && l.At != nil {
		last = &l.At.Time
	}
	return f.staleness(ctx, s, r, last)
}

// staleness keeps the BackupStale condition and announces a schedule
// going stale: StaleAfter slots since its last success (or its creation)
// without one, while it and a policy it fires are not suspended. The
// condition is written only when it changes, and the CloudEvent and the
// Kubernetes Event go out once per stale spell.
func (f *Function) staleness(ctx context.Context, s *snapv1.SnapshotSchedule, r *resolved, last *time.Time) error {
	since := s.CreationTimestamp.Time
	if last != nil {
		since = *last
	}
	var active []string
	for _, p := range r.policies {
		if !p.Spec.Suspend {
			active = append(active, p.Name)
		}
	}
	stale, due, err := kernel.Stale(r.spec, since, f.now())
	if err != nil {
		return nil // an invalid cron is reported on Ready
	}
	stale = stale && !s.Spec.Schedule.Suspend && len(active) > 0
	have := meta.FindStatusCondition(s.Status.Conditions, wellknown.ConditionBackupStale)
	was := have != nil && have.Status == metav1.ConditionTrue
	if stale == was && (have != nil || !stale) {
		return nil // unchanged; a fresh schedule never stale needs no condition
	}
	what := "its creation at " + since.UTC().Format(time.RFC3339)
	if last != nil {
		what = "its last successful backup at " + since.UTC().Format(time.RFC3339)
	}
	reason, msg := "RecentSuccess", fmt.Sprintf("fewer than %d slots have passed since %s", kernel.StaleAfter, what)
	if stale {
		reason = "NoRecentSuccess"
		msg = fmt.Sprintf("no backup of SnapshotPolicy %s has succeeded since %s: %d slots have passed, the last at %s; see the runs' Ready conditions (kubectl get snapshots -l %s=%s)",
			strings.Join(active, ", "), what, kernel.StaleAfter, due.UTC().Format(time.RFC3339), wellknown.LabelSchedule, s.Name)
	}
	if err := f.writeStatus(ctx, s, func(st *snapv1.SnapshotScheduleStatus, gen int64) {
		setCond(&st.Conditions, wellknown.ConditionBackupStale, stale, reason, msg, gen)
	}); err != nil || !stale {
		return err
	}
	f.event(s, true, "BackupStale", "%s", msg)
	if f.Emitter == nil {
		return nil
	}
	data := events.BackupStaleData{Namespace: s.Namespace, Schedule: s.Name, UID: string(s.UID), Policies: active,
		Since: since.UTC().Format(time.RFC3339), StaleSince: due.UTC().Format(time.RFC3339), Message: msg}
	if last != nil {
		data.LastSuccess = data.Since
	}
	// The id names the success (or creation) the spell started from: a
	// retry is the same event, the next spell a new one.
	e, err := events.New(fmt.Sprintf("%s/stale/%d", s.UID, since.Unix()), events.BackupStale, s.Namespace+"/"+s.Name, data)
	if err == nil {
		err = f.Emitter.Emit(ctx, e)
	}
	if err != nil {
		// The condition and the Kubernetes Event still say it.
		host.Log(ctx).Error(err, "could not send the backup stale event", "schedule", s.Namespace+"/"+s.Name)
	}
	return nil
}

func endOf(s *snapv1.Snapshot) time.Time {
	if s.Status.Timing != nil && s.Status.Timing.EndTime != nil {
		return s.Status.Timing.EndTime.Time
	}
	return s.CreationTimestamp.Time
}
