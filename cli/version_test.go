package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/snapflow/snapflow/internal/version"
)

// Inside a container the chart deployed, version names the image too.
func TestVersionPrintsTheImage(t *testing.T) {
	const ref = "snapflow/snapflow:v1.2.3@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for _, tc := range []struct{ env string }{{""}, {ref}} {
		t.Setenv(version.ImageEnv, tc.env)
		for _, out := range []string{"table", "json"} {
			var b bytes.Buffer
			cmd := newVersionCmd()
			cmd.SetOut(&b)
			cmd.SetArgs([]string{"-o", out})
			if err := cmd.Execute(); err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(b.String(), "image"); got != (tc.env != "") || !strings.Contains(b.String(), tc.env) {
				t.Errorf("-o %s with %s=%q: %q", out, version.ImageEnv, tc.env, b.String())
			}
		}
	}
}

// --version says what `snapflow version` says.
func TestVersionFlag(t *testing.T) {
	flag, _, code := run(t, "--version")
	cmd, _, _ := run(t, "version")
	if code != 0 || flag != cmd || !strings.HasPrefix(flag, "snapflow ") {
		t.Fatalf("--version: exit %d %q; version: %q", code, flag, cmd)
	}
}
