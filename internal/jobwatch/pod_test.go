package jobwatch

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A pod's termination message counts only when the pod runs the Job's
// template: what admission adds is allowed, a pod that runs something
// else under the Job's controller reference is not.
func TestRunsJob(t *testing.T) {
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "snap", UID: "job-uid"},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app.kubernetes.io/managed-by": "snapflow", "snapflow.dev/op": "snapshot"}}, Spec: corev1.PodSpec{
			ServiceAccountName: "snapflow-mover",
			InitContainers:     []corev1.Container{{Name: "prime", Image: "snapflow:1", Args: []string{"prime"}}},
			Containers: []corev1.Container{{Name: "mover", Image: "snapflow:1", Command: []string{"snapflow"}, Args: []string{"mover", "--work-digest", "abc"},
				Env:          []corev1.EnvVar{{Name: "KOPIA_PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "pw"}, Key: "password"}}}},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data", ReadOnly: true}}}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "app-data", ReadOnly: true}}}},
		}}}}
	yes := true
	for _, tc := range []struct {
		name   string
		change func(*corev1.Pod)
		want   bool
	}{
		{"made from the template", func(*corev1.Pod) {}, true},
		{"with an injected sidecar, variable and mount", func(p *corev1.Pod) {
			p.Spec.Containers[0].Env = append(p.Spec.Containers[0].Env, corev1.EnvVar{Name: "DD_AGENT_HOST", Value: "10.0.0.1"})
			p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "apm", MountPath: "/var/run/datadog"})
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "istio-proxy", Image: "proxy"})
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "apm"})
		}, true},
		{"the image pinned to a digest by a policy engine", func(p *corev1.Pod) { p.Spec.Containers[0].Image = "snapflow:1@sha256:aa" }, true},
		{"no controller reference", func(p *corev1.Pod) { p.OwnerReferences = nil }, false},
		{"with a label admission added", func(p *corev1.Pod) { p.Labels["team"] = "storage" }, true},
		{"without snapflow's label, which only the Job controller may write", func(p *corev1.Pod) { delete(p.Labels, "app.kubernetes.io/managed-by") }, false},
		{"without a label of its template", func(p *corev1.Pod) { delete(p.Labels, "snapflow.dev/op") }, false},
		{"with another value of a template label", func(p *corev1.Pod) { p.Labels["snapflow.dev/op"] = "delete" }, false},
		{"another image pinned to a digest", func(p *corev1.Pod) { p.Spec.Containers[0].Image = "evil:1@sha256:aa" }, false},
		{"another image", func(p *corev1.Pod) { p.Spec.Containers[0].Image = "busybox" }, false},
		{"other arguments", func(p *corev1.Pod) { p.Spec.Containers[0].Args = []string{"sh", "-c", "echo deleted"} }, false},
		{"a command override", func(p *corev1.Pod) { p.Spec.Containers[0].Command = []string{"sh"} }, false},
		{"the password from elsewhere", func(p *corev1.Pod) { p.Spec.Containers[0].Env = nil }, false},
		{"the volume mounted elsewhere", func(p *corev1.Pod) { p.Spec.Containers[0].VolumeMounts[0].MountPath = "/other" }, false},
		{"another claim under the volume's name", func(p *corev1.Pod) { p.Spec.Volumes[0].PersistentVolumeClaim.ClaimName = "decoy" }, false},
		{"no mover container", func(p *corev1.Pod) { p.Spec.Containers[0].Name = "other" }, false},
		{"a changed init container", func(p *corev1.Pod) { p.Spec.InitContainers[0].Args = []string{"tamper"} }, false},
		{"a shared process namespace", func(p *corev1.Pod) { p.Spec.ShareProcessNamespace = &yes }, false},
		{"the host's PID namespace", func(p *corev1.Pod) { p.Spec.HostPID = true }, false},
		{"another service account", func(p *corev1.Pod) { p.Spec.ServiceAccountName = "powerful" }, false},
		{"a security context admission filled in", func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{RunAsUser: ptr(int64(1000680000))}
		}, true},
		{"an injected proxy", func(p *corev1.Pod) {
			p.Spec.Containers[0].Env = append(p.Spec.Containers[0].Env, corev1.EnvVar{Name: "HTTPS_PROXY", Value: "http://proxy:3128"})
		}, true},
		{"a PATH that finds another program", func(p *corev1.Pod) {
			p.Spec.Containers[0].Env = append(p.Spec.Containers[0].Env, corev1.EnvVar{Name: "PATH", Value: "/tmp"})
		}, false},
		{"another CA file", func(p *corev1.Pod) {
			p.Spec.Containers[0].Env = append(p.Spec.Containers[0].Env, corev1.EnvVar{Name: "SSL_CERT_FILE", Value: "/tmp/ca.pem"})
		}, false},
		{"a debugger attached", func(p *corev1.Pod) {
			p.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debugger", Image: "busybox"}, TargetContainerName: "mover"}}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "snap-x", Labels: map[string]string{"job-name": "snap", "app.kubernetes.io/managed-by": "snapflow", "snapflow.dev/op": "snapshot"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "snap", UID: "job-uid", Controller: &yes}}},
				Spec: *job.Spec.Template.Spec.DeepCopy()}
			tc.change(p)
			if got := runsJob(p, job); got != tc.want {
				t.Errorf("runsJob = %v, want %v", got, tc.want)
			}
		})
	}
	// Admission puts the default ServiceAccount on a pod whose template
	// names none.
	bare := job.DeepCopy()
	bare.Spec.Template.Spec.ServiceAccountName = ""
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: bare.Spec.Template.Labels, OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "snap", UID: "job-uid", Controller: &yes}}},
		Spec: *bare.Spec.Template.Spec.DeepCopy()}
	p.Spec.ServiceAccountName = "default"
	if !runsJob(p, bare) {
		t.Error("a pod given the default ServiceAccount does not run its template")
	}
	for _, tc := range []struct {
		pod, tmpl string
		want      bool
	}{
		{"reg/snapflow@sha256:bb", "reg/snapflow@sha256:bb", true},
		{"mirror.local/snapflow:1@sha256:bb", "reg/snapflow:1@sha256:bb", true},
		{"mirror.local/snapflow:1@sha256:cc", "reg/snapflow:1@sha256:bb", false},
		{"reg/snapflow:1", "reg/snapflow:1@sha256:bb", false},
		{"reg/snapflow:2@sha256:bb", "reg/snapflow:1", false},
	} {
		if got := sameImage(tc.pod, tc.tmpl); got != tc.want {
			t.Errorf("sameImage(%q, %q) = %v, want %v", tc.pod, tc.tmpl, got, tc.want)
		}
	}
}
