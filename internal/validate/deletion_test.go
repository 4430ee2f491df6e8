package validate

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
)

func TestRepositoryDeletionWarns(t *testing.T) {
	ctx := context.Background()
	snap := func(ns, name string, phase snapv1.SnapshotPhase, resolved *snapv1.RepositoryRef, spec *snapv1.RepositoryRef, id string) *snapv1.Snapshot {
		s := &snapv1.Snapshot{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: snapv1.SnapshotSpec{Repository: spec}}
		s.Status.Phase = phase
		if resolved != nil {
			s.Status.Resolved = &snapv1.SnapshotResolved{Repository: resolved}
		}
		if id != "" {
			s.Status.Snapshot = &snapv1.SnapshotRecord{KopiaSnapshotID: id}
		}
		return s
	}
	primary := &snapv1.RepositoryRef{Name: "primary"}
	shared := &snapv1.RepositoryRef{Kind: snapv1.KindClusterRepository, Name: "shared"}
	objs := NewObjects()
	objs.Add(snap("app", "running", snapv1.SnapshotRunning, primary, nil, ""))
	objs.Add(snap("app", "queued", "", nil, primary, ""))
	objs.Add(snap("app", "done", snapv1.SnapshotSucceeded, primary, nil, "k1"))
	objs.Add(snap("app", "failed", snapv1.SnapshotFailed, primary, nil, ""))
	objs.Add(snap("app", "other-repo", snapv1.SnapshotRunning, &snapv1.RepositoryRef{Name: "secondary"}, nil, ""))
	objs.Add(snap("web", "same-name-elsewhere", snapv1.SnapshotRunning, primary, nil, ""))
	objs.Add(snap("web", "tenant", snapv1.SnapshotSucceeded, shared, nil, "k2"))
	objs.Add(&snapv1.Restore{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "rs"}, Spec: snapv1.RestoreSpec{Repository: primary}})

	r := RepositoryDeletion(ctx, objs, snapv1.RepositoryRef{Kind: snapv1.KindRepository, Namespace: "app", Name: "primary"})
	if !r.OK() || len(r.Warnings) != 2 {
		t.Fatalf("problems %v, warnings %q: want two warnings and no refusal", r.Problems(), r.Warnings)
	}
	for _, want := range []string{"Repository app/primary is in use by 3 run(s) in progress (Restore app/rs, Snapshot app/queued, Snapshot app/running)", "waits until a Repository of this name exists again"} {
		if !strings.Contains(r.Warnings[0], want) {
			t.Errorf("warning %q lacks %q", r.Warnings[0], want)
		}
	}
	if !strings.HasPrefix(r.Warnings[1], "1 Snapshot(s) keep their data in Repository app/primary") || !strings.Contains(r.Warnings[1], "RepositoryMissing") {
		t.Errorf("data warning %q", r.Warnings[1])
	}

	r = RepositoryDeletion(ctx, objs, snapv1.RepositoryRef{Kind: snapv1.KindClusterRepository, Name: "shared"})
	if len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "1 Snapshot(s) keep their data in ClusterRepository shared") {
		t.Fatalf("cluster repository warnings %q", r.Warnings)
	}
	if r := RepositoryDeletion(ctx, objs, snapv1.RepositoryRef{Kind: snapv1.KindRepository, Namespace: "app", Name: "unused"}); len(r.Warnings) != 0 {
		t.Fatalf("an unused repository: %q", r.Warnings)
	}
	// What cannot be read is said, never guessed, and still never refuses.
	if r := RepositoryDeletion(ctx, broken{}, snapv1.RepositoryRef{Kind: snapv1.KindRepository, Namespace: "app", Name: "primary"}); !r.OK() || len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "were not checked") {
		t.Fatalf("unreadable runs: %v %q", r.Problems(), r.Warnings)
	}
}
