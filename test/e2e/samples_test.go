package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// schemaDefaults are the defaults the Kopiur API promises, written down here
// independently of the CRDs so that a CRD that stops applying one (or starts
// inventing another) fails the round trip. Paths use [*] for any list index.
var schemaDefaults = map[string]map[string]any{
	"SnapshotPolicy": {
		"spec.copyMethod":                    "Snapshot",
		"spec.groupBy":                       "VolumeGroupSnapshot",
		"spec.defaultDeletionPolicy":         "Delete",
		"spec.sources[*].readOnly":           true,
		"spec.sources[*].sourcePathStrategy": "PvcName",
		"spec.repository.kind":               "Repository",
		"spec.repositories[*].kind":          "Repository",
		"spec.deletion.onPolicyDelete":       "Retain",
		"spec.files.ignoreRules":             []any{"/lost+found", "System Volume Information", "$RECYCLE.BIN", "@eaDir", ".snapshot"},
	},
	"SnapshotSchedule": {
		"spec.schedule.runOnCreate":       false,
		"spec.schedule.concurrencyPolicy": "Forbid",
		"spec.failedJobsHistoryLimit":     float64(10),
		"spec.deletion.onScheduleDelete":  "Retain",
	},
	"Repository": {
		"spec.mode":                         "ReadWrite",
		"spec.onNamespaceDelete":            "Orphan",
		"spec.deletionProtection.threshold": float64(10),
		"spec.health.probe.enabled":         true,
	},
	"ClusterRepository": {
		"spec.mode":                         "ReadWrite",
		"spec.onNamespaceDelete":            "Orphan",
		"spec.deletionProtection.threshold": float64(10),
		"spec.health.probe.enabled":         true,
	},
	"Restore": {
		"spec.source.fromPolicy.offset": float64(0),
		"spec.repository.kind":          "Repository",
	},
	"Snapshot": {
		"spec.repository.kind": "Repository",
		// Stamped by the mutating webhook from the recipe's
		// defaultDeletionPolicy: the one sample Snapshot that omits it
		// belongs to app-volumes, which says Retain.
		"spec.deletionPolicy": "Retain",
	},
}

