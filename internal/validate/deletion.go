package validate

import (
	"context"
	"fmt"
	"sort"
	"strings"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
)

// RepositoryDeletion warns, and never refuses, when a repository being
// deleted still has work: deleting it is how its owner retires it, and a
// refusal would wedge that, while a warning tells them what becomes of
// the runs in progress and of the data. ref names the repository (with
// its namespace for a Repository). Nothing it cannot read is guessed at.
func RepositoryDeletion(ctx context.Context, lk Lookup, ref snapv1.RepositoryRef) Result {
	var r Result
	if lk == nil {
		return r
	}
	ns := ref.Namespace
	if ref.Kind == snapv1.KindClusterRepository {
		ns = ""
	}
	snaps, err := lk.Snapshots(ctx, ns)
	if err != nil {
		r.Warn("could not list the Snapshots that use %s (%v), so runs in progress were not checked", refString(ref), err)
		return r
	}
	restores, err := lk.Restores(ctx, ns)
	if err != nil {
		r.Warn("could not list the Restores that use %s (%v), so restores in progress were not checked", refString(ref), err)
		return r
	}
	var running []string
	held := 0
	for i := range snaps {
		s := &snaps[i]
		var pinned *snapv1.RepositoryRef
		if s.Status.Resolved != nil {
			pinned = s.Status.Resolved.Repository
		}
		if pinned == nil {
			pinned = s.Spec.Repository
		}
		if !sameRepository(pinned, s.Namespace, ref) {
			continue
		}
		switch {
		case !s.Status.Phase.IsTerminal() && s.Status.Phase != snapv1.SnapshotDeleting && s.DeletionTimestamp == nil:
			running = append(running, "Snapshot "+s.Namespace+"/"+s.Name)
		case s.Status.Snapshot != nil && s.Status.Snapshot.KopiaSnapshotID != "":
			held++
		}
	}
	for i := range restores {
		rs := &restores[i]
		pinned := rs.Spec.Repository
		if rs.Status.Resolved != nil && rs.Status.Resolved.Repository != nil {
			pinned = rs.Status.Resolved.Repository
		}
		if sameRepository(pinned, rs.Namespace, ref) && !rs.Status.Phase.IsTerminal() && rs.DeletionTimestamp == nil {
			running = append(running, "Restore "+rs.Namespace+"/"+rs.Name)
		}
	}
	if len(running) > 0 {
		sort.Strings(running)
		shown := running
		if len(shown) > 5 {
			shown = append(shown[:5:5], fmt.Sprintf("and %d more", len(running)-5))
		}
		r.Warn("%s is in use by %d run(s) in progress (%s): a mover already started finishes, but anything not yet started waits until a %s of this name exists again", refString(ref), len(running), strings.Join(shown, ", "), ref.Kind)
	}
	if held > 0 {
		r.Warn("%d Snapshot(s) keep their data in %s; the data stays in storage, and deleting those Snapshots is held (RepositoryMissing) until a %s of this name points at it again", held, refString(ref), ref.Kind)
	}
	return r
}

// sameRepository says whether a run's repository reference, as written in
// namespace ns, is ref.
func sameRepository(got *snapv1.RepositoryRef, ns string, ref snapv1.RepositoryRef) bool {
	return got != nil && RepoKey(*got, ns) == RepoKey(ref, ref.Namespace)
}

func refString(ref snapv1.RepositoryRef) string {
	if ref.Kind == snapv1.KindClusterRepository {
		return "ClusterRepository " + ref.Name
	}
	return "Repository " + ref.Namespace + "/" + ref.Name
}
