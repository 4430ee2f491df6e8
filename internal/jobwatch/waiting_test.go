package jobwatch

import (
	"context"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/snapflow/snapflow/internal/scheme"
)

// Waiting reports what the kubelet or the scheduler said about the Job's
// latest pending pod, only for pods the Job controls, and nothing for a
// pod that is merely being created.
func TestWaiting(t *testing.T) {
	at := time.Date(2026, 12, 5, 6, 0, 0, 0, time.UTC)
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "boot", UID: "job-uid"}}
	pod := func(name string, owned bool, created time.Time, st corev1.PodStatus) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name, Labels: map[string]string{"job-name": "boot", "app.kubernetes.io/managed-by": "snapflow"}, CreationTimestamp: metav1.NewTime(created)}, Status: st}
		if owned {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "boot", UID: "job-uid", Controller: ptrTo(true)}}
		}
		return p
	}
	waitingOn := func(reason, msg string) corev1.PodStatus {
		return corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: "mover",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}}}}
	}
	for _, tc := range []struct {
		name string
		pods []client.Object
		want string
	}{
		{"no pod", nil, ""},
		{"being created", []client.Object{pod("p", true, at, waitingOn("ContainerCreating", ""))}, ""},
		{"missing secret", []client.Object{pod("p", true, at, waitingOn("CreateContainerConfigError", `secret "pw" not found`))},
			`container mover: CreateContainerConfigError: secret "pw" not found`},
		{"unschedulable", []client.Object{pod("p", true, at, corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Message: "0/3 nodes are available"}}})},
			"0/3 nodes are available"},
		{"not the job's pod", []client.Object{pod("p", false, at, waitingOn("ErrImagePull", "forged"))}, ""},
		{"the latest pod counts", []client.Object{pod("old", true, at, waitingOn("ErrImagePull", "old")), pod("new", true, at.Add(time.Minute), waitingOn("ImagePullBackOff", "new"))},
			"container mover: ImagePullBackOff: new"},
		{"containers being created are not a problem", []client.Object{pod("p", true, at, corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, Message: "containers with unready status: [mover]"}}})}, ""},
		{"a running pod waits no more", []client.Object{pod("p", true, at, corev1.PodStatus{Phase: corev1.PodRunning})}, ""},
	} {
		c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(tc.pods...).Build()
		if got := Waiting(context.Background(), c, job); got != tc.want || (tc.want != "" && !strings.HasPrefix(got, tc.want)) {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}
func ptrTo[T any](v T) *T { return &v }
