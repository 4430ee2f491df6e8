package admission

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapflow/snapflow/api/wellknown"
)

// DefaultJobControllers are the identities the Kubernetes Job controller
// creates pods as: its own ServiceAccount when kube-controller-manager runs
// with --use-service-account-credentials (kubeadm and most distributions),
// the controller manager's user otherwise.
var DefaultJobControllers = []string{"system:serviceaccount:kube-system:job-controller", "system:kube-controller-manager"}

// moverPodKeys are the labels that make a pod count as a Job's pod: the
// Job controller writes them, and the functions select a mover's pods by
// them before they read its report.
var moverPodKeys = []string{wellknown.LabelManagedBy, "job-name", "batch.kubernetes.io/job-name", "controller-uid", "batch.kubernetes.io/controller-uid"}

// MoverPodProblem says why user may not write pod (old is nil on create),
// or "" when it may. The functions read a backup's, restore's or deletion
// batch's outcome from the termination message of a pod snapflow's Job
// controls; whoever could create such a pod, or turn one of theirs into
// one, could report a deletion that never happened or a backup that never
// ran. So a pod labelled as snapflow's is created, or given a Job's
// identity, only by the Job controller (jobControllers). Anything else
// about such pods, and every other pod, is left alone: removing the
// labels or the owner only makes a pod untrusted.
func MoverPodProblem(user string, jobControllers map[string]bool, old, pod *corev1.Pod) string {
	if pod.Labels[wellknown.LabelManagedBy] != wellknown.ManagedByValue || jobControllers[user] {
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
	if c := metav1.GetControllerOfNoCopy(pod); c != nil {
		if was := metav1.GetControllerOfNoCopy(old); was == nil || was.UID != c.UID || was.Kind != c.Kind || was.Name != c.Name {
			return fmt.Sprintf("metadata.ownerReferences: %s may not make %s %s the controller of a pod labelled %s=%s: %s", user, c.Kind, c.Name, wellknown.LabelManagedBy, wellknown.ManagedByValue, fix)
		}
	}
	return ""
}
