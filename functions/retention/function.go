// Package retention is the retention function: after each successful backup
// (the snapshot succeeded event) and on every resync, it applies the
// policy's GFS retention (internal/retention) to the policy's Snapshots and
// prunes the rest by stamping pruned-by: retention and deleting the CR; the
// cleanup function then removes the kopia data. Unchanged rows (deduplicated
// runs) are bounded per policy. It writes the policy's retention status.
package retention

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/events"
	"github.com/snapflow/snapflow/functions/host"
	"github.com/snapflow/snapflow/functions/snapshot"
	"github.com/snapflow/snapflow/internal/repository"
	kernel "github.com/snapflow/snapflow/internal/retention"
	"github.com/snapflow/snapflow/internal/statuspatch"
	"github.com/snapflow/snapflow/internal/validate"
)

// UnchangedHistory bounds the Unchanged rows kept per policy.
const UnchangedHistory = 10

// Subscribes lists the emitted event types this function consumes.
var Subscribes = []string{events.SnapshotSucceeded, events.SnapshotUnchanged}

// Function is the retention function.
type Function struct {
	Client   client.Client
	Emitter  host.Emitter
	Recorder record.EventRecorder
	Now      func() time.Time
}

func (f *Function) now() time.Time { return host.Now(f.Now) }

// Handle is the CloudEvents entry point.
func (f *Function) Handle(ctx context.Context, e event.Event) error {
	switch {
	case e.Type() == events.SnapshotSucceeded || e.Type() == events.SnapshotUnchanged:
		var d events.SnapshotResult
		if err := json.Unmarshal(e.Data(), &d); err != nil || d.Namespace == "" {
			return events.Malformed("%s event %s: data needs namespace and policy (%v)", e.Type(), e.ID(), err)
		}
		if d.Policy == "" {
			return nil
		}
		return f.Reconcile(ctx, d.Namespace, d.Policy)
	case e.Type() == events.Resync || e.Type() == events.Ping:
		var pols snapv1.SnapshotPolicyList
		if err := f.Client.List(ctx, &pols); err != nil {
			return err
		}
		var errs []error
		for _, p := range pols.Items {
			errs = append(errs, f.Reconcile(ctx, p.Namespace, p.Name))
		}
		return errors.Join(errs...)
	case events.IsAPIServer(e.Type()):
		ref, _, err := events.DecodeAPIServer(e)
		if err != nil {
			return err
		}
		if ref.GroupKind().Group == snapv1.GroupVersion.Group && ref.Kind == "SnapshotPolicy" {
			return f.Reconcile(ctx, ref.Namespace, ref.Name)
		}
		return nil
	}
	return fmt.Errorf("%w: the retention function handles snapshot succeeded/unchanged, ApiServerSource, %s and %s events, not %q", events.ErrUnsupported, events.Resync, events.Ping, e.Type())
}

