package mover

import (
	"testing"

	"github.com/snapflow/snapflow/internal/kopia"
)

// The repository's moverDefaults.throttle, carried in the work spec,
// reaches the engine's open options.
func TestOpenOptionsCarryTheThrottle(t *testing.T) {
	w := &WorkSpec{Operation: OpVerify, Repository: Repository{Backend: kopia.Backend{Filesystem: &kopia.FilesystemBackend{Path: "/r"}},
		Throttle: &kopia.Throttle{UploadBytesPerSecond: 1e6, ReadsPerSecond: 3}}}
	open, err := openOptions(Options{Spec: w, RepositoryRoot: "/repository", Getenv: func(string) string { return "pw" }})
	if err != nil {
		t.Fatal(err)
	}
	if open.Throttle.UploadBytesPerSecond != 1e6 || open.Throttle.ReadsPerSecond != 3 {
		t.Fatalf("throttle %+v", open.Throttle)
	}
}
