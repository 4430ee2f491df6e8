package fanout

import (
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
)

// Match lists, for each pvcSelector source of p, the PVCs among pvcs (the
// policy namespace's) it matches. PVCs a run staged are not user data and
// being deleted ones are on their way out: neither ever matches.
func Match(p *snapv1.SnapshotPolicy, pvcs []metav1.ObjectMeta) (map[int][]string, error) {
	out := map[int][]string{}
	for i, src := range p.Spec.Sources {
		if src.PVCSelector == nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(src.PVCSelector.LabelSelector)
		if err != nil {
			return nil, fmt.Errorf("spec.sources[%d].pvcSelector: %w", i, err)
		}
		for _, m := range pvcs {
			if m.Labels[wellknown.LabelSnapshot] != "" || m.DeletionTimestamp != nil {
				continue
			}
			if sel.Matches(labels.Set(m.Labels)) {
				out[i] = append(out[i], m.Name)
			}
		}
		sort.Strings(out[i])
	}
	return out, nil
}

// Overlap is a PVC that more than one source of a policy covers.
type Overlap struct {
	PVC     string
	Sources []int // indexes into spec.sources, ascending
}

// Overlaps finds the PVCs that two or more sources of p cover: a pvc
// source naming it, or a pvcSelector source matching it (selected, as
// Match gives it). Each would back the volume up again, with the same
// source path into one kopia identity, which retention ranks as one line.
func Overlaps(p *snapv1.SnapshotPolicy, selected map[int][]string) []Overlap {
	by := map[string][]int{}
	for i, src := range p.Spec.Sources {
		switch {
		case src.PVC != nil && src.PVC.Name != "":
			by[src.PVC.Name] = append(by[src.PVC.Name], i)
		case src.PVCSelector != nil:
			seen := map[string]bool{}
			for _, n := range selected[i] {
				if !seen[n] {
					seen[n] = true
					by[n] = append(by[n], i)
				}
			}
		}
	}
	var out []Overlap
	for pvc, idx := range by {
		if len(idx) > 1 {
			out = append(out, Overlap{PVC: pvc, Sources: idx})
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].PVC < out[b].PVC })
	return out
}

// Describe says which sources cover the PVC, for a refusal or a condition.
func (o Overlap) Describe() string {
	fields := make([]string, len(o.Sources))
	for i, s := range o.Sources {
		fields[i] = fmt.Sprintf("spec.sources[%d]", s)
	}
	return fmt.Sprintf("PVC %q is covered by %s", o.PVC, strings.Join(fields, " and "))
}

// ErrOverlap says which PVCs a firing left out because two sources cover them.
type ErrOverlap struct{ Overlaps []Overlap }

func (e ErrOverlap) Error() string {
	parts := make([]string, len(e.Overlaps))
	for i, o := range e.Overlaps {
		parts[i] = o.Describe()
	}
	return strings.Join(parts, "; ") + ": two sources of one policy may not back up one PVC (each would back it up again, into one kopia identity unless their source paths differ), so it was left out of this firing; the policy's other PVCs were not. Narrow the pvcSelector (e.g. a matchExpressions NotIn) or remove the duplicate source"
}