// Reconcile applies one policy's retention.
func (f *Function) Reconcile(ctx context.Context, ns, name string) error {
	var p snapv1.SnapshotPolicy
	if err := f.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &p); err != nil {
		return client.IgnoreNotFound(err)
	}
	if p.DeletionTimestamp != nil {
		return nil // the policy cascade decides now
	}
	missing, paused, err := repository.PolicyRepositories(ctx, f.Client, &p)
	if err != nil {
		return err
	}
	found := repositoriesCondition(&p, missing)
	if p.Spec.Suspend || (len(paused) > 0 && !kernel.MultiRepo(&p)) {
		// A suspended recipe is skipped entirely: nothing is pruned; only
		// the printer column and the repositories condition keep up. So
		// is one whose only repository is suspended; a policy writing to
		// several keeps a window per repository, and only the suspended
		// ones' are left alone (below).
		if p.Status.RepositorySummary == RepositorySummary(&p) && foundIs(p.Status.Conditions, found) {
			return nil
		}
		return statuspatch.Update(ctx, f.Client, client.ObjectKeyFromObject(&p), func() *snapv1.SnapshotPolicy { return &snapv1.SnapshotPolicy{} },
			func(live *snapv1.SnapshotPolicy) error {
				live.Status.RepositorySummary = RepositorySummary(live)
				setFound(&live.Status.Conditions, found)
				return nil
			})
	}
	var list snapv1.SnapshotList
	if err := f.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{wellknown.LabelConfig: name}); err != nil {
		return err
	}
	var prune []string
	active := 0
	var lastSuccess *metav1.Time
	var budget *kernel.BudgetResult
	if p.Spec.Retention != nil {
		cands := make([]kernel.Candidate, 0, len(list.Items))
		for i := range list.Items {
			c := kernel.FromSnapshot(&list.Items[i], kernel.MultiRepo(&p))
			if r := list.Items[i].Spec.Repository; r != nil && c.Excluded == "" && slices.Contains(paused, validate.RepoKey(*r, ns)) {
				c.Excluded = "its repository is suspended"
			}
			cands = append(cands, c)
		}
		verdicts := kernel.Select(*p.Spec.Retention, cands)
		for _, v := range verdicts {
			if v.Excluded == "" && v.Keep {
				active++
			}
		}
		// GFS says what may go; the budget says how much of it may go now.
		b, t, err := f.budget(ctx, &p, verdicts)
		if err != nil {
			return err
		}
		budget, prune = &b, b.Prune
		f.announceBudget(&p, b, t)
		// The budget is written before anything goes, and only over the
		// status this pass read: a concurrent pass (or one cut short after
		// pruning) cannot open a fresh window and spend the budget twice.
		// A conflict fails the delivery, which is redelivered and redone.
		if err := f.recordBudgetLocked(ctx, &p, b, t); err != nil {
			return fmt.Errorf("record the retention budget of %s/%s before pruning: %w", ns, name, err)
		}
	}
	prune = append(prune, unchangedOverflow(list.Items)...)
	for i := range list.Items {
		s := &list.Items[i]
		if s.Status.Phase == snapv1.SnapshotSucceeded && s.Status.Timing != nil && s.Status.Timing.EndTime != nil &&
			(lastSuccess == nil || s.Status.Timing.EndTime.After(lastSuccess.Time)) {
			lastSuccess = s.Status.Timing.EndTime
		}
	}
	deleted, err := f.prune(ctx, ns, prune)
	if err != nil {
		return err
	}
	if len(deleted) > 0 {
		if f.Recorder != nil {
			f.Recorder.Eventf(&p, corev1.EventTypeNormal, "RetentionPruned", "pruned %d Snapshot(s): %v", len(deleted), deleted)
		}
		if err := f.emit(ctx, &p, deleted); err != nil {
			return err
		}
	}
	return f.updatePolicyStatus(ctx, &p, active, len(deleted), lastSuccess, budget, found)
}

// conditionIs says whether conds already hold c (its status, reason and
// message).
func conditionIs(conds []metav1.Condition, c metav1.Condition) bool {
	have := meta.FindStatusCondition(conds, c.Type)
	return have != nil && have.Status == c.Status && have.Reason == c.Reason && have.Message == c.Message && have.ObservedGeneration == c.ObservedGeneration
}

// announceBudget records the budget's transitions as Kubernetes Events: a
// new hold, and an acknowledgement that released one.
func (f *Function) announceBudget(p *snapv1.SnapshotPolicy, b kernel.BudgetResult, threshold int) {
	if f.Recorder == nil {
		return
	}
	wasHeld := p.Status.Retention != nil && p.Status.Retention.Breaker != nil && p.Status.Retention.Breaker.HeldSince != nil
	switch {
	case b.Acknowledged:
		f.Recorder.Eventf(p, corev1.EventTypeNormal, "RetentionReleased", "the allow-mass-deletion acknowledgement releases %d held Snapshot(s)", len(b.Prune))
	case len(b.Held) > 0 && !wasHeld:
		f.Recorder.Event(p, corev1.EventTypeWarning, ReasonBudgetExceeded, heldMessage(p, b, threshold))
	}
}

// unchangedOverflow lists the Unchanged rows beyond the newest UnchangedHistory.
func unchangedOverflow(items []snapv1.Snapshot) []string {
	var rows []*snapv1.Snapshot
	for i := range items {
		if items[i].Status.Phase == snapv1.SnapshotUnchanged && items[i].DeletionTimestamp == nil {
			rows = append(rows, &items[i])
		}
	}
	sort.Slice(rows, func(a, b int) bool { return endOf(rows[a]).After(endOf(rows[b])) })
	var out []string
	for i := UnchangedHistory; i < len(rows); i++ {
		out = append(out, rows[i].Name)
	}
	return out
}

