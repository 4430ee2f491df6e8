// Package schedule is the schedule function: on each tick (PingSource or
// resync) and on SnapshotSchedule events it fires every due slot, minting
// one firing of each matched policy with deterministic names (a duplicate
// tick mints nothing), honours suspend, runOnCreate, startingDeadlineSeconds
// and concurrencyPolicy, pins the next slot in status, and keeps the
// failed history bounded. State lives in status only, so any replica and
// any restart computes the same thing. On ticks it also judges every PVC's
// coverage and tells the unprotected ones (coverage.go), remembering what
// it told in one ConfigMap of its own namespace.
package schedule

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/events"
	"github.com/snapflow/snapflow/functions/host"
	"github.com/snapflow/snapflow/internal/conditions"
	kernel "github.com/snapflow/snapflow/internal/schedule"
	"github.com/snapflow/snapflow/internal/statuspatch"
	"github.com/snapflow/snapflow/internal/validate"
)

// DefaultFailedHistory is failedJobsHistoryLimit's default.
const DefaultFailedHistory = 10

// Function is the schedule function.
type Function struct {
	Client client.Client
	// Reader serves a tick's list of schedules, which only picks the ones
	// whose pinned slot has come: each is then reconciled on live reads,
	// and one an informer has not caught up with is reconciled by its own
	// event or the next tick. A deployment gives it an informer cache, so
	// a tick over thousands of quiet schedules asks the API server
	// nothing; nil lists from the API server's watch cache. Everything a
	// firing decides on (the schedule, its policies, their repositories,
	// its runs) is read live.
	Reader   client.Reader
	Recorder record.EventRecorder
	// Now is the clock; tests inject one.
	Now func() time.Time
	// Workers bounds how many schedules a tick reconciles at once
	// (DefaultWorkers when 0).
	Workers int
	// Emitter sends dev.snapflow.backup.stale when a schedule goes stale,
	// and dev.snapflow.coverage.unprotected.
	Emitter host.Emitter
	// Namespace is the functions' own, where CoverageRecord is kept; empty
	// turns coverage passes off.
	Namespace string
	// GlobalVolumePolicies names the global volume-policy ConfigMap as
	// NAMESPACE/NAME, whose skip rules exclude the PVCs no policy covers.
	GlobalVolumePolicies string
	// CoverageEvery is how often a tick or resync judges every PVC
	// (DefaultCoverageEvery when 0; negative: never), CoverageGrace how long
	// a PVC is Unprotected before it is told (DefaultCoverageGrace when 0).
	CoverageEvery, CoverageGrace time.Duration
}

func (f *Function) now() time.Time { return host.Now(f.Now) }

// Informed are the kinds Reader serves: give a deployment's Reader an
// informer of each (host.InformerReader).
func Informed() []client.Object {
	return []client.Object{&snapv1.SnapshotSchedule{}}
}

// Handle is the CloudEvents entry point.
func (f *Function) Handle(ctx context.Context, e event.Event) error {
	switch {
	case e.Type() == events.Ping || e.Type() == events.Resync:
		var list snapv1.SnapshotScheduleList
		var reader client.Reader = f.Client
		var opts []client.ListOption
		if e.Type() == events.Ping {
			// A tick may read a cache: every schedule it acts on is re-read
			// by Reconcile, and one created a moment ago and missing here
			// is picked up by its own event or the next tick. The list is
			// only read, so the informer's objects need no copy. Without an
			// informer, the API server's watch cache. The resync reads from
			// etcd.
			if f.Reader != nil {
				reader = f.Reader
				opts = append(opts, client.UnsafeDisableDeepCopy)
			} else {
				opts = append(opts, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: "0"}})
			}
		}
		if err := reader.List(ctx, &list, opts...); err != nil {
			return err
		}
		now := f.now()
		var due []client.ObjectKey
		for i := range list.Items {
			s := &list.Items[i]
			// A tick comes every minute for every schedule; most are not
			// due. The resync still reconciles everything, so a pin made
			// stale by a repository's scheduleDefaults is caught there.
			if e.Type() == events.Ping && quiet(s, now) {
				continue
			}
			due = append(due, client.ObjectKeyFromObject(s))
		}
		err := f.reconcileAll(ctx, due)
		// After the schedules, and whatever they did: a coverage pass only
		// logs its failures, so it never makes the tick retry.
		f.coveragePass(ctx)
		return err
	case events.IsAPIServer(e.Type()):
		ref, obj, err := events.DecodeAPIServer(e)
		if err != nil {
			return err
		}
		switch {
		case ref.GroupKind().Group == snapv1.GroupVersion.Group && ref.Kind == "SnapshotSchedule":
			return f.Reconcile(ctx, ref.Namespace, ref.Name)
		case ref.GroupKind().Group == snapv1.GroupVersion.Group && ref.Kind == "Snapshot" && obj != nil:
			if s := obj.GetLabels()[wellknown.LabelSchedule]; s != "" {
				return f.Reconcile(ctx, ref.Namespace, s)
			}
		}
		return nil
	}
	return fmt.Errorf("%w: the schedule function handles %s, %s and ApiServerSource events, not %q", events.ErrUnsupported, events.Ping, events.Resync, e.Type())
}

// DefaultWorkers is how many schedules a tick reconciles at once.
const DefaultWorkers = 8

