package restore

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/functions/snapshot"
	kernel "github.com/snapflow/snapflow/internal/restore"
	"github.com/snapflow/snapflow/internal/validate"
)

// resolution is what the function settles before the mover runs. Either
// snapshotID is known, or query tells the mover what to look for.
type resolution struct {
	repo       snapv1.RepositoryRef
	snapshotID string
	snapshot   *snapv1.NamespacedObjectRef
	query      *kernel.Query
	recorded   *snapv1.RecordedIdentity
	identity   *snapv1.Identity
	// missing says why there is nothing to restore (onMissingSnapshot decides).
	missing string
}

// outcome of resolving: a resolution, a reason to wait, or a fatal problem.
type outcome struct {
	res     *resolution
	wait    string
	invalid string
}

// resolve turns the Restore's source into a repository and a snapshot.
func (f *Function) resolve(ctx context.Context, rs *snapv1.Restore) (outcome, error) {
	src := rs.Spec.Source
	switch {
	case src.SnapshotRef != nil:
		return f.fromSnapshot(ctx, rs)
	case src.FromPolicy != nil:
		return f.fromPolicy(ctx, rs)
	case src.Identity != nil:
		id := src.Identity
		res := &resolution{repo: *rs.Spec.Repository, identity: &snapv1.Identity{Username: id.Username, Hostname: id.Hostname, SourcePath: id.SourcePath}}
		if id.SnapshotID != "" {
			res.snapshotID = id.SnapshotID
			return outcome{res: res}, nil
		}
		asOf, err := kernel.AsOf(id.AsOf)
		if err != nil {
			return outcome{invalid: "spec.source.identity." + err.Error()}, nil
		}
		res.query = &kernel.Query{Username: id.Username, Hostname: id.Hostname, Path: id.SourcePath, AsOf: asOf, Offset: int(deref(id.Offset))}
		return outcome{res: res}, nil
	}
	return outcome{invalid: "spec.source names no source"}, nil
}

// waitOrMissing waits for a source that may still appear, until waitTimeout
// after the Restore's creation; then the source counts as missing.
func (f *Function) waitOrMissing(rs *snapv1.Restore, repo snapv1.RepositoryRef, why string) (outcome, error) {
	wait, err := kernel.WaitTimeout(rs)
	if err != nil {
		return outcome{invalid: err.Error()}, nil
	}
	if left := rs.CreationTimestamp.Add(wait).Sub(f.now()); left > 0 {
		return outcome{wait: fmt.Sprintf("%s; waiting up to %s more (spec.policy.waitTimeout)", why, left.Round(time.Second))}, nil
	}
	return outcome{res: &resolution{repo: repo, missing: why}}, nil
}

func (f *Function) fromSnapshot(ctx context.Context, rs *snapv1.Restore) (outcome, error) {
	ref := *rs.Spec.Source.SnapshotRef
	if ref.Namespace == "" {
		ref.Namespace = rs.Namespace
	}
	var repo snapv1.RepositoryRef
	if rs.Spec.Repository != nil {
		repo = *rs.Spec.Repository
	}
	var s snapv1.Snapshot
	if err := f.Client.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, &s); err != nil {
		if apierrors.IsNotFound(err) {
			return f.waitOrMissing(rs, repo, fmt.Sprintf("Snapshot %s/%s does not exist", ref.Namespace, ref.Name))
		}
		return outcome{}, err
	}
	if r := s.Status.Resolved; r != nil && r.Repository != nil {
		repo = *r.Repository
		if repo.Kind == snapv1.KindRepository && repo.Namespace == "" {
			repo.Namespace = s.Namespace
		}
	}
	id := ""
	if s.Status.Snapshot != nil {
		id = s.Status.Snapshot.KopiaSnapshotID
	}
	switch {
	case id != "" && s.Status.Phase.IsTerminal():
		res := &resolution{repo: repo, snapshotID: id, snapshot: &ref, recorded: s.Status.Recorded, identity: s.Status.Snapshot.Identity}
		if repo.Name == "" {
			return outcome{invalid: fmt.Sprintf("Snapshot %s/%s does not record its repository; set spec.repository", ref.Namespace, ref.Name)}, nil
		}
		return outcome{res: res}, nil
	case s.Status.Phase == snapv1.SnapshotFailed:
		return outcome{res: &resolution{repo: repo, missing: fmt.Sprintf("Snapshot %s/%s failed, so it holds no data", ref.Namespace, ref.Name)}}, nil
	case s.Status.Phase.IsTerminal():
		return outcome{res: &resolution{repo: repo, missing: fmt.Sprintf("Snapshot %s/%s backed nothing up (phase %s)", ref.Namespace, ref.Name, s.Status.Phase)}}, nil
	}
	// Still running: it will have data (or fail) soon, whatever waitTimeout says.
	return outcome{wait: fmt.Sprintf("Snapshot %s/%s is still %s; the restore starts when it finishes", ref.Namespace, ref.Name, phaseOr(s.Status.Phase))}, nil
}

