package privilege

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
)

// Workload is the identity a backup mover inherits from a live pod: the
// user, groups and SELinux label its data was written with. Capabilities,
// privilege and the like are not copied: reading files as their owner needs
// none of them.
type Workload struct {
	Pod, Container string
	Identity       *corev1.PodSecurityContext
	// FSGroup is the workload's fsGroup, the data's group, recorded for a
	// restore to give its target.
	FSGroup *int64
	// Pinned: read back from the run's record, not from a pod.
	Pinned bool
}

// Reasons a backup mover could not inherit an identity (the run goes on with
// the explicit and default settings, as the guide says).
const (
	ReasonNoWorkloadPod  = "NoWorkloadPod"
	ReasonNoContainer    = "ContainerNotFound"
	ReasonIdentityUnset  = "WorkloadIdentityUnpinned"
	ReasonInherited      = "Inherited"
	ReasonBadPodSelector = "InvalidPodSelector"
)

// NotInherited says why no identity was inherited.
type NotInherited struct {
	Reason, Message string
}

func (e *NotInherited) Error() string { return e.Message }

// FindWorkload picks the pod a backup mover of claim inherits its identity
// from, among the pods of the claim's namespace. pvcConsumer takes a pod
// mounting the claim and the first of its containers that mounts it;
// workloadSelector a pod its selector matches and the container it names
// (else the first). Only pods a kubelet reports Running count, never a
// mover, and of several the oldest (then by name), so every delivery of a
// run picks the same one.
func FindWorkload(from *snapv1.InheritSecurityContextFrom, claim string, pods []corev1.Pod) (*Workload, error) {
	if from == nil || (from.PvcConsumer == nil && from.WorkloadSelector == nil) {
		return nil, nil
	}
	var candidates []corev1.Pod
	want := ""
	if ws := from.WorkloadSelector; ws != nil {
		sel, err := metav1.LabelSelectorAsSelector(&ws.PodSelector)
		if err != nil {
			return nil, &NotInherited{ReasonBadPodSelector, fmt.Sprintf("mover.inheritSecurityContextFrom.workloadSelector.podSelector: %v", err)}
		}
		want = ws.Container
		for _, p := range pods {
			if sel.Matches(labels.Set(p.Labels)) {
				candidates = append(candidates, p)
			}
		}
	} else {
		for _, p := range pods {
			if volumeOf(&p, claim) != "" {
				candidates = append(candidates, p)
			}
		}
	}
	candidates = running(candidates, claim, from.PvcConsumer != nil)
	if len(candidates) == 0 {
		what := "no Running pod mounts PVC " + claim
		if from.WorkloadSelector != nil {
			what = "no Running pod matches workloadSelector.podSelector"
		}
		return nil, &NotInherited{ReasonNoWorkloadPod, what + ", so there is no workload to inherit a security context from"}
	}
	// The first candidate that pins its user: a pod that does not (a
	// reader, a debugging pod) says nothing about who wrote the data.
	var first *NotInherited
	for i := range candidates {
		pod := &candidates[i]
		c := container(pod, want, claim, from.PvcConsumer != nil)
		if c == nil {
			if first == nil {
				first = &NotInherited{ReasonNoContainer, fmt.Sprintf("pod %s has no container %q (workloadSelector.container); name one of its containers", pod.Name, want)}
			}
			continue
		}
		id := identity(pod.Spec.SecurityContext, c.SecurityContext)
		if id.RunAsUser == nil {
			if first == nil {
				first = &NotInherited{ReasonIdentityUnset, fmt.Sprintf("container %s of pod %s does not set runAsUser (its image decides whom it runs as, which the mover cannot read); set runAsUser on the workload, or set mover.podSecurityContext.runAsUser instead", c.Name, pod.Name)}
			}
			continue
		}
		return &Workload{Pod: pod.Name, Container: c.Name, Identity: id}, nil
	}
	return nil, first
}

// ForBackup shapes an inherited identity for a backup mover: the
// workload's fsGroup becomes one of its groups rather than the pod's
// fsGroup. A backup reads its source read-only, where no fsGroup applies,
// while a kubelet would give every read-write volume the mover mounts (a
// repository claim, its cache) to the pod's fsGroup: keeping the mover's
// own there keeps a shared repository in one group whoever runs.
func ForBackup(id *corev1.PodSecurityContext) *corev1.PodSecurityContext {
	if id == nil || id.FSGroup == nil {
		return id
	}
	out := id.DeepCopy()
	out.SupplementalGroups = append(out.SupplementalGroups, *out.FSGroup)
	out.FSGroup = nil
	return out
}

