package snapshot

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/jobwatch"
	"github.com/snapflow/snapflow/internal/repository"
	"github.com/snapflow/snapflow/internal/slots"
)

// ReasonSlotClaimed: the run holds a slot before its hooks and staging;
// its mover Job takes the slot over (ReasonSlotAcquired).
const ReasonSlotClaimed = "SlotClaimed"

func (f *Function) caps(r *repository.Object) slots.Caps {
	c := slots.Caps{Pool: poolKey(r), Repository: r.Key(), ClusterCap: f.MaxConcurrentJobs}
	if cc := r.Spec.Concurrency; cc != nil && cc.MaxConcurrentJobs != nil {
		c.PoolCap = int(*cc.MaxConcurrentJobs)
	}
	return c
}

// Starting reports since when the run has been between its slot claim (or
// its first beforeSnapshot hook) and its mover Job: its hooks may have
// frozen the application, so cancelling it then would leave them without
// their after-snapshot half. ok is false for any other run.
func Starting(s *snapv1.Snapshot) (since time.Time, ok bool) {
	if s.Status.Job != nil || s.Status.Phase.IsTerminal() || s.DeletionTimestamp != nil {
		return time.Time{}, false
	}
	if c := meta.FindStatusCondition(s.Status.Conditions, wellknown.ConditionRepositorySlotAvailable); c != nil && c.Status == metav1.ConditionTrue && c.Reason == ReasonSlotClaimed {
		return c.LastTransitionTime.Time, true
	}
	if quiesced(&s.Status) {
		return s.CreationTimestamp.Time, true
	}
	return time.Time{}, false
}

// startingMargin covers the API calls between a run's claim, its hooks,
// its staging and its mover Job.
const startingMargin = 5 * time.Minute

// StartingLimit is the longest run k of pol may rightly stay Starting:
// each beforeSnapshot hook's timeout (and the minute a hook is given to
// report), the staging timeout, and a margin. Staging counts even for a
// Direct policy, since a volume policy may decide to stage. ok is false
// while the run is staging with no timeout ("0"): it waits for ever by the
// policy's own choice; before it stages, its hooks are still bounded.
func StartingLimit(pol *snapv1.SnapshotPolicy, k *snapv1.Snapshot) (limit time.Duration, ok bool) {
	limit = startingMargin
	if h := pol.Spec.Hooks; h != nil {
		for _, hk := range h.BeforeSnapshot {
			limit += hookTimeout(timeoutOf(hk)) + time.Minute
		}
	}
	staging := DefaultStagingTimeout
	if st := pol.Spec.Staging; st != nil && st.Timeout != "" {
		if st.Timeout == "0" {
			return limit, k.Status.Staged == nil
		}
		if d, err := time.ParseDuration(st.Timeout); err == nil {
			staging = d
		}
	}
	return limit + staging, true
}

// claimOf is the run's slot claim, nil when it holds none: a claim lasts
// until the run has a mover Job or ends.
func claimOf(s *snapv1.Snapshot) *slots.Occupant {
	if _, ok := Starting(s); !ok {
		return nil
	}
	// A run can be starting (its hooks began) without a claim of its own.
	c := meta.FindStatusCondition(s.Status.Conditions, wellknown.ConditionRepositorySlotAvailable)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != ReasonSlotClaimed {
		return nil
	}
	r := s.Status.Resolved
	if r == nil || r.Repository == nil {
		return nil
	}
	q := r.Repository.Qualified(s.Namespace)
	return &slots.Occupant{Pool: repository.PoolKey(q.Kind, q.Namespace, q.Name), Claim: true, At: c.LastTransitionTime.Time, ID: string(s.UID)}
}

// occupants lists what holds slots: live mover Jobs, and the claims of
// runs whose Job does not exist yet.
func (f *Function) occupants(ctx context.Context) ([]slots.Occupant, error) {
	var jobs batchv1.JobList
	if err := f.Client.List(ctx, &jobs, client.HasLabels{wellknown.LabelRepoPool}); err != nil {
		return nil, fmt.Errorf("count mover jobs: %w", err)
	}
	var out []slots.Occupant
	running := map[string]bool{}
	for _, j := range jobs.Items {
		if !jobwatch.Live(&j) {
			continue
		}
		out = append(out, slots.Occupant{Pool: j.Labels[wellknown.LabelRepoPool]})
		if s := j.Labels[wellknown.LabelSnapshot]; s != "" {
			running[j.Namespace+"/"+s] = true
		}
	}
	var snaps snapv1.SnapshotList
	if err := f.Client.List(ctx, &snaps); err != nil {
		return nil, fmt.Errorf("count slot claims: %w", err)
	}
	for i := range snaps.Items {
		s := &snaps.Items[i]
		// A run whose Job exists but is not recorded yet counts once.
		if c := claimOf(s); c != nil && !running[s.Namespace+"/"+s.Name] {
			out = append(out, *c)
		}
	}
	return out, nil
}

// claim records the run's slot claim on its status.
func (f *Function) claim(ctx context.Context, s *snapv1.Snapshot, p *runPlan, c slots.Caps) error {
	return f.updateStatus(ctx, s, func(st *snapv1.SnapshotStatus, gen int64) {
		pending(st, s)
		st.Resolved = p.resolved()
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: wellknown.ConditionRepositorySlotAvailable, Status: metav1.ConditionTrue, Reason: ReasonSlotClaimed,
			Message: "a slot of " + c.Repository + " is held for this run's hooks and staging", ObservedGeneration: gen})
		// The identity is pinned before the hooks (inheritIdentity).
		if p.workload != nil && !p.workload.Pinned {
			st.Recorded = p.recorded()
			if ic := p.inheritCondition(gen); ic != nil {
				meta.SetStatusCondition(&st.Conditions, *ic)
			}
		}
	})
}

// takeSlot claims a slot for the run, or says why none is free. The
// caller skips it for a run that already holds a claim of this pool.
func (f *Function) takeSlot(ctx context.Context, s *snapv1.Snapshot, p *runPlan) (bool, string, error) {
	c := f.caps(p.repo)
	if !c.Capped() {
		// Nothing to count; a run about to freeze its workload still says
		// so before the hooks, so Replace waits for it (Starting).
		if h := p.policy.Spec.Hooks; h == nil || len(h.BeforeSnapshot) == 0 {
			return false, "", nil
		}
		return false, "", f.claim(ctx, s, p, c)
	}
	self := string(s.UID)
	occ, err := f.occupants(ctx)
	if err != nil {
		return false, "", err
	}
	if full, msg := slots.Full(c, occ, self, f.now()); full {
		return true, msg, nil
	}
	if err := f.claim(ctx, s, p, c); err != nil {
		return false, "", err
	}
	if claimOf(s) == nil {
		return false, "", fmt.Errorf("the slot claim of snapshot %s/%s was not recorded", s.Namespace, s.Name)
	}
	// Count again, now that the claim is visible: a run that claimed
	// meanwhile makes this one give way (hold withdraws the claim).
	if occ, err = f.occupants(ctx); err != nil {
		return false, "", err
	}
	full, msg := slots.Full(c, occ, self, f.now())
	return full, msg, nil
}
