package statemetrics

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/internal/coverage"
	"github.com/snapflow/snapflow/internal/prune/ledger"
)

// Collector serves Samples at each scrape, listing the objects from a
// reader (an informer cache, so a scrape costs the API server nothing).
type Collector struct {
	reader   client.Reader
	coverage CoverageFunc
	prunes   PruneFunc
	log      logr.Logger
	descs    map[*Desc]*prometheus.Desc
	errors   prometheus.Counter
}

// NewCollector collects from r.
func NewCollector(r client.Reader, log logr.Logger) *Collector {
	c := &Collector{reader: r, log: log, descs: map[*Desc]*prometheus.Desc{},
		errors: prometheus.NewCounter(prometheus.CounterOpts{Name: "snapflow_exporter_list_errors_total",
			Help: "Scrapes that failed because a kind could not be listed from the watch cache, or coverage could not be judged."})}
	for _, d := range Families {
		c.descs[d] = prometheus.NewDesc(d.Name, d.Help, d.Labels, nil)
	}
	return c
}

// CoverageFunc judges every PVC of the cluster.
type CoverageFunc func(context.Context) ([]coverage.Verdict, error)

// WithCoverage makes the collector serve snapflow_pvc_protected from f.
func (c *Collector) WithCoverage(f CoverageFunc) *Collector {
	c.coverage = f
	return c
}

// PruneFunc reads the prune function's record of each BackupRepo's last run.
type PruneFunc func(context.Context) (ledger.Ledger, error)

// WithPrunes makes the collector serve the prune series from f.
func (c *Collector) WithPrunes(f PruneFunc) *Collector {
	c.prunes = f
	return c
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
	c.errors.Describe(ch)
}

// Collect implements prometheus.Collector. A kind that cannot be listed
// fails the whole scrape (Prometheus then reports the target down): a
// partial answer would read as healthy, e.g. every repository unmaintained
// when only the Maintenance list failed.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var snaps snapv1.SnapshotList
	var pols snapv1.SnapshotPolicyList
	var scheds snapv1.SnapshotScheduleList
	var repos snapv1.RepositoryList
	var crepos snapv1.ClusterRepositoryList
	var restores snapv1.RestoreList
	var maints snapv1.MaintenanceList
	for _, l := range []client.ObjectList{&snaps, &pols, &scheds, &repos, &crepos, &restores, &maints} {
		// The cache's objects are read, never changed: no copy per scrape.
		if err := c.reader.List(ctx, l, client.UnsafeDisableDeepCopy); err != nil {
			c.log.Error(err, "list for metrics")
			c.errors.Inc()
			c.errors.Collect(ch)
			ch <- prometheus.NewInvalidMetric(c.descs[ResourcePhase], fmt.Errorf("list %T: %w", l, err))
			return
		}
	}
	s := State{Snapshots: snaps.Items, Policies: pols.Items, Schedules: scheds.Items, Repositories: repos.Items, ClusterRepositories: crepos.Items,
		Restores: restores.Items, Maintenances: maints.Items}
	// Coverage and the prune record are read apart from the kinds: one
	// that cannot be read drops only its own series, and says so, since
	// failing the scrape would make every other series stale and restart
	// every alert's wait.
	if c.coverage != nil {
		s.Coverage, s.CoverageKnown = optional(ctx, c, c.coverage, "judge coverage for metrics")
	}
	if c.prunes != nil {
		s.Prunes, s.PruneRecordKnown = optional(ctx, c, c.prunes, "read the prune record for metrics")
	}
	for _, smp := range Samples(s) {
		m, err := prometheus.NewConstMetric(c.descs[smp.Desc], prometheus.GaugeValue, smp.Value, smp.Labels...)
		if err != nil {
			c.log.Error(err, "build metric", "name", smp.Desc.Name)
			continue
		}
		ch <- m
	}
	c.errors.Collect(ch)
}

// optional reads what read returns; known is 1 when it could, else 0
// (the error is logged and counted).
func optional[T any](ctx context.Context, c *Collector, read func(context.Context) (T, error), what string) (v T, known *float64) {
	k := 1.0
	v, err := read(ctx)
	if err != nil {
		c.log.Error(err, what)
		c.errors.Inc()
		k = 0
		var zero T
		v = zero
	}
	return v, &k
}
