package layout

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The README's Layout table names every package: by its path, or by the
// folder it sits in (`bench/`), except in internal/, functions/ and
// events/, where each package is named on its own. A package nobody listed is a package a newcomer cannot
// find.
func TestReadmeLayoutNamesEveryPackage(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(readme), "\n## Layout\n")
	if !ok {
		t.Fatal("README.md has no Layout section")
	}
	section, _, _ := strings.Cut(after, "\n## ")
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	named := func(s string) bool { return strings.Contains(section, "`"+s+"`") }
	for _, pkg := range strings.Fields(string(out)) {
		rel := strings.TrimPrefix(strings.TrimPrefix(pkg, module), "/")
		parts := strings.Split(rel, "/")
		byName := len(parts) > 1 && (parts[0] == "internal" || parts[0] == "functions" || parts[0] == "events")
		switch {
		case named(rel):
		case byName && named(parts[len(parts)-1]):
		case !byName && named(parts[0]+"/"):
		case !byName && len(parts) > 1 && named(strings.Join(parts[:2], "/")):
		default:
			t.Errorf("README.md's Layout table does not name %s: add it to the row of its folder", rel)
		}
	}
}
