package admission

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/snapflow/snapflow/api/wellknown"
)

// DefaultJobControllers are the identities the Kubernetes Job controller
// creates pods as: its own ServiceAccount when kube-controller-manager runs
// with --use-service-account-credentials (kubeadm and most distributions),
// the controller manager's user otherwise.
var DefaultJobControllers = []string{"system:serviceaccount:kube-system:job-controller", "system:kube-controller-manager"}

// Labels the Job controller gives each pod of a Job (the API server puts
// them in the template of every Job whose selector it generates, as for
// all of snapflow's): the functions select a mover's pods by them.
var (
	jobNameKeys = []string{"batch.kubernetes.io/job-name", "job-name"}
	jobUIDKeys  = []string{"batch.kubernetes.io/controller-uid", "controller-uid"}
	// moverPodKeys may be set or changed on a pod labelled as snapflow's
	// by the Job controller only.
	moverPodKeys = append([]string{wellknown.LabelManagedBy}, append(jobNameKeys, jobUIDKeys...)...)
)

// MoverPodProblem says why user may not write pod (old is nil on create),
// or "" when it may. The functions read a backup's, restore's or deletion
// batch's outcome from the termination message of a pod snapflow's Job
// controls; whoever could create such a pod, or turn one of theirs into
// one, could report a deletion that never happened or a backup that never
// ran. So:
//   - a pod labelled as snapflow's is created, or given a Job's labels or
//     controller, only by the Job controller (jobControllers);
//   - whoever writes it, such a pod's controller is a Job whose name and
//     UID its job labels carry. The Job controller creates pods from any
//     Job's template, a tenant's too, so without this a tenant's Job
//     could carry the labels of snapflow's and have its pod adopted by
//     snapflow's Job once orphaned.
//
// Nor may anyone else change the image of such a pod's container. Anything
// else about such pods, and every other pod, is left alone: removing the
// labels or the owner only makes a pod untrusted.
func MoverPodProblem(user string, jobControllers map[string]bool, old, pod *corev1.Pod) string {
	if pod.Labels[wellknown.LabelManagedBy] != wellknown.ManagedByValue {
		return ""
	}
	if why := jobIdentityProblem(pod); why != "" {
		return why
	}
	if jobControllers[user] {
		return ""
	}
	fix := fmt.Sprintf("only the Job controller (%s) may, since snapflow's functions trust what these pods report; "+
		"run the work through a snapflow Job, or drop the label %s=%s", strings.Join(slices.Sorted(maps.Keys(jobControllers)), ", "),
		wellknown.LabelManagedBy, wellknown.ManagedByValue)
	if old == nil {
		return fmt.Sprintf("metadata.labels: %s may not create a pod labelled %s=%s: %s", user, wellknown.LabelManagedBy, wellknown.ManagedByValue, fix)
	}
	for _, k := range moverPodKeys {
		v, set := pod.Labels[k]
		if was, had := old.Labels[k]; set && (!had || was != v) {
			return fmt.Sprintf("metadata.labels[%s]: %s may not set this label on a pod labelled %s=%s: %s", k, user, wellknown.LabelManagedBy, wellknown.ManagedByValue, fix)
		}
	}
	// A running mover's image may be swapped on a pod (another digest of
	// the same repository would pass the template check).
	for _, list := range []struct {
		field    string
		old, new []corev1.Container
	}{{"spec.initContainers", old.Spec.InitContainers, pod.Spec.InitContainers}, {"spec.containers", old.Spec.Containers, pod.Spec.Containers}} {
		for _, c := range list.new {
			for _, o := range list.old {
				if o.Name == c.Name && o.Image != c.Image {
					return fmt.Sprintf("%s[%s].image: %s may not change the image of a pod labelled %s=%s: %s", list.field, c.Name, user, wellknown.LabelManagedBy, wellknown.ManagedByValue, fix)
				}
			}
		}
	}
	if c := metav1.GetControllerOfNoCopy(pod); c != nil {
		if was := metav1.GetControllerOfNoCopy(old); was == nil || was.UID != c.UID || was.Kind != c.Kind || was.Name != c.Name {
			return fmt.Sprintf("metadata.ownerReferences: %s may not make %s %s the controller of a pod labelled %s=%s: %s", user, c.Kind, c.Name, wellknown.LabelManagedBy, wellknown.ManagedByValue, fix)
		}
	}
	return ""
}

// jobIdentityProblem says how a pod labelled as snapflow's that has a
// controller is not one of that Job's pods by its labels ("" when it is;
// an orphan is trusted by nothing: another Job may adopt it, but the
// functions read only pods whose controller is the Job they made).
func jobIdentityProblem(pod *corev1.Pod) string {
	c := metav1.GetControllerOfNoCopy(pod)
	if c == nil {
		return ""
	}
	label := fmt.Sprintf("a pod labelled %s=%s", wellknown.LabelManagedBy, wellknown.ManagedByValue)
	if gv, err := schema.ParseGroupVersion(c.APIVersion); err != nil || gv.Group != "batch" || c.Kind != "Job" {
		return fmt.Sprintf("metadata.ownerReferences: %s is controlled by %s %s, not by a Job: only snapflow's mover Jobs have such pods", label, c.Kind, c.Name)
	}
	for _, want := range []struct {
		keys  []string
		value string
	}{{jobNameKeys, c.Name}, {jobUIDKeys, string(c.UID)}} {
		found := false
		for _, k := range want.keys {
			if v, ok := pod.Labels[k]; ok {
				if v != want.value {
					return fmt.Sprintf("metadata.labels[%s]: %s names %q, but its controller is Job %s (uid %s): a Job's pods carry its own name and UID", k, label, v, c.Name, c.UID)
				}
				found = true
			}
		}
		if !found {
			return fmt.Sprintf("metadata.labels: %s controlled by Job %s carries neither %s: a Job whose selector the API server generates gives its pods both", label, c.Name, strings.Join(want.keys, " nor "))
		}
	}
	return ""
}

// MoverJobProblem says why user may not write job (old is nil on create),
// or "" when it may. A function finds its mover Job by a name anyone can
// work out, and reads what the Job's pods report only when the Job carries
// snapflow's label; so only snapflow's functions (controllers) may create
// a Job with that label or add it to one. A Job without it is left alone.
func MoverJobProblem(user string, controllers map[string]bool, old, job *batchv1.Job) string {
	if job.Labels[wellknown.LabelManagedBy] != wellknown.ManagedByValue || controllers[user] {
		return ""
	}
	fix := fmt.Sprintf("only snapflow's functions (the webhook's --controller-users) may, since they trust what its pods report; drop the label %s=%s",
		wellknown.LabelManagedBy, wellknown.ManagedByValue)
	if old == nil {
		return fmt.Sprintf("metadata.labels: %s may not create a Job labelled %s=%s: %s", user, wellknown.LabelManagedBy, wellknown.ManagedByValue, fix)
	}
	if old.Labels[wellknown.LabelManagedBy] != wellknown.ManagedByValue {
		return fmt.Sprintf("metadata.labels[%s]: %s may not label a Job %s: %s", wellknown.LabelManagedBy, user, wellknown.ManagedByValue, fix)
	}
	return ""
}
