// Package cleanup is the cleanup function: it owns the Snapshot finalizer.
// For each deleted Snapshot it decides (internal/cleanup) whether the
// kopia data stays or goes, holds external deletions behind the
// mass-deletion breaker, and deletes kopia snapshots in batches: one mover
// Job per repository at a time, holding a Lease, removing every member in
// one kopia session. It also owns the SnapshotPolicy cascade.
package cleanup

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/events"
	"github.com/snapflow/snapflow/functions/host"
)

// Defaults of the batching.
const (
	DefaultWindow   = 10 * time.Second
	DefaultMaxBatch = 200
)

// Function is the cleanup function.
type Function struct {
	Client client.Client
	// Namespace is snapflow's install namespace (ClusterRepository batches run there).
	Namespace           string
	MoverImage          string
	MoverServiceAccount string
	// Window is the quiet period after the newest deletion before a batch
	// starts; MaxBatch caps its members.
	Window   time.Duration
	MaxBatch int
	Recorder record.EventRecorder
	// Emitter sends dev.snapflow.deletion.held when a hold starts.
	Emitter host.Emitter
	Now     func() time.Time
}

func (f *Function) now() time.Time { return host.Now(f.Now) }

func (f *Function) window() time.Duration {
	if f.Window > 0 {
		return f.Window
	}
	return DefaultWindow
}

func (f *Function) maxBatch() int {
	if f.MaxBatch > 0 {
		return f.MaxBatch
	}
	return DefaultMaxBatch
}

// Handle is the CloudEvents entry point.
func (f *Function) Handle(ctx context.Context, e event.Event) error {
	switch {
	case e.Type() == events.Resync || e.Type() == events.Ping:
		return f.Resync(ctx)
	case events.IsAPIServer(e.Type()):
		ref, _, err := events.DecodeAPIServer(e)
		if err != nil {
			return err
		}
		gk := ref.GroupKind()
		switch {
		case gk.Group == snapv1.GroupVersion.Group && gk.Kind == "Snapshot":
			return f.reconcileSnapshot(ctx, ref.Namespace, ref.Name)
		case gk.Group == snapv1.GroupVersion.Group && gk.Kind == "Repository":
			return f.reconcileRepository(ctx, snapv1.RepositoryRef{Kind: snapv1.KindRepository, Name: ref.Name, Namespace: ref.Namespace})
		case gk.Group == snapv1.GroupVersion.Group && gk.Kind == "ClusterRepository":
			return f.reconcileRepository(ctx, snapv1.RepositoryRef{Kind: snapv1.KindClusterRepository, Name: ref.Name})
		case gk.Group == snapv1.GroupVersion.Group && gk.Kind == "SnapshotPolicy":
			return f.reconcilePolicy(ctx, ref.Namespace, ref.Name)
		case gk.Group == "batch" && gk.Kind == "Job":
			var j batchv1.Job
			if err := f.Client.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, &j); err != nil {
				return client.IgnoreNotFound(err)
			}
			if j.Labels[wellknown.LabelOp] == wellknown.OpDeleteBatch {
				return f.reconcileRepository(ctx, repoFromLabels(&j))
			}
		}
		return nil
	}
	return fmt.Errorf("%w: the cleanup function handles ApiServerSource, %s and %s events, not %q", events.ErrUnsupported, events.Resync, events.Ping, e.Type())
}

// Resync reconciles every policy, and every repository with deletions.
func (f *Function) Resync(ctx context.Context) error {
	var errs []error
	var pols snapv1.SnapshotPolicyList
	if err := f.Client.List(ctx, &pols); err != nil {
		return err
	}
	for i := range pols.Items {
		p := &pols.Items[i]
		if policySettled(p) {
			continue
		}
		errs = append(errs, f.reconcilePolicy(ctx, p.Namespace, p.Name))
	}
	repos, err := f.deletingRepos(ctx)
	if err != nil {
		return err
	}
	for _, r := range repos {
		errs = append(errs, f.reconcileRepository(ctx, r))
	}
	return errors.Join(errs...)
}

// reconcileSnapshot routes a deleted Snapshot to its repository's pass.
func (f *Function) reconcileSnapshot(ctx context.Context, ns, name string) error {
	var s snapv1.Snapshot
	if err := f.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &s); err != nil {
		return client.IgnoreNotFound(err)
	}
	if s.DeletionTimestamp == nil || !hasFinalizer(&s) {
		return nil
	}
	ref, ok := repoOf(&s)
	if !ok {
		// No mover ever ran, so nothing was ever written: release.
		return f.release(ctx, &s, "NoRepository", "the run never started its mover, so there is no kopia data to delete")
	}
	return f.reconcileRepository(ctx, ref)
}
