// Package fleet summarises the backups of a namespace or a cluster for the
// engineer on call: per policy, when it last succeeded, when it runs next,
// how many runs failed since, and what runs, waits or is held right now;
// per repository, its phase and its queue. It is a pure kernel over
// objects the caller listed, with no client or clock of its own.
package fleet

import (
	"sort"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/coverage"
)

// Input is what the summary is derived from.
type Input struct {
	Policies            []snapv1.SnapshotPolicy
	Schedules           []snapv1.SnapshotSchedule
	Snapshots           []snapv1.Snapshot
	Repositories        []snapv1.Repository
	ClusterRepositories []snapv1.ClusterRepository
}

// State is a policy's health in one word.
type State string

const (
	// OK: its newest finished run succeeded (or none finished yet) and a
	// schedule fires it.
	OK State = "OK"
	// Failing: its newest finished run failed.
	Failing State = "Failing"
	// Unscheduled: no active schedule fires it; it runs only on request.
	Unscheduled State = "Unscheduled"
	// Suspended: the policy is suspended.
	Suspended State = "Suspended"
)

// Policy is one SnapshotPolicy's line.
type Policy struct {
	Namespace   string       `json:"namespace"`
	Name        string       `json:"name"`
	State       State        `json:"state"`
	LastSuccess *metav1.Time `json:"lastSuccess,omitempty"`
	NextRun     *metav1.Time `json:"nextRun,omitempty"`
	// FailedSince counts the failed runs that finished after the last success.
	FailedSince int `json:"failedSinceLastSuccess"`
	// LastFailure is the newest failed run's class and message.
	LastFailure string `json:"lastFailure,omitempty"`
	Running     int    `json:"running"`
	// Queued counts runs parked for a repository slot.
	Queued int `json:"queued"`
	// HeldDeletions counts deleted Snapshots whose data stays for now.
	HeldDeletions int `json:"heldDeletions"`
}

// Repository is one repository's line.
type Repository struct {
	Kind          string `json:"kind"`
	Namespace     string `json:"namespace,omitempty"`
	Name          string `json:"name"`
	Phase         string `json:"phase"`
	Suspended     bool   `json:"suspended,omitempty"`
	Running       int    `json:"running"`
	Queued        int    `json:"queued"`
	HeldDeletions int    `json:"heldDeletions"`
	Snapshots     *int64 `json:"snapshots,omitempty"`
	Bytes         *int64 `json:"bytes,omitempty"`
}

// Report is the whole summary, each list sorted by namespace and name.
type Report struct {
	Policies     []Policy     `json:"policies"`
	Repositories []Repository `json:"repositories"`
}

// run says what a Snapshot is doing now.
type run struct{ running, queued, held bool }

func classify(s *snapv1.Snapshot) run {
	if s.DeletionTimestamp != nil {
		// The breaker holds with True, the other reasons wait with False;
		// only "Deleting" is a deletion under way.
		c := meta.FindStatusCondition(s.Status.Conditions, wellknown.ConditionDeletionHeld)
		return run{held: c != nil && c.Reason != wellknown.ReasonDeletionInProgress}
	}
	if s.Status.Phase.IsTerminal() {
		return run{}
	}
	if s.Status.Job != nil || s.Status.Phase == snapv1.SnapshotRunning {
		return run{running: true}
	}
	c := meta.FindStatusCondition(s.Status.Conditions, wellknown.ConditionRepositorySlotAvailable)
	return run{queued: c != nil && c.Status == metav1.ConditionFalse}
}

