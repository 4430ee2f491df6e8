package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	snapadm "github.com/snapflow/snapflow/internal/admission"
)

// Paths of the mover admission endpoints; the configurations'
// objectSelector sends only objects labelled as snapflow's.
const (
	MoverPodPath = "/validate/mover-pod"
	MoverJobPath = "/validate/mover-job"
)

// Movers refuses Jobs and pods that pose as snapflow's movers unless
// snapflow's functions (Jobs) or the Job controller (pods) write them; see
// admission.MoverJobProblem and admission.MoverPodProblem.
type Movers struct {
	// JobControllers are the identities the Job controller acts as.
	JobControllers map[string]bool
	// Controllers are snapflow's functions.
	Controllers map[string]bool
	Log         logr.Logger
}

var _ admission.Handler = (*Movers)(nil)

// Handle answers one AdmissionReview request.
func (m *Movers) Handle(_ context.Context, req admission.Request) admission.Response {
	start := time.Now()
	resp := m.handle(req)
	admissionTotal.WithLabelValues(req.Kind.Kind, operationLabel(string(req.Operation)), "validate", decisionOf(resp)).Inc()
	admissionSeconds.WithLabelValues(req.Kind.Kind, operationLabel(string(req.Operation)), "validate").Observe(time.Since(start).Seconds())
	if !resp.Allowed {
		m.Log.Info("denied", "kind", req.Kind.Kind, "namespace", req.Namespace, "name", req.Name, "operation", req.Operation, "user", req.UserInfo.Username, "reason", resp.Result.Message)
	}
	return resp
}

func (m *Movers) handle(req admission.Request) admission.Response {
	// A status write can change labels (not owners or the spec); other
	// subresources can change neither.
	if (req.SubResource != "" && req.SubResource != "status") || (req.Operation != admissionv1.Create && req.Operation != admissionv1.Update) {
		return admission.Allowed("")
	}
	switch {
	case req.Kind.Group == "" && req.Kind.Kind == "Pod":
		pod, old, err := decodePair[corev1.Pod](req)
		if err != nil {
			return admission.Denied(err.Error())
		}
		if why := snapadm.MoverPodProblem(req.UserInfo.Username, m.JobControllers, old, pod); why != "" {
			return admission.Denied(why)
		}
	case req.Kind.Group == "batch" && req.Kind.Kind == "Job":
		job, old, err := decodePair[batchv1.Job](req)
		if err != nil {
			return admission.Denied(err.Error())
		}
		if why := snapadm.MoverJobProblem(req.UserInfo.Username, m.Controllers, old, job); why != "" {
			return admission.Denied(why)
		}
	default:
		return admission.Denied("this endpoint admits Pods and Jobs, not " + req.Kind.Kind + ": check the webhook configuration's rules")
	}
	return admission.Allowed("")
}

// decodePair decodes a request's object and, on update, its old version
// (nil on create); an object snapflow cannot read is refused.
func decodePair[T any](req admission.Request) (obj, old *T, err error) {
	obj = new(T)
	if err := json.Unmarshal(req.Object.Raw, obj); err != nil {
		return nil, nil, fmt.Errorf("decode the %s: %w", strings.ToLower(req.Kind.Kind), err)
	}
	if req.Operation == admissionv1.Update {
		old = new(T)
		if err := json.Unmarshal(req.OldObject.Raw, old); err != nil {
			return nil, nil, fmt.Errorf("decode the %s's old version: %w", strings.ToLower(req.Kind.Kind), err)
		}
	}
	return obj, old, nil
}
