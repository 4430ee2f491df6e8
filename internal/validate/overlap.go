package validate

import (
	"context"
	"errors"
	"fmt"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/internal/fanout"
)

// sourceOverlaps refuses a policy two of whose sources cover one PVC now:
// two pvc sources naming it, or a selector matching a claim another source
// covers. The claims are read from the cluster; when they cannot be, only
// the pvc sources are compared, and the schedule refuses such a firing
// anyway (fanout.ErrOverlap).
func sourceOverlaps(ctx context.Context, lk Lookup, p *snapv1.SnapshotPolicy) Result {
	var r Result
	selected := map[int][]string{}
	if hasSelector(p) {
		pvcs, err := lk.PVCs(ctx, p.Namespace)
		switch {
		case errors.Is(err, ErrNotGiven):
		case err != nil:
			r.Warn("could not list the PersistentVolumeClaims of namespace %q to check that no two sources cover one (%v); each firing checks again", p.Namespace, err)
		default:
			// An invalid selector is reported on its own field.
			selected, _ = fanout.Match(p, pvcs)
		}
	}
	for _, o := range fanout.Overlaps(p, selected) {
		later := o.Sources[len(o.Sources)-1]
		r.Also(fieldErr(fmt.Sprintf("spec.sources[%d]", later), "%s: two sources of one policy may not back up one PVC, as both would write the same kopia identity. Narrow the pvcSelector (e.g. a matchExpressions NotIn on a label of %q) or remove the duplicate source", o.Describe(), o.PVC))
	}
	return r
}

func hasSelector(p *snapv1.SnapshotPolicy) bool {
	for _, s := range p.Spec.Sources {
		if s.PVCSelector != nil {
			return true
		}
	}
	return false
}