// Inherit layers an inherited identity under the explicit settings of m:
// hardened defaults, then moverDefaults, then id, then m's own contexts,
// field by field (SecurityContexts applies the first two). The user and
// group are repeated in the container layer unless m names them, because a
// container's runAsUser beats its pod's and moverDefaults.securityContext
// would otherwise win over the inherited identity. m is not changed.
func Inherit(m *snapv1.MoverSpec, id *corev1.PodSecurityContext) *snapv1.MoverSpec {
	if id == nil || (m != nil && m.PrivilegedMode) {
		// privilegedMode runs as root to keep every owner: an inherited
		// user would undo it.
		return m
	}
	out := &snapv1.MoverSpec{}
	if m != nil {
		out = m.DeepCopy()
	}
	pod := id.DeepCopy()
	// runAsNonRoot follows the user the mover ends up with, not the
	// workload's flag: an explicit user over an inherited root is no root.
	pod.RunAsNonRoot = nil
	mergePod(pod, out.PodSecurityContext)
	explicitPodUser := out.PodSecurityContext != nil && out.PodSecurityContext.RunAsUser != nil
	if sc := out.SecurityContext; sc != nil && sc.RunAsUser != nil && !explicitPodUser {
		// An explicit container user decides; the inherited pod-level one
		// would only be a root the gate objects to.
		pod.RunAsUser = nil
	}
	final := pod.RunAsUser
	if sc := out.SecurityContext; sc != nil && sc.RunAsUser != nil {
		final = sc.RunAsUser
	}
	if pod.RunAsNonRoot == nil && final != nil && *final == 0 {
		pod.RunAsNonRoot = ptr(false)
	}
	out.PodSecurityContext = pod
	c := &corev1.SecurityContext{}
	if out.SecurityContext != nil {
		c = out.SecurityContext.DeepCopy()
	}
	if id.RunAsUser != nil && c.RunAsUser == nil {
		c.RunAsUser = pod.RunAsUser
		if c.RunAsNonRoot == nil {
			c.RunAsNonRoot = pod.RunAsNonRoot
		}
	}
	if id.RunAsGroup != nil && c.RunAsGroup == nil {
		c.RunAsGroup = pod.RunAsGroup
	}
	out.SecurityContext = c
	return out
}

// Effective is the user and group the mover's container runs as.
func Effective(pod *corev1.PodSecurityContext, c *corev1.SecurityContext) (uid, gid *int64) {
	if pod != nil {
		uid, gid = pod.RunAsUser, pod.RunAsGroup
	}
	if c != nil && c.RunAsUser != nil {
		uid = c.RunAsUser
	}
	if c != nil && c.RunAsGroup != nil {
		gid = c.RunAsGroup
	}
	return uid, gid
}

// Describe renders an identity for conditions and events ("unset" for a
// field the image or the kubelet decides).
func Describe(uid, gid, fsGroup *int64) string {
	text := func(v *int64) string {
		if v == nil {
			return "unset"
		}
		return fmt.Sprint(*v)
	}
	return "uid " + text(uid) + ", gid " + text(gid) + ", fsGroup " + text(fsGroup)
}

// identity folds a container's context over its pod's, keeping only what
// decides file access.
func identity(pod *corev1.PodSecurityContext, c *corev1.SecurityContext) *corev1.PodSecurityContext {
	id := &corev1.PodSecurityContext{}
	if pod != nil {
		id.RunAsUser, id.RunAsGroup = pod.RunAsUser, pod.RunAsGroup
		id.FSGroup, id.SupplementalGroups, id.SELinuxOptions = pod.FSGroup, pod.SupplementalGroups, pod.SELinuxOptions
	}
	if c != nil {
		if c.RunAsUser != nil {
			id.RunAsUser = c.RunAsUser
		}
		if c.RunAsGroup != nil {
			id.RunAsGroup = c.RunAsGroup
		}
		if c.SELinuxOptions != nil {
			id.SELinuxOptions = c.SELinuxOptions
		}
	}
	return id.DeepCopy()
}

// running keeps the Running pods that are not being deleted and are not
// snapflow's own (a mover or hook pod: labelled by snapflow and controlled
// by a Job; a label alone could hide the workload). Writers of claim come
// first (pvcConsumer), then the oldest, then by name, so every delivery of
// a run picks the same one.
func running(pods []corev1.Pod, claim string, consumer bool) []corev1.Pod {
	var out []corev1.Pod
	for _, p := range pods {
		if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
			continue
		}
		if o := metav1.GetControllerOf(&p); o != nil && o.Kind == "Job" && p.Labels[wellknown.LabelOp] != "" {
			continue
		}
		out = append(out, p)
	}
	writes := func(p *corev1.Pod) bool { return consumer && writer(p, claim) }
	sort.SliceStable(out, func(a, b int) bool {
		if wa, wb := writes(&out[a]), writes(&out[b]); wa != wb {
			return wa
		}
		ta, tb := out[a].CreationTimestamp, out[b].CreationTimestamp
		if !ta.Equal(&tb) {
			return ta.Before(&tb)
		}
		return out[a].Name < out[b].Name
	})
	return out
}

// writer says whether pod mounts claim read-write.
func writer(pod *corev1.Pod, claim string) bool {
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != claim || v.PersistentVolumeClaim.ReadOnly {
			continue
		}
		for _, c := range pod.Spec.Containers {
			for _, m := range c.VolumeMounts {
				if m.Name == v.Name && !m.ReadOnly {
					return true
				}
			}
		}
	}
	return false
}

// volumeOf names pod's volume that is claim ("" when none is).
func volumeOf(pod *corev1.Pod, claim string) string {
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == claim {
			return v.Name
		}
	}
	return ""
}

func container(pod *corev1.Pod, name, claim string, consumer bool) *corev1.Container {
	cs := pod.Spec.Containers
	if name != "" {
		for i := range cs {
			if cs[i].Name == name {
				return &cs[i]
			}
		}
		return nil
	}
	if consumer {
		vol := volumeOf(pod, claim)
		for i := range cs {
			for _, m := range cs[i].VolumeMounts {
				if m.Name == vol {
					return &cs[i]
				}
			}
		}
	}
	if len(cs) == 0 {
		return nil
	}
	return &cs[0]
}
