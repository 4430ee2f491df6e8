// Package kube is snapflow's own Kubernetes event source for clusters
// without Knative: it watches snapflow's kinds and mover Jobs and POSTs
// ApiServerSource-shaped CloudEvents (Resource mode) to a sink, plus a
// periodic resync event, because watches and ApiServerSource both miss
// events (a relist emits nothing; a down sink drops them).
package kube

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/go-logr/logr"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/events"
	"github.com/snapflow/snapflow/events/sources/sink"
	"github.com/snapflow/snapflow/internal/mover"
)

// DefaultKinds are what the functions react to.
var DefaultKinds = []schema.GroupVersionKind{
	snapv1.GroupVersion.WithKind("Snapshot"),
	snapv1.GroupVersion.WithKind("Repository"),
	snapv1.GroupVersion.WithKind("ClusterRepository"),
	snapv1.GroupVersion.WithKind("SnapshotPolicy"),
	snapv1.GroupVersion.WithKind("SnapshotSchedule"),
	snapv1.GroupVersion.WithKind("Restore"),
	snapv1.GroupVersion.WithKind("Maintenance"),
	batchv1.SchemeGroupVersion.WithKind("Job"),
	// PVCs naming a Restore in dataSourceRef start a populator restore.
	corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaim"),
}

// DefaultProgress is how often running mover Jobs are sent again.
const DefaultProgress = 10 * time.Second

// Options configure the source.
type Options struct {
	Config *rest.Config
	Scheme *runtime.Scheme
	// Sinks receive every event (one URL per function, or a broker).
	Sinks []string
	Kinds []schema.GroupVersionKind
	// Resync is how often a dev.snapflow.resync event goes out (0: never).
	Resync time.Duration
	// Progress is how often each running snapflow Job is sent again, so
	// the functions refresh the progress of its run (0: never). A running
	// Job changes nothing a watch would see.
	Progress time.Duration
	// OnlyProgress sends nothing but the progress refreshes: no watch
	// events, no resync. It runs beside a Knative ApiServerSource, which
	// sends the rest but has no periodic resend of an unchanged Job.
	OnlyProgress bool
	// Source is the events' source attribute (the API server URL).
	Source string
	Log    logr.Logger
	// TokenFile holds the bearer token sent with every event (see sink.New).
	TokenFile string
}

// Run watches until ctx ends.
func Run(ctx context.Context, o Options) error {
	if len(o.Kinds) == 0 {
		o.Kinds = DefaultKinds
	}
	if o.OnlyProgress {
		if o.Progress <= 0 {
			return fmt.Errorf("only progress refreshes were asked for, with none scheduled: set --progress to a positive interval")
		}
		o.Kinds, o.Resync = []schema.GroupVersionKind{batchv1.SchemeGroupVersion.WithKind("Job")}, 0
	}
	if o.Source == "" {
		o.Source = o.Config.Host
	}
	sinks, err := sink.New(o.Sinks, o.Log, o.TokenFile)
	if err != nil {
		return err
	}
	// Each sink has its own lane: a function slow on one event must not hold
	// back the events of the others, and resyncs waiting in a lane coalesce.
	qctx, stop := context.WithCancel(ctx)
	q := sinks.Start(qctx, sink.QueueOptions{Coalesce: []string{events.Resync}, CoalesceKey: progressKey})
	defer func() { stop(); q.Wait() }()
	send := func(e event.Event) {
		if dropped, _ := q.Post(e); dropped > 0 {
			o.Log.Info("event dropped: a sink's queue is full; the next resync covers it", "type", e.Type(), "id", e.ID(), "sinks", dropped)
		}
	}
	// Only snapflow's own Jobs are watched (the functions react to no
	// other), so other tenants' Jobs and their pod templates stay out of
	// memory; managed fields are never read.
	ca, err := cache.New(o.Config, cache.Options{Scheme: o.Scheme, DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{&batchv1.Job{}: {Label: labels.SelectorFromSet(labels.Set{"app.kubernetes.io/managed-by": "snapflow"})}}})
	if err != nil {
		return fmt.Errorf("watch cache: %w", err)
	}
	for _, gvk := range o.Kinds {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		inf, err := ca.GetInformer(ctx, u)
		if err != nil {
			return fmt.Errorf("watch %s: %w", gvk.Kind, err)
		}
		if o.OnlyProgress {
			continue // the Job informer only feeds the progress listing
		}
		emit := func(typ string, obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			u, ok := obj.(*unstructured.Unstructured)
			if !ok {
				return
			}
			if gvk.Kind == "Job" && !isSnapflowJob(u) {
				return
			}
			e, err := events.NewAPIServerEvent(typ, o.Source, u)
			if err != nil {
				o.Log.Error(err, "build event")
				return
			}
			send(e)
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { emit(events.APIServerAdd, obj) },
			UpdateFunc: func(_, obj any) { emit(events.APIServerUpdate, obj) },
			DeleteFunc: func(obj any) { emit(events.APIServerDelete, obj) },
		}); err != nil {
			return err
		}
	}
	go func() { _ = ca.Start(ctx) }()
	if !ca.WaitForCacheSync(ctx) {
		return fmt.Errorf("watch cache did not sync")
	}
	if !slices.Contains(o.Kinds, batchv1.SchemeGroupVersion.WithKind("Job")) {
		o.Progress = 0 // listing Jobs would start a watch of its own
	}
	o.Log.Info("kube source running", "kinds", len(o.Kinds), "sinks", o.Sinks, "resync", o.Resync.String(), "progress", o.Progress.String(), "onlyProgress", o.OnlyProgress)
	resync, stopResync := ticker(o.Resync)
	defer stopResync()
	progress, stopProgress := ticker(o.Progress)
	defer stopProgress()
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-resync:
			send(NewResync(o.Source, now))
		case now := <-progress:
			for _, e := range runningJobs(ctx, ca, o.Source, now, o.Log) {
				send(e)
			}
		}
	}
}

