package crd

import (
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// coverageEntry says what a field (and every field under it) does at run
// time: the tests that drive it, or the tests that prove admission refuses
// it. gap admits a field that is accepted and not yet acted on.
type coverageEntry struct {
	Path    string   `json:"path"`
	Tests   []string `json:"tests,omitempty"`
	Refused []string `json:"refused,omitempty"`
	Gap     string   `json:"gap,omitempty"`
}

// leafPaths lists the field paths under spec of one CRD schema: arrays as
// [], maps as {}, a schemaless object as one path.
func leafPaths(s apiextv1.JSONSchemaProps, path string, out *[]string) {
	switch {
	case len(s.Properties) > 0:
		for name, child := range s.Properties {
			leafPaths(child, path+"."+name, out)
		}
	case s.Type == "array" && s.Items != nil && s.Items.Schema != nil:
		leafPaths(*s.Items.Schema, path+"[]", out)
	case s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil:
		leafPaths(*s.AdditionalProperties.Schema, path+"{}", out)
	default:
		*out = append(*out, path)
	}
}

// covers says whether entry path p covers field path f: equal, or an
// ancestor ending at a segment boundary.
func covers(p, f string) bool {
	if !strings.HasPrefix(f, p) {
		return false
	}
	rest := f[len(p):]
	return rest == "" || rest[0] == '.' || rest[0] == '[' || rest[0] == '{'
}

// testNames collects every TestXxx function of the repository.
func testNames(t *testing.T, root string) map[string]bool {
	t.Helper()
	decl := regexp.MustCompile(`(?m)^func (Test\w+)\(`)
	names := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "bin" || d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range decl.FindAllSubmatch(b, -1) {
			names[string(m[1])] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// TestEveryFieldIsCovered keeps the promise that every field the API admits
// does what the guide says or is refused: each spec field path of each CRD
// must be covered, in coverage.yaml, by an entry naming the tests that
// drive it at run time or prove its refusal, or by an admitted gap. A new
// field without an entry, an entry naming a test that does not exist, and
// an entry that covers no field all fail.
func TestEveryFieldIsCovered(t *testing.T) {
	b, err := os.ReadFile("coverage.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var table map[string][]coverageEntry
	if err := yaml.UnmarshalStrict(b, &table); err != nil {
		t.Fatalf("coverage.yaml: %v", err)
	}
	tests := testNames(t, filepath.Join("..", ".."))
	files, err := fs.Glob(Bases, "bases/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	gaps := 0
	var fields []string
	for _, f := range files {
		raw, err := Bases.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextv1.CustomResourceDefinition
		if err := yaml.Unmarshal(raw, &crd); err != nil {
			t.Fatal(err)
		}
		kind := crd.Spec.Names.Kind
		var paths []string
		for _, v := range crd.Spec.Versions {
			if v.Served {
				leafPaths(v.Schema.OpenAPIV3Schema.Properties["spec"], "spec", &paths)
			}
		}
		paths = slices.Compact(slices.Sorted(slices.Values(paths)))
		for _, p := range paths {
			fields = append(fields, kind+" "+p)
		}
		entries := table[kind]
		used := make([]bool, len(entries))
		for _, p := range paths {
			best := -1
			for i, e := range entries {
				if covers(e.Path, p) && (best < 0 || len(e.Path) > len(entries[best].Path)) {
					best = i
				}
			}
			if best < 0 {
				t.Errorf("%s %s: no entry in config/crd/coverage.yaml; add one naming the test that drives it at run time (tests), the test that proves admission refuses it (refused), or why it is not acted on yet (gap)", kind, p)
				continue
			}
			used[best] = true
		}
		for i, e := range entries {
			where := fmt.Sprintf("coverage.yaml %s %s", kind, e.Path)
			if !used[i] {
				t.Errorf("%s covers no field of the CRD: remove or fix it", where)
			}
			if acted := len(e.Tests) > 0 || len(e.Refused) > 0; acted == (e.Gap != "") {
				t.Errorf("%s: set tests or refused (or both, for a field whose values split), or else gap", where)
			}
			for _, name := range append(append([]string{}, e.Tests...), e.Refused...) {
				if !tests[name] {
					t.Errorf("%s names %s, which is no test of this repository", where, name)
				}
			}
			if e.Gap != "" {
				gaps++
			}
		}
		delete(table, kind)
	}
	for kind := range table {
		t.Errorf("coverage.yaml lists kind %s, which has no CRD", kind)
	}
	t.Logf("%d admitted gaps in config/crd/coverage.yaml", gaps)

	// An entry covers a subtree, so a field added under one would pass
	// unseen: every field path is also listed in fields.txt, and a change
	// there is a change to review against coverage.yaml.
	sort.Strings(fields)
	got := strings.Join(fields, "\n") + "\n"
	if *updateFields {
		if err := os.WriteFile("fields.txt", []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile("fields.txt")
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != got {
		added, removed := diffLines(string(want), got)
		t.Errorf("the CRDs' spec fields changed (added %v, removed %v): make sure config/crd/coverage.yaml says what each added field does, then run go test ./config/crd -run TestEveryFieldIsCovered -update-fields", added, removed)
	}
}

var updateFields = flag.Bool("update-fields", false, "rewrite config/crd/fields.txt from the CRDs")

// diffLines lists the lines only in b (added) and only in a (removed).
func diffLines(a, b string) (added, removed []string) {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
			m[l] = true
		}
		return m
	}
	ma, mb := in(a), in(b)
	for l := range mb {
		if !ma[l] {
			added = append(added, l)
		}
	}
	for l := range ma {
		if !mb[l] {
			removed = append(removed, l)
		}
	}
	sort.Strings(added)
	sort.Strings(removed)
	return added, removed
}