// reconcileAll reconciles each schedule, a bounded number at a time: each
// waits on the API server for most of its time, so a tick with many due
// slots takes a fraction of the sequential time. Schedules are
// independent (each mints under its own deterministic names), and the
// client's rate limits still bound what reaches the API server.
func (f *Function) reconcileAll(ctx context.Context, keys []client.ObjectKey) error {
	workers := f.Workers
	if workers <= 0 {
		workers = DefaultWorkers
	}
	errs := make([]error, len(keys))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(workers, len(keys)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				errs[i] = f.reconcileSafely(ctx, keys[i])
			}
		}()
	}
	for i := range keys {
		next <- i
	}
	close(next)
	wg.Wait()
	return errors.Join(errs...)
}

// reconcileSafely turns a panic in one schedule's reconcile into its
// error, as the HTTP server does for a whole event, so one schedule cannot
// take the tick (and the process) down with it.
func (f *Function) reconcileSafely(ctx context.Context, key client.ObjectKey) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("reconcile schedule %s panicked: %v", key, r)
		}
	}()
	return f.Reconcile(ctx, key.Namespace, key.Name)
}

// quiet says a tick has nothing to do for s: its pinned next slot is still
// ahead. Spec changes arrive as SnapshotSchedule events and on resync.
func quiet(s *snapv1.SnapshotSchedule, now time.Time) bool {
	next := s.Status.NextSchedule
	return s.DeletionTimestamp == nil && next != nil && next.At != nil && now.Before(next.At.Time)
}

// resolved is a schedule with its policies and inherited settings.
type resolved struct {
	policies []snapv1.SnapshotPolicy
	spec     kernel.Spec
	tz       string
	jitter   string
	notes    kernel.Notes
}

func (f *Function) resolve(ctx context.Context, s *snapv1.SnapshotSchedule) (*resolved, error) {
	r := &resolved{}
	if s.Spec.PolicyRef != nil {
		var p snapv1.SnapshotPolicy
		if err := f.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: s.Spec.PolicyRef.Name}, &p); err != nil {
			if !apierrors.IsNotFound(err) {
				return nil, err
			}
		} else {
			r.policies = []snapv1.SnapshotPolicy{p}
		}
	} else if s.Spec.PolicySelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(s.Spec.PolicySelector)
		if err != nil {
			return nil, err
		}
		var list snapv1.SnapshotPolicyList
		if err := f.Client.List(ctx, &list, client.InNamespace(s.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
			return nil, err
		}
		r.policies = list.Items
		sort.Slice(r.policies, func(i, j int) bool { return r.policies[i].Name < r.policies[j].Name })
	}
	var defaults []kernel.Defaults
	for _, p := range r.policies {
		for _, ref := range validate.PolicyRefs(&p) {
			var sd *snapv1.ScheduleDefaults
			if ref.Kind == snapv1.KindClusterRepository {
				var cr snapv1.ClusterRepository
				if f.Client.Get(ctx, client.ObjectKey{Name: ref.Name}, &cr) == nil {
					sd = cr.Spec.ScheduleDefaults
				}
			} else {
				ns := ref.Namespace
				if ns == "" {
					ns = p.Namespace
				}
				var repo snapv1.Repository
				if f.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, &repo) == nil {
					sd = repo.Spec.ScheduleDefaults
				}
			}
			d := kernel.Defaults{}
			if sd != nil {
				d = kernel.Defaults{Timezone: sd.Timezone, Jitter: sd.Jitter}
			}
			defaults = append(defaults, d)
		}
	}
	res, err := kernel.Resolve(s.Spec.Schedule.Cron, s.Spec.Schedule.Timezone, s.Spec.Schedule.Jitter, defaults, s.Namespace+"/"+s.Name, string(s.UID))
	if err != nil {
		return nil, err
	}
	r.spec, r.tz, r.jitter, r.notes = res.Spec, res.Timezone, res.Jitter, res.Notes
	return r, nil
}

// children lists the Snapshots this schedule minted (this UID only).
func (f *Function) children(ctx context.Context, s *snapv1.SnapshotSchedule) ([]snapv1.Snapshot, error) {
	var list snapv1.SnapshotList
	if err := f.Client.List(ctx, &list, client.InNamespace(s.Namespace), client.MatchingLabels{wellknown.LabelSchedule: s.Name, wellknown.LabelScheduleUID: string(s.UID)}); err != nil {
		return nil, err
	}
	return list.Items, nil
}

func setCond(conds *[]metav1.Condition, typ string, status bool, reason, msg string, gen int64) {
	if typ == wellknown.ConditionReady {
		// kstatus: an invalid spec stalls the schedule until someone edits
		// it; a missing policy or a failed firing is retried.
		conditions.Observed(conds, status, reason == reasonInvalid, reason, msg, gen)
		return
	}
	st := metav1.ConditionFalse
	if status {
		st = metav1.ConditionTrue
	}
	meta.SetStatusCondition(conds, metav1.Condition{Type: typ, Status: st, Reason: reason, Message: msg, ObservedGeneration: gen})
}

// writeStatus patches the schedule's status from mutate.
func (f *Function) writeStatus(ctx context.Context, s *snapv1.SnapshotSchedule, mutate func(*snapv1.SnapshotScheduleStatus, int64)) error {
	return statuspatch.Update(ctx, f.Client, client.ObjectKeyFromObject(s), func() *snapv1.SnapshotSchedule { return &snapv1.SnapshotSchedule{} },
		func(live *snapv1.SnapshotSchedule) error {
			if live.UID != s.UID {
				return statuspatch.Skip
			}
			mutate(&live.Status, live.Generation)
			return nil
		})
}

func (f *Function) event(obj client.Object, warning bool, reason, format string, args ...any) {
	if f.Recorder == nil {
		return
	}
	typ := corev1.EventTypeNormal
	if warning {
		typ = corev1.EventTypeWarning
	}
	f.Recorder.Eventf(obj, typ, reason, format, args...)
}
