package jobwatch

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapflow/snapflow/api/wellknown"
)

// templateMismatch says how pod p, which j controls, does not run what j's
// template says ("" when it does): a function reads a pod's termination
// message or progress only then. A controller reference and the job-name
// label are no proof, since whoever may create pods in the namespace can
// write both. So each container and init container of the template must be
// in the pod with the same image, command, arguments (a mover's carry the
// digest of its work spec) and working directory, with every variable,
// source and mount of the template's; each volume of the template must be
// the same volume; and the pod may not share a process, PID or IPC
// namespace the template does not, nor carry ephemeral containers (a
// debugger attached to a mover could rewrite what it reports).
//
// The pod must carry snapflow's managed-by label and its template's labels
// (among them the Job's UID): snapflow's admission lets only the Job
// controller create such a pod, and only with the name and UID of the Job
// that controls it (admission.MoverPodProblem); and Terminated reads only
// a Job with that label, which only snapflow's functions may create
// (admission.MoverJobProblem). Without those admission entries this check
// is no proof: someone who may create pods in a namespace could assemble
// one that passes, though it could only affect that namespace's own runs.
//
// What admission adds to every pod is allowed (a sidecar, an injected
// variable or mount, a security context, an image digest, the default
// ServiceAccount), except variables that change which program runs or
// which certificates it trusts.
func templateMismatch(p *corev1.Pod, j *batchv1.Job) string {
	t, s := &j.Spec.Template.Spec, &p.Spec
	if p.Labels[wellknown.LabelManagedBy] != wellknown.ManagedByValue {
		// Admission lets only the Job controller create pods with this
		// label (admission.MoverPodProblem): without it, anyone could.
		return fmt.Sprintf("it is not labelled %s=%s", wellknown.LabelManagedBy, wellknown.ManagedByValue)
	}
	for _, k := range slices.Sorted(maps.Keys(j.Spec.Template.Labels)) {
		if v, ok := p.Labels[k]; !ok || v != j.Spec.Template.Labels[k] {
			return fmt.Sprintf("it lacks its template's label %s=%s", k, j.Spec.Template.Labels[k])
		}
	}
	switch {
	case !sameBool(s.ShareProcessNamespace, t.ShareProcessNamespace) || (s.HostPID && !t.HostPID) || (s.HostIPC && !t.HostIPC):
		return "it shares a process, PID or IPC namespace its template does not"
	case len(s.EphemeralContainers) > 0:
		return "it has ephemeral containers (a debugger was attached)"
	case account(s.ServiceAccountName) != account(t.ServiceAccountName):
		return fmt.Sprintf("it runs as ServiceAccount %q, its template as %q", account(s.ServiceAccountName), account(t.ServiceAccountName))
	}
	for _, tc := range t.InitContainers {
		if why := containerMismatch(s.InitContainers, tc); why != "" {
			return why
		}
	}
	for _, tc := range t.Containers {
		if why := containerMismatch(s.Containers, tc); why != "" {
			return why
		}
	}
	for _, tv := range t.Volumes {
		same := false
		for _, v := range s.Volumes {
			if v.Name == tv.Name {
				same = equality.Semantic.DeepEqual(v.VolumeSource, tv.VolumeSource)
				break
			}
		}
		if !same {
			return fmt.Sprintf("its volume %q is not its template's", tv.Name)
		}
	}
	return ""
}

// runsJob says whether p is one of j's pods and runs j's template.
func runsJob(p *corev1.Pod, j *batchv1.Job) bool {
	return metav1.IsControlledBy(p, j) && templateMismatch(p, j) == ""
}

// newest is the latest created of the pods keep accepts, or nil.
func newest(pods []corev1.Pod, keep func(*corev1.Pod) bool) *corev1.Pod {
	var last *corev1.Pod
	for i := range pods {
		if p := &pods[i]; keep(p) && (last == nil || p.CreationTimestamp.After(last.CreationTimestamp.Time)) {
			last = p
		}
	}
	return last
}

func sameBool(a, b *bool) bool { return (a != nil && *a) == (b != nil && *b) }

// account is the ServiceAccount a pod runs as: admission puts "default"
// on a pod whose template names none.
func account(name string) string {
	if name == "" {
		return "default"
	}
	return name
}

// sameImage says whether a pod's image is the template's: the same
// reference, the template's with a digest a policy engine pinned, or,
// where both carry a digest, the same digest (a registry mirror's rewrite).
func sameImage(pod, tmpl string) bool {
	if pod == tmpl {
		return true
	}
	repo, digest, pinned := strings.Cut(pod, "@")
	if !pinned {
		return false
	}
	if repo == tmpl {
		return true
	}
	_, want, ok := strings.Cut(tmpl, "@")
	return ok && want == digest
}

// steering are variables that, added to a container, change which
// program its command runs or which certificates it trusts.
var steering = map[string]bool{"PATH": true, "LD_PRELOAD": true, "LD_LIBRARY_PATH": true, "SSL_CERT_FILE": true, "SSL_CERT_DIR": true}

// containerMismatch says how cs lacks want's container as the template
// describes it ("" when it has it; more variables, sources or mounts are
// allowed, but no variable in steering the template does not set).
func containerMismatch(cs []corev1.Container, want corev1.Container) string {
	for _, c := range cs {
		if c.Name != want.Name {
			continue
		}
		switch {
		case !sameImage(c.Image, want.Image):
			return fmt.Sprintf("container %q runs image %q, its template %q", c.Name, c.Image, want.Image)
		case !equality.Semantic.DeepEqual(c.Command, want.Command) || !equality.Semantic.DeepEqual(c.Args, want.Args) || c.WorkingDir != want.WorkingDir:
			return fmt.Sprintf("container %q runs another command, arguments or working directory than its template", c.Name)
		case !containsAll(c.Env, want.Env) || !containsAll(c.EnvFrom, want.EnvFrom) || !containsAll(c.VolumeMounts, want.VolumeMounts):
			return fmt.Sprintf("container %q lacks variables or mounts of its template", c.Name)
		}
		for _, e := range c.Env {
			if steering[e.Name] && !containsAll(want.Env, []corev1.EnvVar{e}) {
				return fmt.Sprintf("container %q sets %s, which its template does not", c.Name, e.Name)
			}
		}
		return ""
	}
	return fmt.Sprintf("it has no container %q", want.Name)
}

// containsAll says whether every element of want is in have.
func containsAll[T any](have, want []T) bool {
	for _, w := range want {
		found := false
		for _, h := range have {
			if equality.Semantic.DeepEqual(h, w) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}
