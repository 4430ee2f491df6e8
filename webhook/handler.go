// Package webhook is snapflow's admission server: mutating and validating
// endpoints for the seven kinds, with self-managed TLS, health endpoints and
// Prometheus metrics. The decisions themselves live in internal/admission.
package webhook

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	snapadm "github.com/snapflow/snapflow/internal/admission"
	"github.com/snapflow/snapflow/internal/validate"
)

// Paths of the admission endpoints, one pair per kind.
func MutatePath(kind string) string   { return "/mutate/" + strings.ToLower(kind) }
func ValidatePath(kind string) string { return "/validate/" + strings.ToLower(kind) }

// Handler admits one kind, either mutating or validating.
type Handler struct {
	Kind   string
	Mutate bool
	Lookup validate.Lookup
	// VolumePolicies resolves the volume policies stamped on new Snapshots; nil skips it.
	VolumePolicies snapadm.VolumePolicies
	// Controllers are the users (snapflow's functions) that may write the
	// controller-owned labels and annotations; everyone else is refused.
	Controllers map[string]bool
	Log         logr.Logger
}

var _ admission.Handler = (*Handler)(nil)

// Handle answers one AdmissionReview request.
func (h *Handler) Handle(ctx context.Context, req admission.Request) admission.Response {
	start := time.Now()
	resp := h.handle(ctx, req)
	observe(h.Kind, string(req.Operation), h.mode(), decisionOf(resp), time.Since(start))
	if !resp.Allowed {
		h.Log.Info("denied", "kind", h.Kind, "namespace", req.Namespace, "name", req.Name, "operation", req.Operation, "reason", resp.Result.Message)
	}
	return resp
}

// decisionOf labels a response for the admission metrics.
func decisionOf(resp admission.Response) string {
	switch {
	case !resp.Allowed:
		return "denied"
	case len(resp.Patches) > 0:
		return "mutated"
	}
	return "allowed"
}

func (h *Handler) mode() string {
	if h.Mutate {
		return "mutate"
	}
	return "validate"
}

func (h *Handler) handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Kind.Kind != h.Kind {
		return admission.Denied("this endpoint admits " + h.Kind + ", not " + req.Kind.Kind + ": check the webhook configuration's rules")
	}
	var op snapadm.Operation
	switch req.Operation {
	case admissionv1.Create:
		op = snapadm.Create
	case admissionv1.Update:
		op = snapadm.Update
	case admissionv1.Delete:
		// Deletions are only warned about, never refused (the webhook
		// entry for them fails open too).
		if h.Mutate || len(req.OldObject.Raw) == 0 {
			return admission.Allowed("")
		}
		old, err := snapadm.Decode(h.Kind, req.OldObject.Raw)
		if err != nil {
			return admission.Allowed("")
		}
		return admission.Allowed("").WithWarnings(snapadm.WarnDelete(ctx, h.Lookup, old)...)
	default:
		return admission.Allowed("")
	}
	obj, err := snapadm.Decode(h.Kind, req.Object.Raw)
	if err != nil {
		// Fail closed: an object snapflow cannot read is never let through.
		return admission.Denied(err.Error())
	}
	var old snapadm.Object
	if op == snapadm.Update && len(req.OldObject.Raw) > 0 {
		if o, err := snapadm.Decode(h.Kind, req.OldObject.Raw); err == nil {
			old = o
		}
	}
	if h.Mutate {
		patches, warnings, err := snapadm.Mutate(ctx, h.Lookup, h.VolumePolicies, op, obj,
			&snapadm.Requester{User: authorOf(req), Controller: h.Controllers[req.UserInfo.Username], Old: old})
		if err != nil {
			return admission.Denied(err.Error())
		}
		if len(patches) == 0 {
			return admission.Allowed("").WithWarnings(warnings...)
		}
		return admission.Patched("", patches...).WithWarnings(warnings...)
	}
	r := snapadm.Validate(ctx, h.Lookup, op, obj, old)
	// A subresource write cannot change metadata, so only the object itself
	// is checked for controller-owned keys.
	if req.SubResource == "" && !h.Controllers[req.UserInfo.Username] {
		r.Merge(controllerMetadata(req))
	}
	if p, ok := obj.(*snapv1.SnapshotPolicy); ok && req.SubResource == "" {
		was, _ := old.(*snapv1.SnapshotPolicy)
		r.Merge(validate.HooksAuthorProblem(was, p, authorOf(req), h.Controllers[req.UserInfo.Username]))
	}
	if rs, ok := obj.(*snapv1.Restore); ok && req.SubResource == "" {
		was, _ := old.(*snapv1.Restore)
		r.Merge(validate.RestoreAuthorProblem(was, rs, authorOf(req), h.Controllers[req.UserInfo.Username]))
	}
	if r.OK() {
		return admission.Allowed("").WithWarnings(r.Warnings...)
	}
	return denied(r)
}

// authorOf is the requester as a hooks author.
func authorOf(req admission.Request) validate.HooksAuthor {
	u := req.UserInfo
	return validate.HooksAuthor{Username: u.Username, UID: u.UID, Groups: u.Groups}
}

// controllerMetadata checks the controller-owned keys of a request. Only
// metadata is decoded, leniently: an old object the current types cannot
// read still has labels to compare.
func controllerMetadata(req admission.Request) validate.Result {
	var obj, old metav1.PartialObjectMetadata
	if err := json.Unmarshal(req.Object.Raw, &obj); err != nil {
		return validate.Result{} // the strict decode has refused it already
	}
	if len(req.OldObject.Raw) == 0 {
		return validate.ControllerMetadata(nil, &obj)
	}
	if err := json.Unmarshal(req.OldObject.Raw, &old); err != nil {
		return validate.ControllerMetadata(nil, &obj)
	}
	return validate.ControllerMetadata(&old, &obj)
}

// denied puts every problem in the message kubectl shows, and as structured
// causes for tools that read them.
func denied(r validate.Result) admission.Response {
	problems := r.Problems()
	msg := problems[0]
	if len(problems) > 1 {
		msg = "found " + strconv.Itoa(len(problems)) + " problems:\n- " + strings.Join(problems, "\n- ")
	}
	resp := admission.Denied(msg).WithWarnings(r.Warnings...)
	resp.Result.Code = http.StatusUnprocessableEntity
	resp.Result.Reason = metav1.StatusReasonInvalid
	causes := make([]metav1.StatusCause, 0, len(problems))
	for _, e := range r.Errs.WrappedErrors() {
		for _, p := range e.Paths {
			causes = append(causes, metav1.StatusCause{Type: metav1.CauseTypeFieldValueInvalid, Field: p, Message: e.Message})
		}
	}
	resp.Result.Details = &metav1.StatusDetails{Causes: causes}
	return resp
}
