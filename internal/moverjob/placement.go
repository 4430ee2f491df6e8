package moverjob

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
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
	// Tolerations are the workload pod's that name a taint of their own
	// (see DirectPlacement): the node may be tainted for it.
	Tolerations []corev1.Toleration
}

// Colocates says whether a Direct mover joins the node of the workload
// using its source: sourceColocation Auto (the default) does; Disabled
// leaves the mover to the scheduler, for a driver that attaches one volume
// on several nodes.
func Colocates(d *snapv1.MoverDefaults) bool {
	return d == nil || d.SourceColocation == nil || d.SourceColocation.Mode != "Disabled"
}

// ErrSourceInUse means the source claim cannot be mounted by the mover
// while its workload runs.
var ErrSourceInUse = errors.New("the source volume is in use")

// DirectPlacement decides where a Direct mover of claim must run, given the
// pods of its namespace. A claim another node may also attach (ReadWriteMany,
// ReadOnlyMany) or that no running pod mounts needs no placement (nil). A
// ReadWriteOncePod claim in use cannot be mounted by a second pod at all.
//
// Only pods a kubelet reports Running count, and only their tolerations
// that name a taint key other than the cluster's own node keys: any pod of
// the namespace can claim a node in spec.nodeName, and the mover, which
// holds repository credentials, must not follow a decoy onto a control
// plane node with a wildcard toleration. Running pods on two nodes for a
// volume that attaches to one cannot both be real, so that is refused.
func DirectPlacement(claim *corev1.PersistentVolumeClaim, pods []corev1.Pod) (*Placement, error) {
	modes := claim.Spec.AccessModes
	if slices.Contains(modes, corev1.ReadWriteMany) || slices.Contains(modes, corev1.ReadOnlyMany) {
		return nil, nil
	}
	var users []corev1.Pod
	for _, p := range pods {
		if p.Spec.NodeName == "" || p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
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
	for _, o := range users[1:] {
		if o.Spec.NodeName != u.Spec.NodeName {
			return nil, fmt.Errorf("%w: running pods on two nodes use the ReadWriteOnce PVC %s/%s (%s on %s, %s on %s), which attaches to one node, so where it is attached cannot be told: copyMethod: Direct will not guess. Remove the pod that does not really use it, or use copyMethod: Snapshot (or Clone)", ErrSourceInUse, claim.Namespace, claim.Name, u.Name, u.Spec.NodeName, o.Name, o.Spec.NodeName)
		}
	}
	var tols []corev1.Toleration
	for _, t := range u.Spec.Tolerations {
		if followable(t) {
			tols = append(tols, t)
		}
	}
	return &Placement{Node: u.Spec.NodeName, Pod: u.Name, Tolerations: tols}, nil
}

// systemTaintKeys are the prefixes of the taints Kubernetes and cloud
// providers put on nodes themselves (control plane, not ready, cordoned):
// a workload's toleration of them says nothing about where its volume is.
var systemTaintKeys = []string{"node-role.kubernetes.io/", "node.kubernetes.io/", "node.cloudprovider.kubernetes.io/"}

// followable says whether the mover may copy a workload's toleration: it
// must name a key (an empty key tolerates every taint) outside the system's.
func followable(t corev1.Toleration) bool {
	if t.Key == "" {
		return false
	}
	for _, p := range systemTaintKeys {
		if strings.HasPrefix(t.Key, p) {
			return false
		}
	}
	return true
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
