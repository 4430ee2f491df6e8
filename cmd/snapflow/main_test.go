package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The image has no zoneinfo and no CA bundle, so the binary must carry
// both: without them every non-UTC schedule and every public TLS endpoint
// fails in a real cluster, though never here, where the host has them.
func TestBinaryCarriesTimeZonesAndRoots(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	for _, want := range []string{"time/tzdata", "golang.org/x/crypto/x509roots/fallback"} {
		if !slices.Contains(deps, want) {
			t.Errorf("cmd/snapflow does not link %s", want)
		}
	}
}
