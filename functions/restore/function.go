// Package restore is the restore function: it drives each Restore from
// Pending through Resolving and Restoring to Completed or Failed, through a
// mover Job that writes the snapshot's files into the target PVC. It reacts
// to ApiServerSource events for Restores, their mover Jobs and Snapshots (a
// restore may wait for its source), to restore requested events, and to a
// periodic resync. The resolution is pinned in status once and never made
// again, so duplicate and reordered events restore the same data.
package restore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	authzv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/events"
	"github.com/snapflow/snapflow/functions/host"
	"github.com/snapflow/snapflow/internal/jobwatch"
	"github.com/snapflow/snapflow/internal/moverjob"
	"github.com/snapflow/snapflow/internal/validate"
)

// Function is the restore function's configuration and ports.
type Function struct {
	Client client.Client
	// Namespace is snapflow's install namespace (a ClusterRepository's home).
	Namespace string
	// MoverImage is the snapflow image mover Jobs run.
	MoverImage string
	// MoverServiceAccount is the ServiceAccount of mover pods.
	MoverServiceAccount string
	Emitter             host.Emitter
	Recorder            record.EventRecorder
	Now                 func() time.Time
	// Access checks a request event's sender may create the Restore.
	Access host.AccessReviewer
	// Logs reads running movers' logs for status.progress (none: no progress).
	Logs jobwatch.LogReader
	// WorkloadExec lets streamExec restores run: the operator's opt-in
	// (--workload-exec-hooks), as they need pods/exec.
	WorkloadExec bool
}

func (f *Function) now() time.Time { return host.Now(f.Now) }

// Handle is the CloudEvents entry point.
func (f *Function) Handle(ctx context.Context, e event.Event) error {
	switch {
	case e.Type() == events.Resync || e.Type() == events.Ping:
		return f.Resync(ctx)
	case e.Type() == events.RestoreRequested:
		return f.handleRequest(ctx, e)
	case events.IsAPIServer(e.Type()):
		ref, _, err := events.DecodeAPIServer(e)
		if err != nil {
			return err
		}
		return f.handleRef(ctx, ref)
	}
	return fmt.Errorf("%w: the restore function handles ApiServerSource, %s, %s and %s events, not %q", events.ErrUnsupported, events.RestoreRequested, events.Resync, events.Ping, e.Type())
}

func (f *Function) handleRef(ctx context.Context, ref events.ObjectRef) error {
	gk := ref.GroupKind()
	switch {
	case gk.Group == snapv1.GroupVersion.Group && gk.Kind == "Restore":
		return f.Reconcile(ctx, ref.Namespace, ref.Name)
	case gk.Group == snapv1.GroupVersion.Group && gk.Kind == "Snapshot":
		// A restore may be waiting for this Snapshot (or any of its policy).
		// Only waiting ones: a Snapshot changes on every status write, and
		// running restores are driven by their Jobs.
		return f.reconcileAll(ctx, ref.Namespace, func(rs *snapv1.Restore) bool {
			return rs.Status.Phase == "" || rs.Status.Phase == snapv1.RestorePending
		})
	case gk.Group == "" && gk.Kind == "PersistentVolumeClaim":
		// A PVC naming a Restore in dataSourceRef asks to be populated.
		var p corev1.PersistentVolumeClaim
		if err := f.Client.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, &p); err != nil {
			return client.IgnoreNotFound(err)
		}
		if ds := p.Spec.DataSourceRef; ds != nil && namesRestore(&p, ds.Name) {
			return f.Reconcile(ctx, p.Namespace, ds.Name)
		}
		if r := p.Labels[wellknown.LabelRestore]; r != "" {
			return f.Reconcile(ctx, p.Namespace, r) // a prime PVC bound
		}
	case gk.Group == "batch" && gk.Kind == "Job":
		var j batchv1.Job
		if err := f.Client.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, &j); err != nil {
			return client.IgnoreNotFound(err)
		}
		if r := j.Labels[wellknown.LabelRestore]; r != "" {
			return f.Reconcile(ctx, j.Namespace, r)
		}
	}
	return nil
}

// Resync reconciles every Restore that is not finished and published.
func (f *Function) Resync(ctx context.Context) error {
	return f.reconcileAll(ctx, "", func(rs *snapv1.Restore) bool { return !rs.Status.Phase.IsTerminal() || !finalized(rs) })
}

// reconcileAll reconciles the Restores of ns ("" for all) that want says
// may have work.
func (f *Function) reconcileAll(ctx context.Context, ns string, want func(*snapv1.Restore) bool) error {
	var list snapv1.RestoreList
	if err := f.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return fmt.Errorf("list restores: %w", err)
	}
	var errs []error
	for i := range list.Items {
		if rs := &list.Items[i]; want(rs) {
			errs = append(errs, f.Reconcile(ctx, rs.Namespace, rs.Name))
		}
	}
	return errors.Join(errs...)
}

