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

// errorHandling reaches kopia's error-handling policy (ignoreDirErrors,
// ignoreFileErrors) and the uploader's fail-fast switch; extraArgs'
// --fail-fast overrides the typed field. Read errors cannot be made here
// (the tests run as root), so what is checked is the policy kopia gets.
func TestErrorHandlingReachesKopia(t *testing.T) {
	yes, no := true, false
	p := PolicyFromSpec(&snapv1.SnapshotPolicySpec{ErrorHandling: &snapv1.ErrorHandling{IgnoreDirErrors: &yes, IgnoreFileErrors: &no, FailFast: &yes}})
	eh := p.kopiaPolicy().ErrorHandlingPolicy
	if eh.IgnoreDirectoryErrors == nil || !bool(*eh.IgnoreDirectoryErrors) || eh.IgnoreFileErrors == nil || bool(*eh.IgnoreFileErrors) {
		t.Fatalf("error handling %+v, want directory errors ignored and file errors not", eh)
	}
	if !p.FailFast {
		t.Fatal("failFast did not reach the uploader's policy")
	}
	if eh := PolicyFromSpec(&snapv1.SnapshotPolicySpec{}).kopiaPolicy().ErrorHandlingPolicy; eh.IgnoreDirectoryErrors != nil || eh.IgnoreFileErrors != nil {
		t.Fatalf("error handling %+v without the fields, want kopia's defaults", eh)
	}
	if PolicyFromSpec(&snapv1.SnapshotPolicySpec{ErrorHandling: &snapv1.ErrorHandling{FailFast: &yes}, ExtraArgs: []string{"--fail-fast=false"}}).FailFast {
		t.Fatal("extraArgs --fail-fast=false did not override failFast")
	}
}
