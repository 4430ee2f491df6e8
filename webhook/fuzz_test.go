package webhook

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/snapflow/snapflow/internal/admission"
	"github.com/snapflow/snapflow/internal/validate"
)

func review(kind, op, object string) []byte {
	return []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"0c1d","kind":{"group":"kopiur.home-operations.com","version":"v1alpha1","kind":"` + kind +
		`"},"resource":{"group":"kopiur.home-operations.com","version":"v1alpha1","resource":"x"},"operation":"` + op + `","namespace":"billing","name":"n","object":` + object + `}}`)
}

// FuzzAdmissionReview feeds arbitrary bodies to every admission endpoint:
// whatever arrives, the answer is a well-formed AdmissionReview that echoes
// the request's uid, and a denial always says why.
func FuzzAdmissionReview(f *testing.F) {
	f.Add(review("SnapshotPolicy", "CREATE", `{"metadata":{"name":"p","namespace":"billing"},"spec":{"repository":{"name":"nas"},"sources":[{"pvc":{"name":"d"}}]}}`))
	f.Add(review("SnapshotPolicy", "UPDATE", `{"spec":{"retention":{},"sources":[{"nfs":{"path":"x"}}],"hooks":{"beforeSnapshot":[{"runJob":{"jobSpec":{"template":{"spec":{"bogus":1}}}}}]}}}`))
	f.Add(review("Snapshot", "CREATE", `{"metadata":{"labels":{"kopiur.home-operations.com/origin":"discovered"}},"spec":{"policyRef":{"name":"p"},"tags":{"a:b":"c"}}}`))
	f.Add(review("SnapshotSchedule", "CREATE", `{"spec":{"policyRef":{"name":"p"},"schedule":{"cron":"H H(0-5)/2 * * MON-FRI","jitter":"90000h"}}}`))
	f.Add(review("Restore", "CREATE", `{"spec":{"source":{"identity":{"username":"u","hostname":"h","asOf":"x"}},"target":{}}}`))
	f.Add(review("Repository", "UPDATE", `{"spec":{"backend":{"s3":{"bucket":"B"}},"identityDefaults":{"hostnameExpr":"namespace +"}}}`))
	f.Add(review("ClusterRepository", "CREATE", `{"spec":{"allowedNamespaces":{"all":false}}}`))
	f.Add(review("Snapshot", "DELETE", `null`))
	f.Add([]byte(`{"request":{}}`))
	f.Add([]byte(`not json`))
	f.Add([]byte(``))

	handlers := map[string]http.Handler{}
	for _, kind := range admission.Kinds {
		for _, mutate := range []bool{true, false} {
			h := &Handler{Kind: kind, Mutate: mutate, Lookup: validate.NewObjects(), Log: logr.Discard()}
			handlers[kind+"/"+h.mode()] = LimitBody(&crwebhook.Admission{Handler: h}, DefaultMaxRequestBytes)
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		// Only a body that decodes as a review has a uid to echo.
		var in admissionv1.AdmissionReview
		if json.Unmarshal(body, &in) != nil {
			in.Request = nil
		}
		for name, h := range handlers {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK {
				t.Fatalf("%s: HTTP %d", name, rec.Code)
			}
			var out admissionv1.AdmissionReview
			if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
				t.Fatalf("%s: not an AdmissionReview (%v): %s", name, err, rec.Body.String())
			}
			if in.Request != nil && out.Response.UID != in.Request.UID {
				t.Fatalf("%s: uid %q, want %q", name, out.Response.UID, in.Request.UID)
			}
			if !out.Response.Allowed && (out.Response.Result == nil || out.Response.Result.Message == "") {
				t.Fatalf("%s: denied without a reason: %s", name, rec.Body.String())
			}
		}
	})
}
