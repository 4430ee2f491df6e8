package moverjob

import (
	"errors"
	"fmt"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/snapflow/snapflow/api/wellknown"
)

// Placement pins a mover to the node where the workload using its source
// claim runs: a ReadWriteOnce volume attaches to one node at a time, so a
// mover mounting it live (copyMethod: Direct) elsewhere would wait on a
// multi-attach error for ever.
type Placement struct {
	Node string
	// Pod is the workload pod the mover joins, for messages.
	Pod string
	// Tolerations are the workload pod's: the node may be tainted for it.
	Tolerations []corev1.Toleration
}

// ErrSourceInUse means the source claim cannot be mounted by the mover
// while its workload runs.
var ErrSourceInUse = errors.New("the source volume is in use")

// DirectPlacement decides where a Direct mover of claim must run, given the
// pods of its namespace. A claim another node may also attach (ReadWriteMany,
// ReadOnlyMany) or that no running pod mounts needs no placement (nil). A
// ReadWriteOncePod claim in use cannot be mounted by a second pod at all.
func DirectPlacement(claim *corev1.PersistentVolumeClaim, pods []corev1.Pod) (*Placement, error) {
	modes := claim.Spec.AccessModes
	if slices.Contains(modes, corev1.ReadWriteMany) || slices.Contains(modes, corev1.ReadOnlyMany) {
		return nil, nil
	}
	var users []corev1.Pod
	for _, p := range pods {
		if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if p.Labels[wellknown.LabelOp] != "" {
			continue // a mover of another run, not the workload
		}
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == claim.Name {
				users = append(users, p)
				break
			}
		}
	}
	if len(users) == 0 {
		return nil, nil
	}
	sort.Slice(users, func(i, j int) bool { return users[i].Name < users[j].Name })
	u := users[0]
	if slices.Contains(modes, corev1.ReadWriteOncePod) {
		return nil, fmt.Errorf("%w: PVC %s/%s is ReadWriteOncePod and pod %s uses it, so no other pod can mount it: copyMethod: Direct cannot back it up while the workload runs. Use copyMethod: Snapshot (or Clone), or stop the workload for the backup", ErrSourceInUse, claim.Namespace, claim.Name, u.Name)
	}
	return &Placement{Node: u.Spec.NodeName, Pod: u.Name, Tolerations: u.Spec.Tolerations}, nil
}

// place adds pl to a pod spec: a required node affinity to pl.Node, added
// to every term the spec already has (terms are ORed, so each must carry
// it), and the workload's tolerations after the spec's own.
func place(spec *corev1.PodSpec, pl *Placement) {
	if pl == nil {
		return
	}
	onNode := corev1.NodeSelectorRequirement{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{pl.Node}}
	if spec.Affinity == nil {
		spec.Affinity = &corev1.Affinity{}
	} else {
		spec.Affinity = spec.Affinity.DeepCopy()
	}
	if spec.Affinity.NodeAffinity == nil {
		spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	req := spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	if req == nil || len(req.NodeSelectorTerms) == 0 {
		req = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{}}}
	}
	for i := range req.NodeSelectorTerms {
		req.NodeSelectorTerms[i].MatchFields = append(req.NodeSelectorTerms[i].MatchFields, onNode)
	}
	spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = req
	tols := slices.Clone(spec.Tolerations)
	for _, t := range pl.Tolerations {
		if !slices.ContainsFunc(tols, func(o corev1.Toleration) bool { return o.MatchToleration(&t) }) {
			tols = append(tols, t)
		}
	}
	spec.Tolerations = tols
}
