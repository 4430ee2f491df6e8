package restore

import (
	"errors"
	"strings"
	"testing"
	"time"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/internal/kopia"
)

func at(h int) time.Time { return time.Date(2026, 5, 1, h, 0, 0, 0, time.UTC) }

func snap(id, path string, h int) kopia.SnapshotInfo {
	return kopia.SnapshotInfo{ID: id, Source: kopia.Source{Username: "u", Hostname: "h", Path: path}, Start: at(h)}
}

func TestPick(t *testing.T) {
	snaps := []kopia.SnapshotInfo{snap("a", "/pvc/x", 1), snap("b", "/pvc/x", 2), snap("c", "/pvc/x", 3)}
	incomplete := snap("d", "/pvc/x", 4)
	incomplete.Incomplete = "checkpoint"
	other := snap("e", "/pvc/y", 2)
	foreign := kopia.SnapshotInfo{ID: "f", Source: kopia.Source{Username: "v", Hostname: "h", Path: "/pvc/x"}, Start: at(5)}
	asOf := func(h int) *time.Time { t := at(h); return &t }
	tests := []struct {
		name  string
		snaps []kopia.SnapshotInfo
		q     Query
		want  string
		err   error
	}{
		{"newest", snaps, Query{Username: "u", Hostname: "h"}, "c", nil},
		{"incomplete never counts", append(snaps, incomplete), Query{Username: "u", Hostname: "h"}, "c", nil},
		{"other identities ignored", append(snaps, foreign), Query{Username: "u", Hostname: "h"}, "c", nil},
		{"offset", snaps, Query{Username: "u", Hostname: "h", Offset: 1}, "b", nil},
		{"asOf between", snaps, Query{Username: "u", Hostname: "h", AsOf: ptr(at(2).Add(30 * time.Minute))}, "b", nil},
		{"asOf is inclusive", snaps, Query{Username: "u", Hostname: "h", AsOf: asOf(2)}, "b", nil},
		{"asOf and offset", snaps, Query{Username: "u", Hostname: "h", AsOf: asOf(2), Offset: 1}, "a", nil},
		{"asOf before all", snaps, Query{Username: "u", Hostname: "h", AsOf: asOf(0)}, "", ErrNoSnapshot},
		{"offset past the end", snaps, Query{Username: "u", Hostname: "h", Offset: 3}, "", ErrNoSnapshot},
		{"two paths are ambiguous", append(snaps, other), Query{Username: "u", Hostname: "h"}, "", ErrAmbiguous},
		{"a path disambiguates", append(snaps, other), Query{Username: "u", Hostname: "h", Path: "/pvc/y"}, "e", nil},
		{"nothing", nil, Query{Username: "u", Hostname: "h"}, "", ErrNoSnapshot},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Pick(tt.snaps, tt.q)
			if !errors.Is(err, tt.err) {
				t.Fatalf("err = %v, want %v", err, tt.err)
			}
			if got.ID != tt.want {
				t.Fatalf("picked %q, want %q", got.ID, tt.want)
			}
		})
	}
}

func TestPickAmbiguousListsPaths(t *testing.T) {
	_, err := Pick([]kopia.SnapshotInfo{snap("a", "/pvc/x", 1), snap("b", "/pvc/y", 1)}, Query{Username: "u", Hostname: "h"})
	if err == nil || !strings.Contains(err.Error(), "/pvc/x, /pvc/y") {
		t.Fatalf("want both paths named, got %v", err)
	}
}

func TestPickCandidate(t *testing.T) {
	cands := []Candidate{{Name: "s3", ID: "c", Taken: at(3)}, {Name: "s1", ID: "a", Taken: at(1)}, {Name: "s2", ID: "b", Taken: at(2)}, {Name: "none", Taken: at(4)}}
	tests := []struct {
		name   string
		asOf   *time.Time
		offset int
		want   string
		err    error
	}{
		{"newest with an id", nil, 0, "s3", nil},
		{"offset", nil, 2, "s1", nil},
		{"asOf", ptr(at(2)), 0, "s2", nil},
		{"asOf too early", ptr(at(0)), 0, "", ErrNoSnapshot},
		{"offset too far", nil, 3, "", ErrNoSnapshot},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := PickCandidate(cands, tt.asOf, tt.offset, "of SnapshotPolicy p")
			if !errors.Is(err, tt.err) || got.Name != tt.want {
				t.Fatalf("got %q, %v; want %q, %v", got.Name, err, tt.want, tt.err)
			}
		})
	}
}

func TestOptions(t *testing.T) {
	def := Options(nil)
	if !def.OverwriteFiles || !def.OverwriteDirectories || !def.OverwriteSymlinks || !def.IgnorePermissionErrors || def.DeleteExtra || def.Parallel != DefaultParallel {
		t.Fatalf("defaults differ from kopia restore's: %+v", def)
	}
	f, tr := false, true
	got := Options(&snapv1.RestoreOptions{EnableFileDeletion: &tr, OverwriteFiles: &f, IgnorePermissionErrors: &f, SkipTimes: &tr, SkipExisting: &tr, Parallel: ptr(int32(2))})
	if !got.DeleteExtra || got.OverwriteFiles || got.IgnorePermissionErrors || !got.SkipTimes || !got.SkipExisting || got.Parallel != 2 || !got.OverwriteDirectories {
		t.Fatalf("tri-states not applied: %+v", got)
	}
}

func TestOnMissing(t *testing.T) {
	ref := &snapv1.Restore{Spec: snapv1.RestoreSpec{Source: snapv1.RestoreSource{SnapshotRef: &snapv1.NamespacedObjectRef{Name: "s"}}}}
	pol := &snapv1.Restore{Spec: snapv1.RestoreSpec{Source: snapv1.RestoreSource{FromPolicy: &snapv1.FromPolicy{Name: "p"}}}}
	if OnMissing(ref) != "Fail" || OnMissing(pol) != "Continue" {
		t.Fatalf("defaults: %s %s", OnMissing(ref), OnMissing(pol))
	}
	pol.Spec.Policy = &snapv1.RestorePolicy{OnMissingSnapshot: "Fail"}
	if OnMissing(pol) != "Fail" {
		t.Fatal("explicit onMissingSnapshot ignored")
	}
}

func ptr[T any](v T) *T { return &v }
