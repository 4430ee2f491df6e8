// Package layout holds tests of the repository's shape rather than its
// behaviour.
package layout

import (
	"bufio"
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/snapflow/snapflow"

// floor places a package of this module on the floors imports run down:
// cmd > cli > functions > webhook, events > internal > api (and the
// embedded manifests of config). Tests, the
// benchmarks and hack tools stand outside and may import anything.
func floor(pkg string) (int, bool) {
	rel := strings.TrimPrefix(strings.TrimPrefix(pkg, module), "/")
	top, _, _ := strings.Cut(rel, "/")
	switch top {
	case "cmd":
		return 5, true
	case "cli":
		return 4, true
	case "functions":
		return 3, true
	case "webhook", "events":
		return 2, true
	case "internal":
		return 1, true
	case "api", "config":
		// config holds embedded manifests: data, like the API types.
		return 0, true
	}
	return 0, false
}

// No package imports one on a higher floor: a kernel that reaches up into
// a function or the CLI drags its IO along, and cycles follow.
func TestImportsRunDownTheFloors(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	seen := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		pkg := fields[0]
		from, ok := floor(pkg)
		if !ok {
			continue
		}
		seen++
		for _, imp := range fields[1:] {
			if !strings.HasPrefix(imp, module+"/") {
				continue
			}
			to, ok := floor(imp)
			if !ok {
				t.Errorf("%s imports %s, which is outside the floors (test, bench or hack code)", pkg, imp)
				continue
			}
			if to > from {
				t.Errorf("%s imports %s: imports run down the floors only (cmd > cli > functions > webhook, events > internal > api); move the shared code down", pkg, imp)
			}
		}
	}
	if seen < 20 {
		t.Fatalf("saw only %d packages of the module; go list output changed?", seen)
	}
}

func TestFloorOfKnownPackages(t *testing.T) {
	tests := []struct {
		pkg  string
		want int
		ok   bool
	}{
		{module + "/cmd/snapflow", 5, true},
		{module + "/cli", 4, true},
		{module + "/functions/snapshot", 3, true},
		{module + "/webhook", 2, true},
		{module + "/events/sources/s3", 2, true},
		{module + "/internal/kopia", 1, true},
		{module + "/api/v1alpha1", 0, true},
		{module + "/test/e2e", 0, false},
	}
	for _, tt := range tests {
		got, ok := floor(tt.pkg)
		if got != tt.want || ok != tt.ok {
			t.Errorf("floor(%s) = %d, %v; want %d, %v", tt.pkg, got, ok, tt.want, tt.ok)
		}
	}
}
