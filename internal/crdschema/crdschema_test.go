package crdschema

import (
	"reflect"
	"testing"
)

func TestApply(t *testing.T) {
	obj := map[string]any{
		"apiVersion": "kopiur.home-operations.com/v1alpha1", "kind": "SnapshotPolicy",
		"metadata": map[string]any{"name": "p"},
		"spec": map[string]any{
			"repository": map[string]any{"name": "nas"},
			"sources":    []any{map[string]any{"pvc": map[string]any{"name": "d"}, "readonly": true}},
			"retension":  map[string]any{"keepDaily": int64(7)},
		},
	}
	unknown, err := Apply("SnapshotPolicy", obj)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(unknown, []string{"spec.retension", "spec.sources[0].readonly"}) {
		t.Fatalf("unknown = %v", unknown)
	}
	spec := obj["spec"].(map[string]any)
	if spec["copyMethod"] != "Snapshot" || spec["repository"].(map[string]any)["kind"] != "Repository" {
		t.Fatalf("defaults not applied: %v", spec)
	}
	if src := spec["sources"].([]any)[0].(map[string]any); src["readOnly"] != true || src["sourcePathStrategy"] != "PvcName" {
		t.Fatalf("nested defaults not applied: %v", src)
	}
	if _, err := Apply("Widget", map[string]any{}); err == nil {
		t.Fatal("unknown kind should fail")
	}
}