func endOf(s *snapv1.Snapshot) time.Time {
	if s.Status.Timing != nil && s.Status.Timing.EndTime != nil {
		return s.Status.Timing.EndTime.Time
	}
	return s.CreationTimestamp.Time
}

// prune stamps and deletes each name, re-reading it first: what the list
// said is confirmed live before anything is destroyed.
func (f *Function) prune(ctx context.Context, ns string, names []string) ([]string, error) {
	var deleted []string
	for _, n := range names {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var s snapv1.Snapshot
			if err := f.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: n}, &s); err != nil {
				return err
			}
			if s.DeletionTimestamp != nil || s.Spec.Pin || (s.Status.Phase != snapv1.SnapshotSucceeded && s.Status.Phase != snapv1.SnapshotUnchanged) {
				return nil // changed since the list: leave it
			}
			if err := snapshot.Prune(ctx, f.Client, &s, wellknown.PrunedByRetention); err != nil {
				return err
			}
			deleted = append(deleted, n)
			return nil
		})
		if err != nil && !apierrors.IsNotFound(err) {
			return deleted, fmt.Errorf("prune %s/%s: %w", ns, n, err)
		}
	}
	return deleted, nil
}

func (f *Function) updatePolicyStatus(ctx context.Context, p *snapv1.SnapshotPolicy, active, deleted int, lastSuccess *metav1.Time, budget *kernel.BudgetResult, found metav1.Condition) error {
	return statuspatch.Update(ctx, f.Client, client.ObjectKeyFromObject(p), func() *snapv1.SnapshotPolicy { return &snapv1.SnapshotPolicy{} },
		func(live *snapv1.SnapshotPolicy) error {
			if live.Status.Retention == nil {
				live.Status.Retention = &snapv1.RetentionStatus{}
			}
			a := int32(active)
			live.Status.Retention.ActiveSnapshotCount = &a
			if deleted > 0 {
				now := metav1.NewTime(f.now())
				d := int32(deleted)
				live.Status.Retention.LastPruneAt, live.Status.Retention.LastPruneDeleted = &now, &d
			}
			if lastSuccess != nil {
				live.Status.LastSuccessfulSnapshot = lastSuccess
			}
			live.Status.RepositorySummary = RepositorySummary(live)
			setFound(&live.Status.Conditions, found)
			if budget == nil {
				// Retention is off: nothing is held, but the window and its
				// peak stay, so turning it back on opens no fresh budget.
				if br := live.Status.Retention.Breaker; br != nil {
					br.Held, br.HeldSince = nil, nil
				}
				meta.RemoveStatusCondition(&live.Status.Conditions, wellknown.ConditionMassDeletionHeld)
			}
			return nil
		})
}

// RepositorySummary is the Repositories printer column of p: the names of
// the repositories it writes to, a ClusterRepository's with its kind.
func RepositorySummary(p *snapv1.SnapshotPolicy) string {
	var names []string
	for _, ref := range validate.PolicyRefs(p) {
		if ref.Kind == snapv1.KindClusterRepository {
			names = append(names, "ClusterRepository/"+ref.Name)
		} else {
			names = append(names, ref.Name)
		}
	}
	return strings.Join(names, ", ")
}

// PrunedData is the data of the retention pruned event.
type PrunedData struct {
	Namespace string   `json:"namespace"`
	Policy    string   `json:"policy"`
	Pruned    []string `json:"pruned"`
}

func (f *Function) emit(ctx context.Context, p *snapv1.SnapshotPolicy, names []string) error {
	if f.Emitter == nil {
		return nil
	}
	e, err := events.New(fmt.Sprintf("%s/%s", p.UID, names[0]), events.RetentionPruned, p.Namespace+"/"+p.Name,
		PrunedData{Namespace: p.Namespace, Policy: p.Name, Pruned: names})
	if err != nil {
		return err
	}
	return f.Emitter.Emit(ctx, e)
}
