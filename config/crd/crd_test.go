package crd

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// The checked-in CRDs must be exactly what controller-gen makes of the Go
// types today; `make generate` fixes a failure here.
func TestCRDsMatchTypes(t *testing.T) {
	gen, err := filepath.Abs(filepath.Join("..", "..", "bin", "controller-gen"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(gen); err != nil {
		t.Fatalf("controller-gen is not built (%v): run `make tools`", err)
	}
	out := t.TempDir()
	cmd := exec.Command(gen, "crd", "paths=./api/...", "output:crd:artifacts:config="+out)
	cmd.Dir = filepath.Join("..", "..")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("controller-gen: %v\n%s", err, b)
	}
	want, _ := filepath.Glob(filepath.Join(out, "*.yaml"))
	have, _ := filepath.Glob(filepath.Join("bases", "*.yaml"))
	if len(want) != len(have) {
		t.Fatalf("config/crd/bases has %d CRDs, the types make %d: run `make generate`", len(have), len(want))
	}
	for _, w := range want {
		h := filepath.Join("bases", filepath.Base(w))
		wb, _ := os.ReadFile(w)
		hb, err := os.ReadFile(h)
		if err != nil {
			t.Fatalf("%s is missing: run `make generate`", h)
		}
		if !bytes.Equal(wb, hb) {
			t.Errorf("%s drifted from the Go types: run `make generate`", h)
		}
	}
}

// Every CRD must stay far below etcd's object size limit (1.5 MiB by default),
// and carry the kopiur category and a status subresource.
func TestCRDShape(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("bases", "*.yaml"))
	if len(files) != 7 {
		t.Fatalf("want 7 CRDs, have %d", len(files))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(b, &crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		js, _ := yaml.YAMLToJSON(b)
		if len(js) > 512*1024 {
			t.Errorf("%s is %d KiB as JSON; keep CRDs small enough for etcd", f, len(js)/1024)
		}
		if crd.Spec.Group != "kopiur.home-operations.com" || len(crd.Spec.Versions) != 1 || crd.Spec.Versions[0].Name != "v1alpha1" {
			t.Errorf("%s: unexpected group/versions", f)
		}
		v := crd.Spec.Versions[0]
		if v.Subresources == nil || v.Subresources.Status == nil {
			t.Errorf("%s: no status subresource", f)
		}
		if len(crd.Spec.Names.Categories) != 1 || crd.Spec.Names.Categories[0] != "kopiur" {
			t.Errorf("%s: categories = %v, want [kopiur]", f, crd.Spec.Names.Categories)
		}
		if len(crd.Spec.Names.ShortNames) == 0 {
			t.Errorf("%s: no short name", f)
		}
	}
}