// handleRequest creates the Restore a restore requested event describes.
// The same event delivered twice names the same Restore, so it creates one.
func (f *Function) handleRequest(ctx context.Context, e event.Event) error {
	var req events.RestoreRequest
	if err := e.DataAs(&req); err != nil {
		return events.Malformed("restore requested data: %v", err)
	}
	if req.Namespace == "" || len(req.Spec) == 0 {
		return events.Malformed("restore requested data needs namespace and spec")
	}
	name := req.Name
	if name == "" {
		name = moverjob.Name("restore", e.ID())
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return events.Malformed("restore requested name %q: %v", name, errs)
	}
	// The sender restores with its own rights, never the function's.
	who, err := host.Authorize(ctx, f.Access, authzv1.ResourceAttributes{Verb: "create", Group: snapv1.GroupVersion.Group, Resource: "restores", Namespace: req.Namespace, Name: name})
	if err != nil {
		return err
	}
	rs := &snapv1.Restore{ObjectMeta: metav1.ObjectMeta{Namespace: req.Namespace, Name: name,
		Annotations: map[string]string{wellknown.AnnotationRequestEvent: e.ID(), wellknown.AnnotationRequestedBy: who}}}
	dec := json.NewDecoder(bytes.NewReader(req.Spec))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rs.Spec); err != nil {
		return events.Malformed("restore requested spec: %v", err)
	}
	// Overwriting a live volume is for a person at kubectl, not an event.
	if rs.Spec.Target.StreamExec != nil {
		return events.Malformed("restore requested spec.target.streamExec: an event may not pipe data into a workload, as the Restore would run with the restore function's rights; create the Restore with kubectl")
	}
	if src := validate.ForeignRestoreSource(rs); src != nil {
		return events.Malformed("restore requested spec.source: an event may not restore from another namespace (%s), as the function would read there with its own rights; create the Restore with kubectl", src.Namespace)
	}
	if rs.Spec.Target.PVCRef != nil {
		return events.Malformed("restore requested spec.target.pvcRef: an event may not restore over an existing PVC; restore into a new PVC (target.pvc) or create the Restore with kubectl")
	}
	if o := rs.Spec.Options; o != nil && o.EnableFileDeletion != nil && *o.EnableFileDeletion {
		return events.Malformed("restore requested spec.options.enableFileDeletion: an event may not delete files in a target; create the Restore with kubectl")
	}
	if res := validate.Restore(rs, validate.Options{}); !res.OK() {
		return events.Malformed("restore requested spec is invalid: %v", res.Errs)
	}
	err = f.Client.Create(ctx, rs)
	if apierrors.IsAlreadyExists(err) {
		var live snapv1.Restore
		if gerr := f.Client.Get(ctx, client.ObjectKeyFromObject(rs), &live); gerr != nil {
			return gerr
		}
		if live.Annotations[wellknown.AnnotationRequestEvent] != e.ID() {
			return events.Malformed("restore %s/%s already exists and was not created by this event; choose another name", req.Namespace, name)
		}
		err = nil // a redelivery
	}
	if host.Refused(err) {
		return events.Malformed("the API server refused the Restore: %v", err)
	}
	if err != nil {
		return err
	}
	host.Log(ctx).Info("restore requested", "restore", req.Namespace+"/"+name, "event", e.ID(), "requestedBy", who)
	return f.Reconcile(ctx, req.Namespace, name)
}

// emitResult sends the outcome as a CloudEvent with an id stable per Restore.
func (f *Function) emitResult(ctx context.Context, rs *snapv1.Restore) error {
	if f.Emitter == nil {
		return nil
	}
	typ := events.RestoreCompleted
	if rs.Status.Phase == snapv1.RestoreFailed {
		typ = events.RestoreFailed
	}
	data := events.RestoreResult{Namespace: rs.Namespace, Name: rs.Name, UID: string(rs.UID), Phase: string(rs.Status.Phase), Source: rs.Status.SourceKind}
	if r := rs.Status.Resolved; r != nil {
		data.KopiaSnapshotID = r.KopiaSnapshotID
		if r.Repository != nil {
			data.Repository = string(r.Repository.Kind) + "/" + r.Repository.Name
		}
	}
	if t := rs.Status.Target; t != nil {
		data.TargetPVC = t.PVCRef
	}
	// Counts come from the mover's report, which only a completed run has;
	// a failed run's status.progress was read from a log anyone who may
	// exec into the pod could print into.
	if p := rs.Status.Progress; p != nil && rs.Status.Phase == snapv1.RestoreCompleted {
		if p.FilesRestored != nil {
			data.FilesRestored = *p.FilesRestored
		}
		if p.BytesRestored != nil {
			data.BytesRestored = *p.BytesRestored
		}
	}
	if fl := rs.Status.Failure; fl != nil {
		data.FailureClass, data.Message = fl.Class, fl.Message
	}
	e, err := events.New(string(rs.UID)+"/"+string(rs.Status.Phase), typ, rs.Namespace+"/"+rs.Name, data)
	if err != nil {
		return err
	}
	return f.Emitter.Emit(ctx, e)
}
