package statemetrics

import (
	"github.com/prometheus/client_golang/prometheus"
	toolscache "k8s.io/client-go/tools/cache"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
)

// Counts holds the counter families and feeds them from a Snapshot
// informer's notifications.
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
func (c *Counts) Observe(old, cur *snapv1.Snapshot) {
	for _, s := range Changed(old, cur) {
		c.vecs[s.Desc].WithLabelValues(s.Labels...).Add(s.Value)
	}
}

// Handler turns a Snapshot informer's notifications into counts. What the
// first list finds is state, not change: it is not counted.
func (c *Counts) Handler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			if s, ok := obj.(*snapv1.Snapshot); ok && !initial {
				c.Observe(nil, s)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*snapv1.Snapshot)
			n, ok2 := newObj.(*snapv1.Snapshot)
			if ok1 && ok2 {
				c.Observe(o, n)
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
