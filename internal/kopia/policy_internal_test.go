package kopia

import (
	"testing"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
)

// upload.maxParallelFileReads and maxParallelSnapshots only pace the
// uploader, so what can be checked is that they reach kopia's policy from
// the spec a user writes, and that leaving them out keeps kopia's own.
func TestUploadTuningReachesKopia(t *testing.T) {
	reads, snaps := int32(3), int32(2)
	kp := PolicyFromSpec(&snapv1.SnapshotPolicySpec{Upload: &snapv1.Upload{MaxParallelFileReads: &reads, MaxParallelSnapshots: &snaps}}).kopiaPolicy()
	if u := kp.UploadPolicy; u.MaxParallelFileReads == nil || *u.MaxParallelFileReads != 3 || u.MaxParallelSnapshots == nil || *u.MaxParallelSnapshots != 2 {
		t.Fatalf("upload policy %+v, want 3 parallel file reads and 2 parallel snapshots", u)
	}
	if u := PolicyFromSpec(&snapv1.SnapshotPolicySpec{}).kopiaPolicy().UploadPolicy; u.MaxParallelFileReads != nil || u.MaxParallelSnapshots != nil {
		t.Fatalf("upload policy %+v without the fields, want kopia's defaults", u)
	}
}
