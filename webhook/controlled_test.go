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

	"github.com/snapflow/snapflow/internal/validate"
)

// Only snapflow's functions may mark a deletion as snapflow's own: a tenant
// setting pruned-by would slip its deletions past the mass-deletion breaker.
func TestControllerOwnedMetadataNeedsAController(t *testing.T) {
	const function = "system:serviceaccount:snapflow-system:snapflow-retention"
	h := &Handler{Kind: "Snapshot", Lookup: validate.NewObjects(), Controllers: map[string]bool{function: true}, Log: logr.Discard()}
	before := `{"apiVersion":"kopiur.home-operations.com/v1alpha1","kind":"Snapshot","metadata":{"name":"s","namespace":"billing"},"spec":{"policyRef":{"name":"p"}}}`
	marked := `{"apiVersion":"kopiur.home-operations.com/v1alpha1","kind":"Snapshot","metadata":{"name":"s","namespace":"billing","annotations":{"kopiur.home-operations.com/pruned-by":"retention"}},"spec":{"policyRef":{"name":"p"}}}`
	for _, tc := range []struct {
		name, user, subresource string
		allowed                 bool
	}{
		{"tenant", "alice", "", false},
		{"tenant's mover", "system:serviceaccount:billing:snapflow-mover", "", false},
		{"retention function", function, "", true},
		{"status write (metadata cannot change there)", "system:serviceaccount:billing:snapflow-mover", "status", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				UID: "u", Kind: metav1.GroupVersionKind{Group: "kopiur.home-operations.com", Version: "v1alpha1", Kind: "Snapshot"},
				Operation: admissionv1.Update, Namespace: "billing", Name: "s", SubResource: tc.subresource,
				UserInfo: authenticationv1.UserInfo{Username: tc.user},
				Object:   runtime.RawExtension{Raw: []byte(marked)}, OldObject: runtime.RawExtension{Raw: []byte(before)},
			}}
			resp := h.Handle(context.Background(), req)
			if resp.Allowed != tc.allowed {
				t.Fatalf("allowed = %v, want %v (%v)", resp.Allowed, tc.allowed, resp.Result)
			}
			if !tc.allowed && !strings.Contains(resp.Result.Message, "metadata.annotations[kopiur.home-operations.com/pruned-by]") {
				t.Fatalf("refusal does not name the annotation: %s", resp.Result.Message)
			}
		})
	}
}