func (f *Function) fromPolicy(ctx context.Context, rs *snapv1.Restore) (outcome, error) {
	fp := rs.Spec.Source.FromPolicy
	ns := fp.Namespace
	if ns == "" {
		ns = rs.Namespace
	}
	asOf, err := kernel.AsOf(fp.AsOf)
	if err != nil {
		return outcome{invalid: "spec.source.fromPolicy." + err.Error()}, nil
	}
	var repo snapv1.RepositoryRef
	var pol snapv1.SnapshotPolicy
	switch err := f.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: fp.Name}, &pol); {
	case apierrors.IsNotFound(err):
		if rs.Spec.Repository == nil {
			return outcome{invalid: fmt.Sprintf("SnapshotPolicy %s/%s does not exist, so the repository to read is unknown; set spec.repository, or restore a Snapshot by spec.source.snapshotRef", ns, fp.Name)}, nil
		}
		repo = *rs.Spec.Repository
	case err != nil:
		return outcome{}, err
	default:
		refs := validate.PolicyRefs(&pol)
		valid := make([]string, 0, len(refs))
		for _, r := range refs {
			valid = append(valid, validate.RepoKey(r, pol.Namespace))
		}
		sort.Strings(valid)
		switch {
		case rs.Spec.Repository != nil:
			repo = *rs.Spec.Repository
			member := false
			for _, r := range refs {
				member = member || validate.RepoKey(r, pol.Namespace) == validate.RepoKey(repo, rs.Namespace)
			}
			if !member {
				return outcome{invalid: fmt.Sprintf("spec.repository names %s, which is not a repository of SnapshotPolicy %s; use one of: %s", validate.RepoKey(repo, rs.Namespace), pol.Name, strings.Join(valid, ", "))}, nil
			}
		case len(refs) > 1:
			return outcome{invalid: fmt.Sprintf("SnapshotPolicy %s lists multiple repositories (spec.repositories), so a fromPolicy restore must say which one to read: set spec.repository to one of: %s", pol.Name, strings.Join(valid, ", "))}, nil
		default:
			repo = refs[0]
		}
	}
	repo = repo.Qualified(ns)

	// The policy's finished Snapshots in that repository are the catalog.
	var list snapv1.SnapshotList
	if err := f.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{wellknown.LabelConfig: fp.Name}); err != nil {
		return outcome{}, fmt.Errorf("list the Snapshots of SnapshotPolicy %s/%s: %w", ns, fp.Name, err)
	}
	var cands []kernel.Candidate
	idents := map[string]*snapv1.Identity{}
	paths := map[string]bool{}
	for i := range list.Items {
		s := &list.Items[i]
		if !snapshot.HasData(s) || !sameRepo(s, repo) {
			continue
		}
		cands = append(cands, kernel.Candidate{Name: s.Name, ID: s.Status.Snapshot.KopiaSnapshotID, Taken: snapshot.TakenAt(s), Recorded: s.Status.Recorded})
		if id := s.Status.Snapshot.Identity; id != nil {
			idents[s.Name] = id
			paths[id.SourcePath] = true
		}
	}
	if len(paths) > 1 {
		ps := make([]string, 0, len(paths))
		for p := range paths {
			ps = append(ps, p)
		}
		sort.Strings(ps)
		return outcome{invalid: fmt.Sprintf("SnapshotPolicy %s backs up several volumes (%s), so its latest snapshot is ambiguous; restore one by spec.source.snapshotRef, or by spec.source.identity with its sourcePath", fp.Name, strings.Join(ps, ", "))}, nil
	}
	pick, err := kernel.PickCandidate(cands, asOf, int(deref(fp.Offset)), fmt.Sprintf("among the finished Snapshots of SnapshotPolicy %s in %s", fp.Name, validate.RepoKey(repo, ns)))
	if errors.Is(err, kernel.ErrNoSnapshot) {
		return f.waitOrMissing(rs, repo, err.Error())
	}
	if err != nil {
		return outcome{}, err
	}
	return outcome{res: &resolution{repo: repo, snapshotID: pick.ID, snapshot: &snapv1.NamespacedObjectRef{Name: pick.Name, Namespace: ns},
		recorded: pick.Recorded, identity: idents[pick.Name]}}, nil
}

func sameRepo(s *snapv1.Snapshot, repo snapv1.RepositoryRef) bool {
	r := s.Status.Resolved
	if r == nil || r.Repository == nil {
		return false
	}
	return validate.RepoKey(*r.Repository, s.Namespace) == validate.RepoKey(repo, s.Namespace)
}

func phaseOr(p snapv1.SnapshotPhase) string {
	if p == "" {
		return "Pending"
	}
	return string(p)
}

func deref(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}
