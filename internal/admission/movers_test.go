package admission

import (
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestMoverPodProblem(t *testing.T) {
	controllers := map[string]bool{DefaultJobControllers[0]: true, DefaultJobControllers[1]: true}
	const tenant = "system:serviceaccount:app:deployer"
	yes := true
	jobNamed := func(name, uid string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: name, UID: types.UID(uid), Controller: &yes}}
	}
	job := func(uid string) []metav1.OwnerReference { return jobNamed("snap-abc", uid) }
	pod := func(labels map[string]string, owners []metav1.OwnerReference) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "p", Labels: labels, OwnerReferences: owners}}
	}
	ours := map[string]string{"app.kubernetes.io/managed-by": "snapflow", "job-name": "snap-abc", "batch.kubernetes.io/job-name": "snap-abc", "controller-uid": "u1"}
	with := func(m map[string]string, k, v string) map[string]string {
		out := map[string]string{}
		for a, b := range m {
			out[a] = b
		}
		if v == "" {
			delete(out, k)
		} else {
			out[k] = v
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		user     string
		old, pod *corev1.Pod
		want     string // a substring of the problem, "" when allowed
	}{
		{"the Job controller creates a mover pod", DefaultJobControllers[0], nil, pod(ours, job("u1")), ""},
		{"the controller manager's own user creates one", DefaultJobControllers[1], nil, pod(ours, job("u1")), ""},
		{"a tenant creates a pod claiming a mover Job", tenant, nil, pod(ours, job("u1")), "metadata.labels: " + tenant + " may not create"},
		{"a tenant creates a labelled pod with no owner", tenant, nil, pod(ours, nil), "may not create"},
		{"a tenant creates an unlabelled pod", tenant, nil, pod(with(ours, "app.kubernetes.io/managed-by", ""), job("u1")), ""},
		{"another tool's managed-by value is not snapflow's", tenant, nil, pod(with(ours, "app.kubernetes.io/managed-by", "Helm"), job("u1")), ""},
		{"a tenant adds snapflow's label to its pod", tenant, pod(with(ours, "app.kubernetes.io/managed-by", ""), job("u1")), pod(ours, job("u1")),
			"metadata.labels[app.kubernetes.io/managed-by]"},
		{"a tenant points a mover pod at another Job", tenant, pod(ours, job("u1")),
			pod(with(with(with(ours, "job-name", "snap-other"), "batch.kubernetes.io/job-name", "snap-other"), "controller-uid", "u2"), jobNamed("snap-other", "u2")),
			"metadata.labels[batch.kubernetes.io/job-name]: " + tenant + " may not set"},
		{"a tenant adds a controller-uid label", tenant, pod(ours, job("u1")), pod(with(ours, "batch.kubernetes.io/controller-uid", "u1"), job("u1")), "metadata.labels[batch.kubernetes.io/controller-uid]: " + tenant},
		{"a tenant relabels a mover pod for another Job", tenant, pod(ours, job("u1")), pod(with(ours, "job-name", "snap-other"), job("u1")),
			`metadata.labels[job-name]: a pod labelled app.kubernetes.io/managed-by=snapflow names "snap-other", but its controller is Job snap-abc (uid u1)`},
		// The Job controller makes pods from any Job's template: one whose
		// template copies the labels of snapflow's Job gets a pod whose
		// labels name another Job than its controller.
		{"the Job controller makes a pod of a Job that copies snapflow's labels", DefaultJobControllers[0], nil, pod(ours, jobNamed("tenant-job", "u9")),
			`metadata.labels[batch.kubernetes.io/job-name]: a pod labelled app.kubernetes.io/managed-by=snapflow names "snap-abc", but its controller is Job tenant-job (uid u9)`},
		{"the Job controller makes a pod of a Job with a manual selector", DefaultJobControllers[0], nil,
			pod(with(with(ours, "controller-uid", ""), "batch.kubernetes.io/controller-uid", ""), job("u1")), "carries neither batch.kubernetes.io/controller-uid nor controller-uid"},
		{"another controller's pod labelled as snapflow's", DefaultJobControllers[1], nil,
			pod(ours, []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "snap-abc", UID: "u1", Controller: &yes}}), "is controlled by ReplicaSet snap-abc, not by a Job"},
		{"a tenant gives a labelled orphan a controller", tenant, pod(ours, nil), pod(ours, job("u1")), "metadata.ownerReferences: " + tenant + " may not make Job snap-abc"},
		{"a tenant swaps the controller", tenant, pod(ours, job("u1")), pod(ours, job("u2")), `names "u1", but its controller is Job snap-abc (uid u2)`},
		{"a tenant annotates a mover pod", tenant, pod(ours, job("u1")), func() *corev1.Pod { p := pod(ours, job("u1")); p.Annotations = map[string]string{"a": "b"}; return p }(), ""},
		{"the garbage collector drops the owner", "system:serviceaccount:kube-system:generic-garbage-collector", pod(ours, job("u1")), pod(ours, nil), ""},
		{"a tenant removes snapflow's label", tenant, pod(ours, job("u1")), pod(with(ours, "app.kubernetes.io/managed-by", ""), job("u1")), ""},
		{"the Job controller updates its pod", DefaultJobControllers[0], pod(ours, nil), pod(ours, job("u1")), ""},
		{"a tenant swaps a running mover's image", tenant, func() *corev1.Pod {
			p := pod(ours, job("u1"))
			p.Spec.Containers = []corev1.Container{{Name: "mover", Image: "snapflow:1"}}
			return p
		}(), func() *corev1.Pod {
			p := pod(ours, job("u1"))
			p.Spec.Containers = []corev1.Container{{Name: "mover", Image: "snapflow:1@sha256:old"}}
			return p
		}(), "spec.containers[mover].image: " + tenant + " may not change"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := MoverPodProblem(tc.user, controllers, tc.old, tc.pod)
			switch {
			case tc.want == "" && got != "":
				t.Fatalf("refused: %s", got)
			case tc.want != "" && !strings.Contains(got, tc.want):
				t.Fatalf("problem %q, want it to contain %q", got, tc.want)
			case strings.Contains(tc.want, " may not ") && !strings.Contains(got, "only the Job controller ("+DefaultJobControllers[1]+", "+DefaultJobControllers[0]+") may"):
				t.Fatalf("problem %q does not say who may", got)
			}
		})
	}
}

