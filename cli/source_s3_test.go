package cli

import "testing"

func TestSourceS3VerifyFlagDefaultsOn(t *testing.T) {
	f := newSourceS3Cmd().Flags().Lookup("sns-verify")
	if f == nil || f.DefValue != "true" {
		t.Fatalf("--sns-verify flag %+v, want default true", f)
	}
}
