package statemetrics

import (
	"github.com/prometheus/client_golang/prometheus"
	batchv1 "k8s.io/api/batch/v1"
	toolscache "k8s.io/client-go/tools/cache"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
)

// Counts holds the counter families and feeds them from the Snapshot and
// deletion batch Job informers' notifications.
type Counts struct {
	vecs map[*Desc]*prometheus.CounterVec
}

// NewCounts makes the counters, each at zero.
func NewCounts() *Counts {
	c := &Counts{vecs: map[*Desc]*prometheus.CounterVec{}}
	for _, d := range Counters {
		c.vecs[d] = prometheus.NewCounterVec(prometheus.CounterOpts{Name: d.Name, Help: d.Help}, d.Labels)
	}
	// Series with a closed set of labels show 0 from the start, so a
	// first count is an increase rather than a new series.
	c.vecs[SnapshotDeletionFailures].WithLabelValues()
	c.vecs[OrphanedSnapshots].WithLabelValues()
	for _, o := range []string{OutcomeDeleted, OutcomeKept, OutcomeNone} {
		c.vecs[SnapshotDeletions].WithLabelValues(o)
	}
	for _, o := range []string{OutcomeDeleted, OutcomeKept, OutcomeFailed} {
		c.vecs[DeleteBatchMembers].WithLabelValues(o)
	}
	for _, o := range []string{OutcomeSucceeded, OutcomeFailed} {
		c.vecs[DeleteBatchJobs].WithLabelValues(o)
	}
	return c
}

// Register adds every family to reg.
func (c *Counts) Register(reg prometheus.Registerer) error {
	for _, d := range Counters {
		if err := reg.Register(c.vecs[d]); err != nil {
			return err
		}
	}
	return nil
}

// Observe counts one change (see Changed).
func (c *Counts) Observe(old, cur *snapv1.Snapshot) { c.add(Changed(old, cur)) }

// ObserveJob counts one change of a Job (see JobChanged).
func (c *Counts) ObserveJob(old, cur *batchv1.Job) { c.add(JobChanged(old, cur)) }

func (c *Counts) add(samples []Sample) {
	for _, s := range samples {
		c.vecs[s.Desc].WithLabelValues(s.Labels...).Add(s.Value)
	}
}

// Handler turns a Snapshot or deletion batch Job informer's notifications
// into counts. What the
// first list finds is state, not change: it is not counted.
func (c *Counts) Handler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			if initial {
				return
			}
			switch o := obj.(type) {
			case *snapv1.Snapshot:
				c.Observe(nil, o)
			case *batchv1.Job:
				c.ObserveJob(nil, o)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			switch n := newObj.(type) {
			case *snapv1.Snapshot:
				if o, ok := oldObj.(*snapv1.Snapshot); ok {
					c.Observe(o, n)
				}
			case *batchv1.Job:
				if o, ok := oldObj.(*batchv1.Job); ok {
					c.ObserveJob(o, n)
				}
			}
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if s, ok := obj.(*snapv1.Snapshot); ok {
				c.Observe(s, nil)
			}
		},
	}
}
