package webhook

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/policysource"
	"github.com/snapflow/snapflow/internal/volumepolicy"
)

func veleroRequest(t *testing.T, meta string) admission.Request {
	t.Helper()
	raw := []byte(`{"apiVersion":"velero.io/v1","kind":"Backup","metadata":` + meta + `,"spec":{"includedNamespaces":["billing"]}}`)
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{UID: types.UID("req-1"), Operation: admissionv1.Create, Namespace: "velero", Object: runtime.RawExtension{Raw: raw}}}
}

func patchedAnnotations(t *testing.T, resp admission.Response) (map[string]string, string) {
	t.Helper()
	ann := map[string]string{}
	policy := ""
	for _, p := range resp.Patches {
		switch {
		case p.Path == "/spec/resourcePolicy":
			b, _ := json.Marshal(p.Value)
			var rp struct{ Name string }
			_ = json.Unmarshal(b, &rp)
			policy = rp.Name
		case p.Path == "/metadata/annotations":
			b, _ := json.Marshal(p.Value)
			_ = json.Unmarshal(b, &ann)
		case strings.HasPrefix(p.Path, "/metadata/annotations/"):
			key := strings.ReplaceAll(strings.ReplaceAll(strings.TrimPrefix(p.Path, "/metadata/annotations/"), "~1", "/"), "~0", "~")
			ann[key], _ = p.Value.(string)
		}
	}
	return ann, policy
}

// A Backup whose policies cannot be merged is created anyway and fails
// Velero's validation with the reason, as Velero's design has it; long and
// generated names are admitted.
func TestVeleroBackupsFailValidationInsteadOfBeingRefused(t *testing.T) {
	global := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "snapflow-system", Name: "global"},
		Data: map[string]string{"policies.yaml": "version: v1\nvolumePolicies: [{conditions: {storageClass: [gp2]}, action: {type: skip}}]\n"}}
	long := strings.Repeat("b", 200)
	tests := []struct {
		name      string
		objects   []client.Object
		meta      string
		wantCM    string
		wantError string // in the annotation and the failure document; "" when merged
		wantLabel string
	}{
		{name: "merged", objects: []client.Object{global}, meta: `{"name":"nightly"}`, wantCM: "snapflow-vp-nightly", wantLabel: "nightly"},
		{name: "a name too long for a label value", objects: []client.Object{global}, meta: `{"name":"` + long + `"}`, wantCM: MergedConfigMapName(long), wantLabel: ""},
		{name: "generateName", objects: []client.Object{global}, meta: `{"generateName":"nightly-"}`, wantCM: "snapflow-vp-nightly-", wantLabel: ""},
		{name: "the global ConfigMap is missing", meta: `{"name":"nightly"}`, wantCM: "snapflow-vp-nightly", wantLabel: "nightly",
			wantError: "global backup volume policies ConfigMap snapflow-system/global does not exist"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithObjects(tc.objects...).Build()
			v := &VeleroBackups{Client: c, Policies: &policysource.Resolver{Reader: c, Namespace: "snapflow-system", GlobalName: "global"}, Log: logr.Discard()}
			resp := v.Handle(context.Background(), veleroRequest(t, tc.meta))
			if !resp.Allowed {
				t.Fatalf("refused: %+v", resp.Result)
			}
			ann, policy := patchedAnnotations(t, resp)
			if !strings.HasPrefix(policy, tc.wantCM) {
				t.Fatalf("spec.resourcePolicy.name = %q, want %q…", policy, tc.wantCM)
			}
			var cm corev1.ConfigMap
			if err := c.Get(context.Background(), client.ObjectKey{Namespace: "velero", Name: policy}, &cm); err != nil {
				t.Fatal(err)
			}
			if got, ok := cm.Labels[LabelVeleroBackup]; !ok || got != tc.wantLabel {
				t.Fatalf("label %s = %q (set %v), want %q", LabelVeleroBackup, got, ok, tc.wantLabel)
			}
			doc, perr := volumepolicy.Parse([]byte(cm.Data["policies.yaml"]))
			if perr == nil {
				_, perr = doc.Validate()
			}
			if tc.wantError == "" {
				if perr != nil || ann[VeleroGlobalPolicyAnnotation] != "snapflow-system/global" || ann[AnnotationVeleroPolicyError] != "" {
					t.Fatalf("merged: document error %v, annotations %v", perr, ann)
				}
				return
			}
			if !strings.Contains(ann[AnnotationVeleroPolicyError], tc.wantError) || ann[VeleroGlobalPolicyAnnotation] != "" {
				t.Fatalf("annotations %v, want the error %q and no global-policy annotation", ann, tc.wantError)
			}
			if perr == nil || !strings.Contains(cm.Data["policies.yaml"], tc.wantError) {
				t.Fatalf("the failure document must be refused and say why; error %v, document:\n%s", perr, cm.Data["policies.yaml"])
			}
			if len(resp.Warnings) == 0 || !strings.Contains(resp.Warnings[0], "FailedValidation") {
				t.Fatalf("warnings %v", resp.Warnings)
			}
		})
	}
}

