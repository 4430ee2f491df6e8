package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snapflow/snapflow/internal/mover"
)

// The mover runs only the work spec whose digest its Job pins: a
// ConfigMap changed after the function wrote it is refused before
// anything is read from it.
func TestMoverRefusesAChangedWorkSpec(t *testing.T) {
	dir := t.TempDir()
	work := filepath.Join(dir, "work.json")
	written := []byte(`{"operation":"probe"}`)
	if err := os.WriteFile(work, []byte(`{"operation":"delete"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code := Execute([]string{"mover", "--work", work, "--work-digest", mover.Digest(written), "--termination-log", filepath.Join(dir, "term")}, &out, &errOut)
	if code == 0 || !strings.Contains(errOut.String(), "is not the one the function wrote") {
		t.Fatalf("exit %d, stderr %q: want the changed work spec refused", code, errOut.String())
	}
}
