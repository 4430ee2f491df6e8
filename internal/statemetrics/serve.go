package statemetrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/internal/coverage"
	"github.com/snapflow/snapflow/internal/prune/ledger"
)

// Options configure Serve.
type Options struct {
	Config *rest.Config
	Scheme *runtime.Scheme
	// Addr is where /metrics, /healthz and /readyz listen.
	Addr string
	Log  logr.Logger
	// Listening, when set, is told the address once the server listens.
	Listening func(addr string)
	// Coverage serves snapflow_pvc_protected: it also watches PVCs, PVs
	// and namespaces, and reads the resourcePolicy ConfigMaps the
	// policies name at each scrape (not cached: ConfigMaps are many).
	Coverage bool
	// GlobalVolumePolicies is the global volume-policy ConfigMap as
	// NAMESPACE/NAME, whose skip rules count as exclusions ("" for none).
	GlobalVolumePolicies string
	// PruneRecord is the prune function's record as NAMESPACE/NAME, read
	// at each scrape; "" serves no prune series.
	PruneRecord string
}

// watched are the kinds the gauges derive from, read through the watch
// cache (with coverage, the exporter also gets ConfigMaps, live).
func watched(o Options) []client.Object {
	objs := []client.Object{&snapv1.Snapshot{}, &snapv1.SnapshotPolicy{}, &snapv1.SnapshotSchedule{}, &snapv1.Repository{},
		&snapv1.ClusterRepository{}, &snapv1.Restore{}, &snapv1.Maintenance{}}
	if o.Coverage {
		objs = append(objs, &corev1.PersistentVolumeClaim{}, &corev1.PersistentVolume{}, &corev1.Namespace{})
	}
	return objs
}

// Serve watches the kinds through a cache and serves their gauges until
// ctx ends. /readyz answers ok once every kind is synced.
func Serve(ctx context.Context, o Options) error {
	// Only status and names are read: managed fields are not kept.
	ca, err := cache.New(o.Config, cache.Options{Scheme: o.Scheme, DefaultTransform: cache.TransformStripManagedFields()})
	if err != nil {
		return fmt.Errorf("watch cache: %w", err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	col := NewCollector(ca, o.Log.WithName("collector"))
	if o.Coverage {
		// The watched kinds come from the cache; ConfigMaps are read live.
		cl, err := client.New(o.Config, client.Options{Scheme: o.Scheme, Cache: &client.CacheOptions{Reader: ca, DisableFor: []client.Object{&corev1.ConfigMap{}}}})
		if err != nil {
			return fmt.Errorf("client: %w", err)
		}
		log := o.Log.WithName("coverage")
		col.WithCoverage(func(ctx context.Context) ([]coverage.Verdict, error) {
			in, warnings, err := coverage.Read(ctx, cl, "", o.GlobalVolumePolicies, coverage.ReadOptions{Strict: true, List: []client.ListOption{client.UnsafeDisableDeepCopy}})
			for _, w := range warnings {
				log.V(1).Info("coverage judged with less", "warning", w)
			}
			if err != nil {
				return nil, err
			}
			return coverage.Verdicts(in), nil
		})
	}
	if ns, name, ok := coverage.SplitConfigMap(o.PruneRecord); ok {
		// One ConfigMap, read live: no cache of every ConfigMap.
		cl, err := client.New(o.Config, client.Options{Scheme: o.Scheme})
		if err != nil {
			return fmt.Errorf("client: %w", err)
		}
		col.WithPrunes(func(ctx context.Context) (ledger.Ledger, error) {
			var cm corev1.ConfigMap
			if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &cm); err != nil {
				// Missing is unknown too: the chart creates it.
				return nil, fmt.Errorf("read the prune record, ConfigMap %s/%s: %w", ns, name, err)
			}
			return ledger.Decode([]byte(cm.Data[ledger.Key]))
		})
	}
	reg.MustRegister(col)
	counts := NewCounts()
	if err := counts.Register(reg); err != nil {
		return fmt.Errorf("register counters: %w", err)
	}
	ready := make(chan struct{})
	mux := http.NewServeMux()
	metrics := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-ready:
			metrics.ServeHTTP(w, r)
		default:
			// An empty answer before the cache syncs would read as "no
			// backups failed"; a failed scrape says the truth.
			http.Error(w, "watch cache not synced yet", http.StatusServiceUnavailable)
		}
	})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		select {
		case <-ready:
			_, _ = w.Write([]byte("ok"))
		default:
			http.Error(w, "watch cache not synced yet", http.StatusServiceUnavailable)
		}
	})
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", o.Addr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 60 * time.Second}
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(ln) }()
	if o.Listening != nil {
		o.Listening(ln.Addr().String())
	}
	// Informers start on first use: make one per kind before the cache
	// starts, so the first scrape finds every kind synced.
	for _, obj := range watched(o) {
		inf, err := ca.GetInformer(ctx, obj)
		if err != nil {
			_ = srv.Close()
			return fmt.Errorf("watch %T: %w", obj, err)
		}
		if _, ok := obj.(*snapv1.Snapshot); ok {
			if _, err := inf.AddEventHandler(counts.Handler()); err != nil {
				_ = srv.Close()
				return fmt.Errorf("count Snapshot changes: %w", err)
			}
		}
	}
	go func() { errc <- ca.Start(ctx) }()
	if !ca.WaitForCacheSync(ctx) {
		_ = srv.Close()
		return fmt.Errorf("the watch cache did not sync")
	}
	close(ready)
	o.Log.Info("exporter serving", "addr", ln.Addr().String())
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(sctx)
	case err := <-errc:
		_ = srv.Close()
		if err == nil || errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	}
}
