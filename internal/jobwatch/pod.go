package jobwatch

import (
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// runsJob says whether pod p is one of j's and runs what j's template
// says: what a function reads from a pod (its termination message, its
// progress) counts only then. A controller reference and the job-name
// label are no proof: whoever may create pods in the namespace can write
// both. So each container and init container of the template must be in
// the pod with the same image, command, arguments (a mover's carry the
// digest of its work spec), working directory and security context, with
// every environment variable, source and mount of the template's; each
// volume of the template must be the same volume; and the pod may not
// share a process, PID or IPC namespace the template does not. What
// admission adds to every pod (a sidecar, an injected variable or mount,
// an image digest, the default ServiceAccount) is allowed: it cannot
// change what the template's containers run. Admission that rewrites a
// mover's command or arguments, or its image to other content, makes its
// reports unreadable: the run ends without a report.
func runsJob(p *corev1.Pod, j *batchv1.Job) bool {
	if !metav1.IsControlledBy(p, j) {
		return false
	}
	t, s := &j.Spec.Template.Spec, &p.Spec
	if !sameBool(s.ShareProcessNamespace, t.ShareProcessNamespace) || (s.HostPID && !t.HostPID) || (s.HostIPC && !t.HostIPC) ||
		account(s.ServiceAccountName) != account(t.ServiceAccountName) {
		return false
	}
	for _, tc := range t.Containers {
		if !hasContainer(s.Containers, tc) {
			return false
		}
	}
	for _, tc := range t.InitContainers {
		if !hasContainer(s.InitContainers, tc) {
			return false
		}
	}
	for _, tv := range t.Volumes {
		ok := false
		for _, v := range s.Volumes {
			if v.Name == tv.Name {
				ok = equality.Semantic.DeepEqual(v.VolumeSource, tv.VolumeSource)
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
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

// hasContainer says whether cs has want's container as the template
// describes it (more variables, sources or mounts allowed).
func hasContainer(cs []corev1.Container, want corev1.Container) bool {
	for _, c := range cs {
		if c.Name != want.Name {
			continue
		}
		return sameImage(c.Image, want.Image) && equality.Semantic.DeepEqual(c.Command, want.Command) &&
			equality.Semantic.DeepEqual(c.Args, want.Args) && c.WorkingDir == want.WorkingDir &&
			equality.Semantic.DeepEqual(c.SecurityContext, want.SecurityContext) &&
			containsAll(c.Env, want.Env) && containsAll(c.EnvFrom, want.EnvFrom) && containsAll(c.VolumeMounts, want.VolumeMounts)
	}
	return false
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
