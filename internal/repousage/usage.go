// Package repousage explains what a repository's storage holds and what would
// free it: per kopia identity, the Snapshots that write there, the bytes
// each age of them added, what retention would prune now and whether that
// deletes kopia data, what is pinned or retained, and what full
// maintenance can still reclaim. It decides from the objects it is given
// and the time it is told; it reads nothing itself.
package repousage

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/cleanup"
	"github.com/snapflow/snapflow/internal/retention"
	"github.com/snapflow/snapflow/internal/validate"
)

// Ages splits bytes by how long ago the Snapshot that added them ended.
type Ages struct {
	Day   int64 `json:"last24h"`
	Week  int64 `json:"last7d"`
	Month int64 `json:"last30d"`
	Older int64 `json:"older"`
}

func (a *Ages) add(age time.Duration, n int64) {
	switch {
	case age < 24*time.Hour:
		a.Day += n
	case age < 7*24*time.Hour:
		a.Week += n
	case age < 30*24*time.Hour:
		a.Month += n
	default:
		a.Older += n
	}
}

// Group is one kopia identity's share of the repository.
type Group struct {
	// Identity is the kopia source, user@host:/path.
	Identity string `json:"identity"`
	// Policy is the SnapshotPolicy (namespace/name) its Snapshots came
	// from; empty when they name none.
	Policy string `json:"policy,omitempty"`
	// Snapshots counts the Snapshots that hold data here.
	Snapshots int `json:"snapshots"`
	// LatestSize is the source size of the newest of them.
	LatestSize int64 `json:"latestSizeBytes"`
	// Added is what the Snapshots uploaded when they were taken (kopia's
	// new bytes), by age.
	Added Ages `json:"addedBytes"`
	// Prunes counts the Snapshots retention would prune now, PrunedAdded
	// what they added, and PrunesKeepData those of them whose deletion
	// policy leaves their kopia data in place (Retain, Orphan).
	Prunes         int   `json:"retentionPrunes"`
	PrunedAdded    int64 `json:"retentionPrunedAddedBytes"`
	PrunesKeepData int   `json:"retentionPrunesKeepData"`
	// Pinned counts Snapshots neither retention nor deletion takes the
	// data of (spec.pin, or a deletion policy that keeps it), and
	// PinnedAdded what they added.
	Pinned      int   `json:"pinned"`
	PinnedAdded int64 `json:"pinnedAddedBytes"`
	// Deleting counts Snapshots being deleted: their data goes with the
	// deletion, and its bytes with the full maintenance runs after it.
	Deleting int `json:"deleting"`

	latest time.Time // when the Snapshot LatestSize comes from ended
}

// plus adds o's counts to g's.
func (g *Group) plus(o Group) {
	g.Snapshots += o.Snapshots
	g.LatestSize += o.LatestSize
	g.Added.Day += o.Added.Day
	g.Added.Week += o.Added.Week
	g.Added.Month += o.Added.Month
	g.Added.Older += o.Added.Older
	g.Prunes += o.Prunes
	g.PrunedAdded += o.PrunedAdded
	g.PrunesKeepData += o.PrunesKeepData
	g.Pinned += o.Pinned
	g.PinnedAdded += o.PinnedAdded
	g.Deleting += o.Deleting
}

// Total is the sum of the groups' Added ages.
func (g Group) Total() int64 { return g.Added.Day + g.Added.Week + g.Added.Month + g.Added.Older }

// Report is a repository's usage.
type Report struct {
	// Repository is Kind/name or Kind/namespace/name.
	Repository string `json:"repository"`
	// StoredBytes, BlobCount and ReclaimableBytes are what the last full
	// maintenance run counted (at StoredObservedAt); LogicalBytes and
	// SnapshotCount what the last connect saw.
	StoredBytes      *int64       `json:"storedBytes,omitempty"`
	BlobCount        *int64       `json:"blobCount,omitempty"`
	ReclaimableBytes *int64       `json:"reclaimableBytes,omitempty"`
	StoredObservedAt *metav1.Time `json:"storedObservedAt,omitempty"`
	LogicalBytes     *int64       `json:"logicalBytes,omitempty"`
	SnapshotCount    *int64       `json:"snapshotCount,omitempty"`
	Groups           []Group      `json:"identities"`
	Total            Group        `json:"total"`
	// Notes say what the figures cannot tell.
	Notes []string `json:"notes,omitempty"`
}

// Input is what Explain reads.
type Input struct {
	// Repository is the repository explained, with Namespace set for a
	// Repository; Stats its status.storageStats.
	Repository snapv1.RepositoryRef
	Stats      *snapv1.StorageStats
	// RepositorySuspended is the repository's spec.suspend.
	RepositorySuspended bool
	// Snapshots and Policies are those of every namespace the caller could
	// read; Explain keeps the Snapshots that write to Repository.
	Snapshots []snapv1.Snapshot
	Policies  []snapv1.SnapshotPolicy
	Now       time.Time
}

