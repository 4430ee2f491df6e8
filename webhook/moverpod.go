package webhook

import (
	"context"
	"encoding/json"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	snapadm "github.com/snapflow/snapflow/internal/admission"
)

// MoverPodPath admits pods labelled as snapflow's (the configuration's
// objectSelector sends only those).
const MoverPodPath = "/validate/mover-pod"

// MoverPods refuses pods that pose as a snapflow Job's pod unless the Job
// controller writes them; see admission.MoverPodProblem.
type MoverPods struct {
	// JobControllers are the identities the Job controller acts as.
	JobControllers map[string]bool
	Log            logr.Logger
}

var _ admission.Handler = (*MoverPods)(nil)

// Handle answers one AdmissionReview request.
func (m *MoverPods) Handle(_ context.Context, req admission.Request) admission.Response {
	start := time.Now()
	resp := m.handle(req)
	admissionTotal.WithLabelValues("Pod", operationLabel(string(req.Operation)), "validate", decisionOf(resp)).Inc()
	admissionSeconds.WithLabelValues("Pod", operationLabel(string(req.Operation)), "validate").Observe(time.Since(start).Seconds())
	if !resp.Allowed {
		m.Log.Info("denied", "kind", "Pod", "namespace", req.Namespace, "name", req.Name, "operation", req.Operation, "user", req.UserInfo.Username, "reason", resp.Result.Message)
	}
	return resp
}

func (m *MoverPods) handle(req admission.Request) admission.Response {
	if req.Kind.Kind != "Pod" || req.Kind.Group != "" {
		return admission.Denied("this endpoint admits Pods, not " + req.Kind.Kind + ": check the webhook configuration's rules")
	}
	// A status write can change labels (not owners); other subresources
	// can change neither.
	if (req.SubResource != "" && req.SubResource != "status") || (req.Operation != admissionv1.Create && req.Operation != admissionv1.Update) {
		return admission.Allowed("")
	}
	var pod corev1.Pod
	if err := json.Unmarshal(req.Object.Raw, &pod); err != nil {
		return admission.Denied("decode the pod: " + err.Error())
	}
	var old *corev1.Pod
	if req.Operation == admissionv1.Update {
		old = &corev1.Pod{}
		if err := json.Unmarshal(req.OldObject.Raw, old); err != nil {
			return admission.Denied("decode the pod's old version: " + err.Error())
		}
	}
	if why := snapadm.MoverPodProblem(req.UserInfo.Username, m.JobControllers, old, &pod); why != "" {
		return admission.Denied(why)
	}
	return admission.Allowed("")
}
