package snapshot

import (
	"testing"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
)

// moverDefaults.throttle goes into the work spec every mover reads.
func TestRepositoryWorkCarriesTheThrottle(t *testing.T) {
	rate := int64(2 << 20)
	spec := &snapv1.RepositorySpec{Backend: snapv1.Backend{Filesystem: &snapv1.FilesystemBackend{Path: "/r"}},
		MoverDefaults: &snapv1.MoverDefaults{Throttle: &snapv1.Throttle{UploadBytesPerSecond: &rate, WriteOpsPerSecond: &rate}}}
	w, _, err := RepositoryWork(snapv1.RepositoryRef{Kind: snapv1.KindRepository, Name: "r"}, nil, spec)
	if err != nil {
		t.Fatal(err)
	}
	if w.Throttle == nil || w.Throttle.UploadBytesPerSecond != float64(rate) || w.Throttle.WritesPerSecond != float64(rate) || w.Throttle.ReadsPerSecond != 0 {
		t.Fatalf("throttle %+v", w.Throttle)
	}
}