// Summarize builds the report.
func Summarize(in Input) Report {
	rep := Report{Policies: []Policy{}, Repositories: []Repository{}}
	repoIdx := map[string]int{}
	for i := range in.Repositories {
		r := &in.Repositories[i]
		repoIdx[key(snapv1.KindRepository, r.Namespace, r.Name)] = len(rep.Repositories)
		rep.Repositories = append(rep.Repositories, repository(snapv1.KindRepository, r.Namespace, r.Name, &r.Spec, &r.Status))
	}
	for i := range in.ClusterRepositories {
		r := &in.ClusterRepositories[i]
		repoIdx[key(snapv1.KindClusterRepository, "", r.Name)] = len(rep.Repositories)
		rep.Repositories = append(rep.Repositories, repository(snapv1.KindClusterRepository, "", r.Name, &r.Spec.RepositorySpec, &r.Status))
	}
	byPolicy := map[string][]*snapv1.Snapshot{}
	for i := range in.Snapshots {
		s := &in.Snapshots[i]
		if p := s.Labels[wellknown.LabelConfig]; p != "" {
			byPolicy[s.Namespace+"/"+p] = append(byPolicy[s.Namespace+"/"+p], s)
		}
		if ref := repositoryOf(s); ref != nil {
			if j, ok := repoIdx[key(ref.Kind, ref.Namespace, ref.Name)]; ok {
				r := classify(s)
				rep.Repositories[j].Running += b2i(r.running)
				rep.Repositories[j].Queued += b2i(r.queued)
				rep.Repositories[j].HeldDeletions += b2i(r.held)
			}
		}
	}
	for i := range in.Policies {
		p := &in.Policies[i]
		rep.Policies = append(rep.Policies, policy(p, in.Schedules, byPolicy[p.Namespace+"/"+p.Name]))
	}
	sort.Slice(rep.Policies, func(i, j int) bool {
		a, b := rep.Policies[i], rep.Policies[j]
		return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
	})
	sort.Slice(rep.Repositories, func(i, j int) bool {
		a, b := rep.Repositories[i], rep.Repositories[j]
		return key(snapv1.RepositoryKind(a.Kind), a.Namespace, a.Name) < key(snapv1.RepositoryKind(b.Kind), b.Namespace, b.Name)
	})
	return rep
}

func policy(p *snapv1.SnapshotPolicy, schedules []snapv1.SnapshotSchedule, runs []*snapv1.Snapshot) Policy {
	out := Policy{Namespace: p.Namespace, Name: p.Name, LastSuccess: p.Status.LastSuccessfulSnapshot}
	next, active, _ := coverage.Firing(schedules, p)
	out.NextRun = next
	var newest *snapv1.Snapshot
	for _, s := range runs {
		r := classify(s)
		out.Running += b2i(r.running)
		out.Queued += b2i(r.queued)
		out.HeldDeletions += b2i(r.held)
		if s.DeletionTimestamp != nil || !s.Status.Phase.IsTerminal() {
			continue
		}
		end := endOf(s)
		if s.Status.Phase == snapv1.SnapshotFailed && (out.LastSuccess == nil || end.After(out.LastSuccess.Time)) {
			out.FailedSince++
		}
		if newest == nil || end.After(endOf(newest).Time) {
			newest = s
		}
	}
	switch {
	case p.Spec.Suspend:
		out.State = Suspended
	case newest != nil && newest.Status.Phase == snapv1.SnapshotFailed:
		out.State = Failing
	case !active:
		out.State = Unscheduled
	default:
		out.State = OK
	}
	if newest != nil && newest.Status.Phase == snapv1.SnapshotFailed && newest.Status.Failure != nil {
		out.LastFailure = newest.Status.Failure.Class + ": " + newest.Status.Failure.Message
	}
	return out
}

func repository(kind snapv1.RepositoryKind, ns, name string, spec *snapv1.RepositorySpec, st *snapv1.RepositoryStatus) Repository {
	r := Repository{Kind: string(kind), Namespace: ns, Name: name, Phase: string(st.Phase), Suspended: spec.Suspend}
	if r.Phase == "" {
		r.Phase = "Pending"
	}
	if s := st.StorageStats; s != nil {
		r.Snapshots, r.Bytes = s.SnapshotCount, s.TotalSize
	}
	return r
}

// repositoryOf is the repository a run writes to, as resolved by its run
// or pinned in its spec.
func repositoryOf(s *snapv1.Snapshot) *snapv1.RepositoryRef {
	var ref *snapv1.RepositoryRef
	switch {
	case s.Status.Resolved != nil && s.Status.Resolved.Repository != nil:
		ref = s.Status.Resolved.Repository
	case s.Spec.Repository != nil:
		ref = s.Spec.Repository
	default:
		return nil
	}
	q := ref.Qualified(s.Namespace)
	return &q
}

func endOf(s *snapv1.Snapshot) metav1.Time {
	if s.Status.Timing != nil && s.Status.Timing.EndTime != nil {
		return *s.Status.Timing.EndTime
	}
	return s.CreationTimestamp
}

func key(kind snapv1.RepositoryKind, ns, name string) string {
	return string(kind) + "/" + ns + "/" + name
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
