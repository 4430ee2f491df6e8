package cli

import "testing"

func TestCommandName(t *testing.T) {
	for argv0, want := range map[string]string{
		"snapflow":                           "snapflow",
		"/usr/local/bin/snapflow":            "snapflow",
		"/home/u/.krew/bin/kubectl-snapflow": "kubectl snapflow",
		"kubectl-snapflow":                   "kubectl snapflow",
		"./bin/snapflow-linux-amd64":         "snapflow",
	} {
		if got := commandName(argv0); got != want {
			t.Errorf("commandName(%q) = %q, want %q", argv0, got, want)
		}
	}
}
