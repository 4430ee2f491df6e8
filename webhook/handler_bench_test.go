package webhook

import (
	"context"
	"encoding/json"
	"os"
	"testing"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	"github.com/snapflow/snapflow/internal/crdschema"
	"github.com/snapflow/snapflow/internal/validate"
)

// BenchmarkValidatePolicy is the handler's own cost for the realistic sample,
// without TLS or HTTP (bench/webhook measures those end to end).
func BenchmarkValidatePolicy(b *testing.B) {
	raw, err := os.ReadFile("../config/samples/20-snapshotpolicy-postgres.yaml")
	if err != nil {
		b.Fatal(err)
	}
	var obj map[string]any
	if err := yaml.Unmarshal(raw, &obj); err != nil {
		b.Fatal(err)
	}
	if _, err := crdschema.Apply("SnapshotPolicy", obj); err != nil {
		b.Fatal(err)
	}
	js, _ := json.Marshal(obj)
	var req admission.Request
	req.UID = "bench"
	req.Operation = "CREATE"
	req.Kind.Kind = "SnapshotPolicy"
	req.Object.Raw = js
	h := &Handler{Kind: "SnapshotPolicy", Lookup: validate.NewObjects(), Log: logr.Discard()}
	if resp := h.Handle(context.Background(), req); !resp.Allowed {
		b.Fatalf("denied: %v", resp.Result)
	}
	b.ReportAllocs()
	for b.Loop() {
		h.Handle(context.Background(), req)
	}
}