func TestMoverJobProblem(t *testing.T) {
	const function = "system:serviceaccount:snapflow-system:snapflow-snapshot"
	const tenant = "system:serviceaccount:app:deployer"
	controllers := map[string]bool{function: true}
	job := func(managedBy string) *batchv1.Job {
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "snap-abc"}}
		if managedBy != "" {
			j.Labels = map[string]string{"app.kubernetes.io/managed-by": managedBy}
		}
		return j
	}
	for _, tc := range []struct {
		name     string
		user     string
		old, job *batchv1.Job
		want     string
	}{
		{"a function creates a mover Job", function, nil, job("snapflow"), ""},
		{"a tenant creates a Job under a mover's name with snapflow's label", tenant, nil, job("snapflow"), "metadata.labels: " + tenant + " may not create a Job labelled app.kubernetes.io/managed-by=snapflow"},
		{"a tenant creates its own Job", tenant, nil, job(""), ""},
		{"a tenant's Job managed by another tool", tenant, nil, job("Helm"), ""},
		{"a tenant labels its Job as snapflow's", tenant, job(""), job("snapflow"), "metadata.labels[app.kubernetes.io/managed-by]: " + tenant + " may not label a Job snapflow"},
		{"a tenant annotates a mover Job", tenant, job("snapflow"), job("snapflow"), ""},
		{"a tenant removes the label", tenant, job("snapflow"), job(""), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := MoverJobProblem(tc.user, controllers, tc.old, tc.job)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("problem %q, want %q", got, tc.want)
			}
			if got != "" && !strings.Contains(got, "only snapflow's functions") {
				t.Fatalf("problem %q does not say who may", got)
			}
		})
	}
}
