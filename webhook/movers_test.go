package webhook

import (
	"context"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// The mover-pod endpoint decodes both versions of a pod, leaves
// subresources and deletions alone, and fails closed on what it cannot
// read.
func TestMoversEndpoint(t *testing.T) {
	const jc = "system:serviceaccount:kube-system:job-controller"
	const function = "system:serviceaccount:snapflow-system:snapflow-snapshot"
	m := &Movers{JobControllers: map[string]bool{jc: true}, Controllers: map[string]bool{function: true}, Log: logr.Discard()}
	moverJob := `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"snap-abc","namespace":"app","labels":{"app.kubernetes.io/managed-by":"snapflow"}}}`
	plainJob := `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"snap-abc","namespace":"app"}}`
	job := metav1.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"}
	mover := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"app","labels":{"app.kubernetes.io/managed-by":"snapflow","job-name":"snap"}}}`
	plain := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"app","labels":{"job-name":"snap"}}}`
	pod := metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}
	for _, tc := range []struct {
		name        string
		kind        metav1.GroupVersionKind
		op          admissionv1.Operation
		user, sub   string
		obj, old    string
		allowed     bool
		wantMessage string
	}{
		{"the Job controller creates a mover pod", pod, admissionv1.Create, jc, "", mover, "", true, ""},
		{"a tenant creates one", pod, admissionv1.Create, "alice", "", mover, "", false, "metadata.labels: alice may not create"},
		{"a tenant labels its pod as snapflow's", pod, admissionv1.Update, "alice", "", mover, plain, false, "metadata.labels[app.kubernetes.io/managed-by]"},
		{"the kubelet writes status", pod, admissionv1.Update, "system:node:n1", "status", mover, mover, true, ""},
		{"a tenant relabels through the status subresource", pod, admissionv1.Update, "alice", "status", mover, plain, false, "metadata.labels[app.kubernetes.io/managed-by]"},
		{"an ephemeral container is attached", pod, admissionv1.Update, "alice", "ephemeralcontainers", mover, plain, true, ""},
		{"a deletion", pod, admissionv1.Delete, "alice", "", "", mover, true, ""},
		{"an unreadable pod", pod, admissionv1.Create, "alice", "", `{"metadata":`, "", false, "decode the pod"},
		{"a function creates a mover Job", job, admissionv1.Create, function, "", moverJob, "", true, ""},
		{"a tenant creates a Job under a mover's name", job, admissionv1.Create, "alice", "", moverJob, "", false, "metadata.labels: alice may not create a Job labelled"},
		{"the Job controller is no function", job, admissionv1.Create, jc, "", moverJob, "", false, "may not create a Job"},
		{"a tenant labels its Job through the status subresource", job, admissionv1.Update, "alice", "status", moverJob, plainJob, false, "metadata.labels[app.kubernetes.io/managed-by]"},
		{"another kind sent by a misconfigured rule", metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, admissionv1.Create, "alice", "", mover, "", false, "admits Pods and Jobs, not Deployment"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				UID: "u", Kind: tc.kind, Operation: tc.op, Namespace: "app", Name: "p", SubResource: tc.sub,
				UserInfo: authenticationv1.UserInfo{Username: tc.user},
				Object:   runtime.RawExtension{Raw: []byte(tc.obj)}, OldObject: runtime.RawExtension{Raw: []byte(tc.old)},
			}}
			resp := m.Handle(context.Background(), req)
			if resp.Allowed != tc.allowed {
				t.Fatalf("allowed = %v, want %v (%v)", resp.Allowed, tc.allowed, resp.Result)
			}
			if !tc.allowed && !strings.Contains(resp.Result.Message, tc.wantMessage) {
				t.Fatalf("refusal %q does not say %q", resp.Result.Message, tc.wantMessage)
			}
		})
	}
}
