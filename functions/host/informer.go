package host

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/snapflow/snapflow/internal/scheme"
)

// InformerSyncTimeout bounds how long a function waits at start-up for its
// informers' first lists.
const InformerSyncTimeout = 2 * time.Minute

// InformerReader starts an informer cache of exactly the given kinds (a
// read of any other kind fails instead of quietly starting a watch) and
// returns once each has listed: reads a function may serve from memory,
// where a moment's staleness only moves a decision to the next event. The
// informers stop with ctx. The function's RBAC needs list and watch on
// each kind.
func InformerReader(ctx context.Context, cfg *rest.Config, kinds ...client.Object) (client.Reader, error) {
	by := map[client.Object]cache.ByObject{}
	for _, k := range kinds {
		by[k] = cache.ByObject{}
	}
	ca, err := cache.New(cfg, cache.Options{Scheme: scheme.New(), ByObject: by,
		DefaultTransform: cache.TransformStripManagedFields(), ReaderFailOnMissingInformer: true})
	if err != nil {
		return nil, fmt.Errorf("informer cache: %w", err)
	}
	run, stop := context.WithCancel(ctx)
	for _, k := range kinds {
		if _, err := ca.GetInformer(run, k); err != nil {
			stop()
			return nil, fmt.Errorf("informer of %T: %w", k, err)
		}
	}
	go func() {
		if err := ca.Start(run); err != nil {
			Log(ctx).Error(err, "informer cache stopped")
		}
	}()
	wait, cancel := context.WithTimeout(run, InformerSyncTimeout)
	defer cancel()
	if !ca.WaitForCacheSync(wait) {
		stop() // nothing outlives a failed start
		return nil, fmt.Errorf("the informer cache of %d kinds did not sync within %s: check that the function's ServiceAccount may list and watch each (the chart's RBAC grants it) and that the API server is reachable", len(kinds), InformerSyncTimeout)
	}
	context.AfterFunc(ctx, stop) // the informers stop with ctx
	return ca, nil
}