// Every sample in config/samples applies with strict field validation, reads
// back with every field it set intact, and gains exactly the schema defaults.
func TestSamplesRoundTrip(t *testing.T) {
	var files []string
	err := filepath.WalkDir(repoPath(t, "config", "samples"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".yaml") {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	if len(files) < 5 {
		t.Fatalf("found only %d sample files", len(files))
	}
	// Namespaces first, so every file's objects have somewhere to go.
	sort.SliceStable(files, func(i, j int) bool {
		return strings.HasPrefix(filepath.Base(files[i]), "00-") && !strings.HasPrefix(filepath.Base(files[j]), "00-")
	})

	kinds := map[string]int{}
	for _, f := range files {
		docs := decodeDocs(t, f)
		for _, doc := range docs {
			if name, _ := get(doc, "metadata.generateName").(string); name != "" {
				continue // generateName objects cannot round-trip by name; the try-it test covers them
			}
			// Samples land in namespaces of their own so other tests start clean.
			isolateNamespace(doc)
			b, _ := json.Marshal(doc)
			kubectl(t, b, 0, "apply", "--validate=strict", "-f", "-")
			if !strings.HasPrefix(doc["apiVersion"].(string), "kopiur.home-operations.com/") {
				continue
			}
			kind := doc["kind"].(string)
			kinds[kind]++
			args := []string{"get", strings.ToLower(kind) + ".kopiur.home-operations.com", get(doc, "metadata.name").(string), "-o", "json"}
			if ns, _ := get(doc, "metadata.namespace").(string); ns != "" {
				args = append(args, "-n", ns)
			}
			var stored map[string]any
			if err := json.Unmarshal([]byte(kubectl(t, nil, 0, args...).Stdout), &stored); err != nil {
				t.Fatal(err)
			}
			for _, p := range compareWithDefaults(schemaDefaults[kind], doc["spec"], stored["spec"]) {
				t.Errorf("%s %s %s: %s", filepath.Base(f), kind, get(doc, "metadata.name"), p)
			}
		}
	}
	for _, k := range []string{"Repository", "ClusterRepository", "SnapshotPolicy", "Snapshot", "SnapshotSchedule", "Restore"} {
		if kinds[k] == 0 {
			t.Errorf("no sample of kind %s in config/samples", k)
		}
	}
}

func decodeDocs(t *testing.T, path string) []map[string]any {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(readFile(t, path)), 4096)
	var docs []map[string]any
	for {
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if doc != nil {
			// Normalise numbers and the like to what kubectl -o json gives back.
			b, _ := json.Marshal(doc)
			var norm map[string]any
			_ = json.Unmarshal(b, &norm)
			docs = append(docs, norm)
		}
	}
}

func isolateNamespace(doc map[string]any) {
	md := doc["metadata"].(map[string]any)
	if doc["kind"] == "Namespace" && doc["apiVersion"] == "v1" {
		md["name"] = md["name"].(string) + "-samples"
		return
	}
	if ns, ok := md["namespace"].(string); ok {
		md["namespace"] = ns + "-samples"
	}
}

func get(v any, path string) any {
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

var indexRE = regexp.MustCompile(`\[\d+\]`)

// compareWithDefaults reports every way stored differs from "in, plus the
// schema defaults": a field set in the manifest that was lost or changed, a
// field that appeared without being a default, and a default that was not applied.
func compareWithDefaults(defaults map[string]any, in, stored any) []string {
	var problems []string
	inLeaves, storedLeaves := map[string]any{}, map[string]any{}
	flatten("spec", in, inLeaves)
	flatten("spec", stored, storedLeaves)
	for p, v := range inLeaves {
		sv, ok := storedLeaves[p]
		if m, isMap := v.(map[string]any); isMap && len(m) == 0 {
			if !ok && !hasChildren(storedLeaves, p) {
				problems = append(problems, fmt.Sprintf("%s: set to {} but not stored", p))
			}
			continue
		}
		if !ok {
			problems = append(problems, fmt.Sprintf("%s: set to %v but not stored (pruned?)", p, v))
		} else if !reflect.DeepEqual(v, sv) {
			problems = append(problems, fmt.Sprintf("%s: set to %v, stored as %v", p, v, sv))
		}
	}
	for p, sv := range storedLeaves {
		if _, ok := inLeaves[p]; ok {
			continue
		}
		if m, isMap := sv.(map[string]any); isMap && len(m) == 0 {
			continue
		}
		want, isDefault := defaults[indexRE.ReplaceAllString(p, "[*]")]
		switch {
		case !isDefault:
			problems = append(problems, fmt.Sprintf("%s: stored as %v, but the manifest did not set it and it is no schema default", p, sv))
		case !reflect.DeepEqual(want, sv):
			problems = append(problems, fmt.Sprintf("%s: defaulted to %v, want %v", p, sv, want))
		}
	}
	for pattern := range defaults {
		for _, p := range instantiate(pattern, stored) {
			if _, ok := storedLeaves[p]; !ok {
				problems = append(problems, fmt.Sprintf("%s: schema default %v was not applied", p, defaults[pattern]))
			}
		}
	}
	sort.Strings(problems)
	return problems
}

func hasChildren(leaves map[string]any, prefix string) bool {
	for p := range leaves {
		if strings.HasPrefix(p, prefix+".") || strings.HasPrefix(p, prefix+"[") {
			return true
		}
	}
	return false
}

// flatten maps each leaf to its path; lists of scalars count as one leaf.
func flatten(prefix string, v any, out map[string]any) {
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 0 {
			out[prefix] = x
		}
		for k, c := range x {
			flatten(prefix+"."+k, c, out)
		}
	case []any:
		scalars := true
		for _, c := range x {
			switch c.(type) {
			case map[string]any, []any:
				scalars = false
			}
		}
		if scalars {
			out[prefix] = x
			return
		}
		for i, c := range x {
			flatten(fmt.Sprintf("%s[%d]", prefix, i), c, out)
		}
	default:
		out[prefix] = v
	}
}

// instantiate expands a default's path over the stored spec: one concrete path
// for every place whose parent object exists.
func instantiate(pattern string, spec any) []string {
	segs := strings.Split(strings.TrimPrefix(pattern, "spec."), ".")
	var walk func(path string, v any, segs []string) []string
	walk = func(path string, v any, segs []string) []string {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		seg := segs[0]
		list := strings.HasSuffix(seg, "[*]")
		key := strings.TrimSuffix(seg, "[*]")
		if len(segs) == 1 {
			return []string{path + "." + key}
		}
		child, ok := m[key]
		if !ok {
			return nil
		}
		if !list {
			return walk(path+"."+key, child, segs[1:])
		}
		items, _ := child.([]any)
		var out []string
		for i, it := range items {
			out = append(out, walk(fmt.Sprintf("%s.%s[%d]", path, key, i), it, segs[1:])...)
		}
		return out
	}
	return walk("spec", spec, segs)
}
