package cli

import (
	"bytes"
	"strings"
	"testing"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/internal/repousage"
)

func TestRepositoryArg(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    snapv1.RepositoryRef
		wantErr bool
	}{
		{"primary", snapv1.RepositoryRef{Kind: snapv1.KindRepository, Name: "primary"}, false},
		{"ClusterRepository/offsite", snapv1.RepositoryRef{Kind: snapv1.KindClusterRepository, Name: "offsite"}, false},
		{"Repository/primary", snapv1.RepositoryRef{Kind: snapv1.KindRepository, Name: "primary"}, false},
		{"Bucket/x", snapv1.RepositoryRef{}, true},
		{"ClusterRepository/", snapv1.RepositoryRef{}, true},
	} {
		got, err := repositoryArg(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("repositoryArg(%q) = %+v, %v", tc.in, got, err)
		}
	}
}

func TestPrintUsage(t *testing.T) {
	n := func(v int64) *int64 { return &v }
	rep := repousage.Report{Repository: "Repository/app/primary", StoredBytes: n(3 << 20), ReclaimableBytes: n(1 << 20), BlobCount: n(7),
		Groups: []repousage.Group{
			{Identity: "app@app.c:/data", Policy: "app/db", Snapshots: 3, LatestSize: 2 << 20, Added: repousage.Ages{Day: 1 << 20}, Prunes: 2, PrunesKeepData: 1, PrunedAdded: 512},
			{Identity: "app@app.c:/www", Snapshots: 1, Pinned: 1},
		},
		Total: repousage.Group{Identity: "TOTAL", Snapshots: 4, Prunes: 2, Pinned: 1},
		Notes: []string{"something to know"}}
	var b bytes.Buffer
	printUsage(&b, rep)
	out := b.String()
	for _, want := range []string{"stored:      3.0 MiB in 7 blobs", "reclaimable: 1.0 MiB", "app@app.c:/data  app/db", "2 (1 keep data)", "app@app.c:/www", "TOTAL", "note: something to know"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}