// ticker ticks every d; a nil channel (never) when d is not positive.
func ticker(d time.Duration) (<-chan time.Time, func()) {
	if d <= 0 {
		return nil, func() {}
	}
	t := time.NewTicker(d)
	return t.C, t.Stop
}

// runningJobs are update events for every snapflow Job with a pod still
// active.
func runningJobs(ctx context.Context, ca cache.Cache, source string, at time.Time, log logr.Logger) []event.Event {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(batchv1.SchemeGroupVersion.WithKind("JobList"))
	if err := ca.List(ctx, list); err != nil {
		log.Error(err, "list Jobs for progress")
		return nil
	}
	out, err := progressEvents(list.Items, source, at)
	if err != nil {
		log.Error(err, "build event")
	}
	return out
}

// progressID marks the id of an event sent for a running Job's progress.
const progressID = "/progress-"

// progressEvents are update events for the running backup and restore
// mover Jobs among jobs (the runs that show progress), each with an id of
// its own tick so none is taken for a redelivery.
func progressEvents(jobs []unstructured.Unstructured, source string, at time.Time) ([]event.Event, error) {
	var out []event.Event
	var errs []error
	for i := range jobs {
		u := &jobs[i]
		op := u.GetLabels()[wellknown.LabelOp]
		if active, _, _ := unstructured.NestedInt64(u.Object, "status", "active"); !isSnapflowJob(u) || active == 0 || (op != mover.OpSnapshot && op != mover.OpRestore) {
			continue
		}
		e, err := events.NewAPIServerEvent(events.APIServerUpdate, source, u)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		e.SetID(e.ID() + progressID + at.UTC().Truncate(time.Second).Format(time.RFC3339))
		out = append(out, e)
	}
	return out, errors.Join(errs...)
}

// progressKey coalesces progress events per Job: one waiting in a sink's
// queue is enough, so a slow function never has them crowd out real events.
func progressKey(e event.Event) string {
	if strings.Contains(e.ID(), progressID) {
		return "progress " + e.Subject()
	}
	return ""
}

// NewResync is the periodic resync event; its id is the tick's time, so two
// sources ticking together produce recognisably the same event.
func NewResync(source string, at time.Time) event.Event {
	e := cloudevents.NewEvent()
	e.SetType(events.Resync)
	e.SetSource(source)
	e.SetID("resync-" + at.UTC().Truncate(time.Second).Format(time.RFC3339))
	e.SetTime(at)
	return e
}

func isSnapflowJob(u *unstructured.Unstructured) bool {
	return u.GetLabels()["app.kubernetes.io/managed-by"] == "snapflow"
}

// isRefused says whether the sink refused the event for good (4xx).