// Every Backup is told that the global document carries sections that
// never apply globally, not only the log at start-up.
func TestVeleroBackupsAreWarnedOfIgnoredGlobalSections(t *testing.T) {
	global := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "snapflow-system", Name: "global"},
		Data: map[string]string{"policies.yaml": "version: v1\nincludeExcludePolicy: {excludedNamespaceScopedResources: [secrets]}\nvolumePolicies: [{conditions: {storageClass: [gp2]}, action: {type: skip}}]\n"}}
	c := fake.NewClientBuilder().WithObjects(global).Build()
	v := &VeleroBackups{Client: c, Policies: &policysource.Resolver{Reader: c, Namespace: "snapflow-system", GlobalName: "global"}, Log: logr.Discard()}
	for _, name := range []string{"first", "second"} {
		resp := v.Handle(context.Background(), veleroRequest(t, `{"name":"`+name+`"}`))
		if !resp.Allowed || len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], "snapflow-system/global carries includeExcludePolicy: these sections are ignored globally") {
			t.Fatalf("Backup %s: allowed %v, warnings %q", name, resp.Allowed, resp.Warnings)
		}
	}
}

// A queued Backup cannot be pointed away from its merged policies, and a
// Backup arriving with snapflow's markers copied from another one is
// merged all the same.
func TestVeleroBackupsCannotSkipTheBaseline(t *testing.T) {
	global := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "snapflow-system", Name: "global"},
		Data: map[string]string{"policies.yaml": "version: v1\nvolumePolicies: [{conditions: {storageClass: [gp2]}, action: {type: skip}}]\n"}}
	c := fake.NewClientBuilder().WithObjects(global).Build()
	v := &VeleroBackups{Client: c, Policies: &policysource.Resolver{Reader: c, Namespace: "snapflow-system", GlobalName: "global"}, Log: logr.Discard()}
	ctx := context.Background()

	copied := veleroRequest(t, `{"name":"sneaky","annotations":{"velero.io/global-backup-volume-policy-configmap":"x","snapflow.dev/volume-policies-error":"x"}}`)
	if resp := v.Handle(ctx, copied); !resp.Allowed || len(resp.Patches) == 0 {
		t.Fatalf("a Backup with copied markers was not merged: %+v", resp)
	}

	// Two creates of one name (the second refused by the API server after
	// admission) write two ConfigMaps: the live one is never rewritten.
	first, second := veleroRequest(t, `{"name":"nightly"}`), veleroRequest(t, `{"name":"nightly"}`)
	second.UID = "req-2"
	_, a := patchedAnnotations(t, v.Handle(ctx, first))
	_, b := patchedAnnotations(t, v.Handle(ctx, second))
	if a == "" || a == b {
		t.Fatalf("two admissions of one name share ConfigMap %q and %q", a, b)
	}

	update := func(was, is string) admission.Response {
		req := veleroRequest(t, `{"name":"nightly"}`)
		req.Operation = admissionv1.Update
		req.Object.Raw = []byte(`{"apiVersion":"velero.io/v1","kind":"Backup","metadata":{"name":"nightly"},"spec":{"resourcePolicy":` + is + `}}`)
		req.OldObject.Raw = []byte(`{"apiVersion":"velero.io/v1","kind":"Backup","metadata":{"name":"nightly"},"spec":{"resourcePolicy":` + was + `}}`)
		return v.Handle(ctx, req)
	}
	merged := `{"kind":"configmap","name":"` + a + `"}`
	if resp := update(merged, merged); !resp.Allowed {
		t.Fatalf("an update that keeps spec.resourcePolicy was refused: %+v", resp.Result)
	}
	if resp := update(merged, `{"kind":"configmap","name":"lenient"}`); resp.Allowed || !strings.Contains(resp.Result.Message, "spec.resourcePolicy") {
		t.Fatalf("an update that repoints spec.resourcePolicy was allowed: %+v", resp.Result)
	}
}

// The sweeper deletes merged ConfigMaps whose Backup is gone, and one
// ConfigMap naming an impossible Backup stops nothing.
func TestVeleroSweeperSurvivesCraftedConfigMaps(t *testing.T) {
	old := metav1.NewTime(time.Now().Add(-time.Hour))
	cm := func(name, backup string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: name, CreationTimestamp: old,
			Labels:      map[string]string{LabelVeleroBackup: "", wellknown.LabelManagedBy: wellknown.ManagedByValue},
			Annotations: map[string]string{AnnotationVeleroBackup: backup}}}
	}
	c := fake.NewClientBuilder().WithObjects(cm("crafted", "a/b"), cm("orphan", "gone")).Build()
	s := &VeleroSweeper{Client: c, Grace: time.Minute, Log: logr.Discard()}
	if err := s.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	var left corev1.ConfigMapList
	if err := c.List(context.Background(), &left); err != nil {
		t.Fatal(err)
	}
	if len(left.Items) != 0 {
		t.Fatalf("%d ConfigMaps left after the sweep", len(left.Items))
	}
}
