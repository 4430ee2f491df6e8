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

// A gcs backend's key comes from the auth Secret's KOPIA_GCS_CREDENTIALS_JSON.
func TestGCSKeyComesFromTheEnvironment(t *testing.T) {
	w := &WorkSpec{Operation: OpSnapshot, Repository: Repository{Backend: kopia.Backend{GCS: &kopia.GCSBackend{Bucket: "b"}}}}
	env := map[string]string{EnvPassword: "pw", EnvGCSCredentials: `{"type":"service_account"}`}
	open, err := openOptions(Options{Spec: w, Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatal(err)
	}
	if string(open.Backend.GCS.CredentialsJSON) != env[EnvGCSCredentials] || len(w.Repository.Backend.GCS.CredentialsJSON) != 0 {
		t.Fatalf("key %q in the open options; the work spec keeps %q", open.Backend.GCS.CredentialsJSON, w.Repository.Backend.GCS.CredentialsJSON)
	}
}
