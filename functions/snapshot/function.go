// Package snapshot is the snapshot function: it drives each Snapshot from
// Pending to a terminal phase through a mover Job, and brings Repositories
// and ClusterRepositories to Ready through bootstrap Jobs. It reacts to
// ApiServerSource events for those kinds and for mover Jobs, and to a resync
// event that re-lists everything (events only make it faster). All state is
// in status; every step is idempotent, so duplicate and reordered events are
// harmless.
package snapshot

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/events"
	"github.com/snapflow/snapflow/functions/host"
	"github.com/snapflow/snapflow/internal/egress"
	"github.com/snapflow/snapflow/internal/jobwatch"
	"github.com/snapflow/snapflow/internal/repository"
)

// Function is the snapshot function's configuration and ports.
type Function struct {
	Client client.Client
	// Config reaches pods/exec for workloadExec hooks.
	Config *rest.Config
	// Namespace is snapflow's install namespace (ClusterRepository Jobs run there).
	Namespace string
	// MoverImage is the snapflow image mover Jobs run.
	MoverImage string
	// MoverServiceAccount is the ServiceAccount of mover pods (it may patch status).
	MoverServiceAccount string
	// Access checks a request event's sender may create Snapshots.
	Access host.AccessReviewer
	// Logs reads running movers' logs for status.progress (none: no progress).
	Logs jobwatch.LogReader
	// RequestInterval is the least time between two request events'
	// firings of one policy (DefaultRequestInterval when zero; negative
	// turns the limit off).
	RequestInterval time.Duration
	// MaxConcurrentJobs caps mover Jobs cluster-wide; 0 is unlimited.
	MaxConcurrentJobs int
	// GlobalVolumePoliciesConfigMap names the global baseline in Namespace.
	GlobalVolumePoliciesConfigMap string
	// HookEgress is where httpRequest hooks may not connect (loopback,
	// metadata and link-local always; the operator adds the cluster's
	// ranges). Namespace is filled from the function's when empty.
	HookEgress egress.Policy
	// WorkloadExecHooks lets workloadExec hooks run. It is the operator's
	// opt-in because it needs pods/exec in every namespace, the widest
	// right a function holds; without it such hooks fail, saying so.
	WorkloadExecHooks bool
	// RepositoryRetry is how long a Failed repository waits before its
	// second bootstrap; RepositoryRetryMax caps the backoff after that.
	RepositoryRetry, RepositoryRetryMax time.Duration
	Emitter                             host.Emitter
	Recorder                            record.EventRecorder
	Now                                 func() time.Time

	ranges clusterRanges
}

func (f *Function) clientset() (*kubernetes.Clientset, error) {
	if f.Config == nil {
		return nil, fmt.Errorf("no REST config")
	}
	return kubernetes.NewForConfig(f.Config)
}

func (f *Function) now() time.Time { return host.Now(f.Now) }

// Handle is the CloudEvents entry point.
func (f *Function) Handle(ctx context.Context, e event.Event) error {
	switch {
	case e.Type() == events.Resync || e.Type() == events.Ping:
		return f.Resync(ctx)
	case e.Type() == events.SnapshotRequested:
		return f.handleRequest(ctx, e)
	case events.IsAPIServer(e.Type()):
		ref, _, err := events.DecodeAPIServer(e)
		if err != nil {
			return err
		}
		return f.handleRef(ctx, ref)
	}
	return fmt.Errorf("%w: the snapshot function handles ApiServerSource, %s, %s and %s events, not %q", events.ErrUnsupported, events.SnapshotRequested, events.Resync, events.Ping, e.Type())
}

func (f *Function) handleRef(ctx context.Context, ref events.ObjectRef) error {
	gk := ref.GroupKind()
	switch {
	case gk.Group == snapv1.GroupVersion.Group && gk.Kind == "Snapshot":
		return f.ReconcileSnapshot(ctx, ref.Namespace, ref.Name)
	case gk.Group == snapv1.GroupVersion.Group && (gk.Kind == "Repository" || gk.Kind == "ClusterRepository"):
		return f.ReconcileRepository(ctx, snapv1.RepositoryKind(gk.Kind), ref.Namespace, ref.Name)
	case gk.Group == "batch" && gk.Kind == "Job":
		var j batchv1.Job
		if err := f.Client.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, &j); err != nil {
			return client.IgnoreNotFound(err)
		}
		if s := j.Labels[wellknown.LabelSnapshot]; s != "" {
			return f.ReconcileSnapshot(ctx, j.Namespace, s)
		}
		if r := j.Labels[wellknown.LabelRepository]; r != "" {
			kind, ns := snapv1.KindRepository, j.Namespace
			if op := j.Labels[wellknown.LabelOp]; op == opClusterBootstrap || op == opClusterProbe {
				kind, ns = snapv1.KindClusterRepository, ""
			}
			return f.ReconcileRepository(ctx, kind, ns, r)
		}
		return nil
	}
	// Other kinds (e.g. PVCs from a broad source) are not ours: acknowledge.
	return nil
}

// Resync reconciles every repository and every unfinished Snapshot.
func (f *Function) Resync(ctx context.Context) error {
	var errs []error
	var repos snapv1.RepositoryList
	if err := f.Client.List(ctx, &repos); err != nil {
		return fmt.Errorf("list repositories: %w", err)
	}
	// The lists are read fresh, so what they show settled needs nothing;
	// a change after them brings its own event, or the next pass.
	for i := range repos.Items {
		if r := &repos.Items[i]; !f.settled(repository.FromRepository(r)) {
			errs = append(errs, f.ReconcileRepository(ctx, snapv1.KindRepository, r.Namespace, r.Name))
		}
	}
	var crepos snapv1.ClusterRepositoryList
	if err := f.Client.List(ctx, &crepos); err != nil {
		return fmt.Errorf("list cluster repositories: %w", err)
	}
	for i := range crepos.Items {
		if r := &crepos.Items[i]; !f.settled(repository.FromCluster(r, f.Namespace)) {
			errs = append(errs, f.ReconcileRepository(ctx, snapv1.KindClusterRepository, "", r.Name))
		}
	}
	var snaps snapv1.SnapshotList
	if err := f.Client.List(ctx, &snaps); err != nil {
		return fmt.Errorf("list snapshots: %w", err)
	}
	for _, s := range snaps.Items {
		if s.Status.Phase.IsTerminal() && finalized(&s) && pinInSync(&s) {
			continue
		}
		if notOurs(&s) {
			continue
		}
		errs = append(errs, f.ReconcileSnapshot(ctx, s.Namespace, s.Name))
	}
	return errors.Join(errs...)
}