// Explain builds the report.
func Explain(in Input) Report {
	want := validate.RepoKey(in.Repository, in.Repository.Namespace)
	rep := Report{Repository: want, Groups: []Group{}}
	if ss := in.Stats; ss != nil {
		rep.StoredBytes, rep.BlobCount, rep.ReclaimableBytes, rep.StoredObservedAt = ss.StoredBytes, ss.BlobCount, ss.ReclaimableBytes, ss.StoredObservedAt
		rep.LogicalBytes, rep.SnapshotCount = ss.TotalSize, ss.SnapshotCount
	}
	prunes := map[string]bool{}
	if !in.RepositorySuspended { // retention prunes nothing in a suspended repository
		prunes = retentionPrunes(in.Policies, in.Snapshots)
	}
	groups := map[string]*Group{}
	unknownAdded := 0
	for i := range in.Snapshots {
		s := &in.Snapshots[i]
		ref := repositoryOf(s)
		if ref == nil || validate.RepoKey(*ref, s.Namespace) != want {
			continue
		}
		rec := s.Status.Snapshot
		if !holdsData(s) || rec == nil || rec.KopiaSnapshotID == "" {
			continue
		}
		id := identity(rec.Identity)
		g := groups[id]
		if g == nil {
			g = &Group{Identity: id}
			groups[id] = g
		}
		if p := s.Labels[wellknown.LabelConfig]; p != "" && g.Policy == "" {
			g.Policy = s.Namespace + "/" + p
		}
		g.Snapshots++
		at := ended(s)
		added, size, known := stat(s)
		if !known {
			unknownAdded++
		}
		if g.Snapshots == 1 || at.After(g.latest) {
			g.latest, g.LatestSize = at, size
		}
		g.Added.add(in.Now.Sub(at), added)
		keeps := cleanup.EffectivePolicy(s) != snapv1.DeletionDelete
		switch {
		case s.DeletionTimestamp != nil:
			g.Deleting++
		case s.Spec.Pin || keeps:
			g.Pinned++
			g.PinnedAdded += added
		}
		if prunes[s.Namespace+"/"+s.Name] && s.DeletionTimestamp == nil {
			g.Prunes++
			g.PrunedAdded += added
			if keeps {
				g.PrunesKeepData++
			}
		}
	}
	for _, g := range groups {
		rep.Groups = append(rep.Groups, *g)
	}
	slices.SortFunc(rep.Groups, func(a, b Group) int {
		return cmp.Or(cmp.Compare(b.Total(), a.Total()), cmp.Compare(a.Identity, b.Identity))
	})
	for _, g := range rep.Groups {
		rep.Total.plus(g)
	}
	rep.Total.Identity = "TOTAL"
	if rep.StoredBytes == nil {
		rep.Notes = append(rep.Notes, "no full maintenance run has counted this repository's storage yet: run `snapflow maintenance run NAME --full` to learn what it holds and what is reclaimable")
	}
	if rep.Total.Prunes > 0 {
		rep.Notes = append(rep.Notes, "retention prunes are what GFS would prune now; the mass-deletion budget may hold some of them back")
	}
	if unknownAdded > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%d Snapshots recorded no new-bytes figure and count as adding nothing", unknownAdded))
	}
	return rep
}

// retentionPrunes is the set (namespace/name) of Snapshots each policy's
// retention would prune now, decided as the retention function decides.
func retentionPrunes(policies []snapv1.SnapshotPolicy, snaps []snapv1.Snapshot) map[string]bool {
	byPolicy := map[string][]*snapv1.Snapshot{}
	for i := range snaps {
		s := &snaps[i]
		if p := s.Labels[wellknown.LabelConfig]; p != "" {
			byPolicy[s.Namespace+"/"+p] = append(byPolicy[s.Namespace+"/"+p], s)
		}
	}
	out := map[string]bool{}
	for i := range policies {
		p := &policies[i]
		// As the retention function: a suspended policy, or one being
		// deleted, prunes nothing.
		if p.Spec.Retention == nil || p.Spec.Suspend || p.DeletionTimestamp != nil {
			continue
		}
		members := byPolicy[p.Namespace+"/"+p.Name]
		multi := retention.MultiRepo(p)
		cands := make([]retention.Candidate, len(members))
		for j, s := range members {
			cands[j] = retention.FromSnapshot(s, multi)
		}
		for _, name := range retention.Prune(retention.Select(*p.Spec.Retention, cands)) {
			out[p.Namespace+"/"+name] = true
		}
	}
	return out
}

// holdsData says whether s's kopia snapshot is its own and still stored:
// a backup that succeeded, one being deleted (the cleanup function marks
// it Deleting until the batch removes it) and a discovered one. An
// Unchanged run saved nothing; the earlier snapshot it matched counts.
func holdsData(s *snapv1.Snapshot) bool {
	switch s.Status.Phase {
	case snapv1.SnapshotSucceeded, snapv1.SnapshotDeleting, snapv1.SnapshotDiscovered:
		return true
	}
	return false
}

func repositoryOf(s *snapv1.Snapshot) *snapv1.RepositoryRef {
	if r := s.Status.Resolved; r != nil && r.Repository != nil {
		return r.Repository
	}
	return s.Spec.Repository
}

func identity(id *snapv1.Identity) string {
	if id == nil {
		return "(unrecorded)"
	}
	return id.Username + "@" + id.Hostname + ":" + id.SourcePath
}

func ended(s *snapv1.Snapshot) time.Time {
	if t := s.Status.Timing; t != nil && t.EndTime != nil {
		return t.EndTime.Time
	}
	return s.CreationTimestamp.Time
}

// stat is what s added and its source size; known is false when it
// recorded no new-bytes figure (added is then 0).
func stat(s *snapv1.Snapshot) (added, size int64, known bool) {
	if st := s.Status.Stats; st != nil {
		if st.BytesNew != nil {
			added, known = *st.BytesNew, true
		}
		if st.SizeBytes != nil {
			size = *st.SizeBytes
		}
	}
	return added, size, known
}
