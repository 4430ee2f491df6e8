package webhook

import (
	"context"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/internal/validate"
)

// Deleting a repository a run still uses is allowed with a warning; every
// other deletion, and anything the webhook cannot read, is just allowed.
func TestRepositoryDeletionIsWarnedAboutNeverRefused(t *testing.T) {
	objs := validate.NewObjects()
	run := &snapv1.Snapshot{ObjectMeta: metav1.ObjectMeta{Namespace: "billing", Name: "nightly"}, Spec: snapv1.SnapshotSpec{Repository: &snapv1.RepositoryRef{Name: "nas"}}}
	run.Status.Phase = snapv1.SnapshotRunning
	objs.Add(run)
	repo := `{"apiVersion":"kopiur.home-operations.com/v1alpha1","kind":"Repository","metadata":{"name":"nas","namespace":"billing"},"spec":{}}`
	request := func(kind, old string) admission.Request {
		return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			UID: "u", Kind: metav1.GroupVersionKind{Group: "kopiur.home-operations.com", Version: "v1alpha1", Kind: kind},
			Operation: admissionv1.Delete, Namespace: "billing", Name: "nas", OldObject: runtime.RawExtension{Raw: []byte(old)},
		}}
	}
	validating := &Handler{Kind: "Repository", Lookup: objs, Log: logr.Discard()}
	resp := validating.Handle(context.Background(), request("Repository", repo))
	if !resp.Allowed || len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], "Snapshot billing/nightly") {
		t.Fatalf("allowed %v, warnings %q: want allowed with the run named", resp.Allowed, resp.Warnings)
	}
	for name, tc := range map[string]struct {
		h   *Handler
		old string
	}{
		"mutating endpoint": {&Handler{Kind: "Repository", Mutate: true, Lookup: objs, Log: logr.Discard()}, repo},
		"unreadable object": {validating, `{"spec":`},
		"no old object":     {validating, ``},
		"another kind":      {&Handler{Kind: "Snapshot", Lookup: objs, Log: logr.Discard()}, `{"apiVersion":"kopiur.home-operations.com/v1alpha1","kind":"Snapshot","metadata":{"name":"nightly","namespace":"billing"}}`},
	} {
		kind := tc.h.Kind
		resp := tc.h.Handle(context.Background(), request(kind, tc.old))
		if !resp.Allowed || len(resp.Warnings) != 0 {
			t.Errorf("%s: allowed %v, warnings %q; want allowed without warnings", name, resp.Allowed, resp.Warnings)
		}
	}
}
