// Package kube is snapflow's own Kubernetes event source for clusters
// without Knative: it watches snapflow's kinds and mover Jobs and POSTs
// ApiServerSource-shaped CloudEvents (Resource mode) to a sink, plus a
// periodic resync event, because watches and ApiServerSource both miss
// events (a relist emits nothing; a down sink drops them).
package kube

import (
	"context"
	"fmt"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/go-logr/logr"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/events"
	"github.com/snapflow/snapflow/events/sources/sink"
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

// Options configure the source.
type Options struct {
	Config *rest.Config
	Scheme *runtime.Scheme
	// Sinks receive every event (one URL per function, or a broker).
	Sinks []string
	Kinds []schema.GroupVersionKind
	// Resync is how often a dev.snapflow.resync event goes out (0: never).
	Resync time.Duration
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
	q := sinks.Start(qctx, sink.QueueOptions{Coalesce: []string{events.Resync}})
	defer func() { stop(); q.Wait() }()
	send := func(e event.Event) {
		if dropped, _ := q.Post(e); dropped > 0 {
			o.Log.Info("event dropped: a sink's queue is full; the next resync covers it", "type", e.Type(), "id", e.ID(), "sinks", dropped)
		}
	}
	ca, err := cache.New(o.Config, cache.Options{Scheme: o.Scheme})
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
	o.Log.Info("kube source running", "kinds", len(o.Kinds), "sinks", o.Sinks, "resync", o.Resync.String())
	if o.Resync <= 0 {
		<-ctx.Done()
		return nil
	}
	t := time.NewTicker(o.Resync)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-t.C:
			send(NewResync(o.Source, now))
		}
	}
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
