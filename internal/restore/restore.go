// Package restore holds the pure decisions of a restore: which snapshot
// a query selects, how the tri-state options map onto kopia, and what to do
// when nothing matches. The restore function and the mover both call it, so
// a resolution made in either place is the same.
package restore

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/internal/kopia"
)

// ErrNoSnapshot means no snapshot matches a query.
var ErrNoSnapshot = errors.New("no snapshot matches")

// ErrAmbiguous means a query matches snapshots of several sources.
var ErrAmbiguous = errors.New("the query matches snapshots of several sources")

// Query selects one snapshot of an identity.
type Query struct {
	Username string `json:"username"`
	Hostname string `json:"hostname"`
	// Path is the source path; empty matches any path of the identity (and
	// fails as ambiguous when there is more than one).
	Path string `json:"path,omitempty"`
	// AsOf keeps snapshots taken at or before it.
	AsOf *time.Time `json:"asOf,omitempty"`
	// Offset skips this many newer snapshots (0 is the newest).
	Offset int `json:"offset,omitempty"`
}

func (q Query) String() string {
	s := q.Username + "@" + q.Hostname
	if q.Path != "" {
		s += ":" + q.Path
	}
	if q.AsOf != nil {
		s += " as of " + q.AsOf.UTC().Format(time.RFC3339)
	}
	if q.Offset > 0 {
		s += fmt.Sprintf(" offset %d", q.Offset)
	}
	return s
}

// Pick returns the snapshot q selects from snaps. Incomplete (checkpoint)
// snapshots never count: restoring half a volume is worse than failing.
func Pick(snaps []kopia.SnapshotInfo, q Query) (kopia.SnapshotInfo, error) {
	var match []kopia.SnapshotInfo
	paths := map[string]bool{}
	for _, s := range snaps {
		if s.Incomplete != "" || s.Source.Username != q.Username || s.Source.Hostname != q.Hostname {
			continue
		}
		if q.Path != "" && s.Source.Path != q.Path {
			continue
		}
		if q.AsOf != nil && s.Start.After(*q.AsOf) {
			continue
		}
		match = append(match, s)
		paths[s.Source.Path] = true
	}
	if len(paths) > 1 {
		list := make([]string, 0, len(paths))
		for p := range paths {
			list = append(list, p)
		}
		sort.Strings(list)
		return kopia.SnapshotInfo{}, fmt.Errorf("%w: %s has snapshots of %s; name one path", ErrAmbiguous, q.Username+"@"+q.Hostname, strings.Join(list, ", "))
	}
	return nth(match, q.Offset, q.String())
}

// Candidate is a snapshot known to the cluster as a Snapshot object.
type Candidate struct {
	Name     string
	ID       string
	Taken    time.Time
	Recorded *snapv1.RecordedIdentity
}

// PickCandidate applies asOf and offset to a policy's finished Snapshots.
func PickCandidate(cands []Candidate, asOf *time.Time, offset int, what string) (Candidate, error) {
	var match []Candidate
	for _, c := range cands {
		if c.ID == "" || (asOf != nil && c.Taken.After(*asOf)) {
			continue
		}
		match = append(match, c)
	}
	sort.SliceStable(match, func(i, j int) bool {
		if !match[i].Taken.Equal(match[j].Taken) {
			return match[i].Taken.Before(match[j].Taken)
		}
		return match[i].Name < match[j].Name
	})
	if asOf != nil {
		what += " as of " + asOf.UTC().Format(time.RFC3339)
	}
	return nth(match, offset, what)
}

// nth picks the offset-th newest of a list sorted oldest first.
func nth[T any](sorted []T, offset int, what string) (T, error) {
	var zero T
	if len(sorted) == 0 {
		return zero, fmt.Errorf("%w %s", ErrNoSnapshot, what)
	}
	if offset >= len(sorted) {
		return zero, fmt.Errorf("%w %s at offset %d: only %d snapshots qualify (offset counts back from the newest, which is 0)", ErrNoSnapshot, what, offset, len(sorted))
	}
	return sorted[len(sorted)-1-offset], nil
}

// SourceKind names the kind of source a Restore uses.
func SourceKind(rs *snapv1.Restore) string {
	switch src := rs.Spec.Source; {
	case src.SnapshotRef != nil:
		return "snapshotRef"
	case src.FromPolicy != nil:
		return "fromPolicy"
	case src.Identity != nil:
		return "identity"
	}
	return ""
}

// OnMissing is what to do when nothing is there to restore: Fail for an
// exact source, Continue (an empty volume) for a policy's latest.
func OnMissing(rs *snapv1.Restore) snapv1.OnMissingSnapshot {
	if p := rs.Spec.Policy; p != nil && p.OnMissingSnapshot != "" {
		return p.OnMissingSnapshot
	}
	if rs.Spec.Source.FromPolicy != nil {
		return "Continue"
	}
	return "Fail"
}

// WaitTimeout is how long a restore waits for its source snapshot to exist.
func WaitTimeout(rs *snapv1.Restore) (time.Duration, error) {
	if p := rs.Spec.Policy; p != nil && p.WaitTimeout != "" {
		d, err := time.ParseDuration(p.WaitTimeout)
		if err != nil {
			return 0, fmt.Errorf("spec.policy.waitTimeout %q: %w", p.WaitTimeout, err)
		}
		return d, nil
	}
	return 0, nil
}

// AsOf parses an RFC3339 asOf; empty is nil.
func AsOf(v string) (*time.Time, error) {
	if v == "" {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return nil, fmt.Errorf("asOf %q is not an RFC3339 timestamp: %w", v, err)
	}
	return &t, nil
}

// DefaultParallel matches kopia restore's default.
const DefaultParallel = 8

// Options maps the Restore's tri-state options onto the engine, leaving
// kopia restore's own defaults where a field is unset: overwrite files,
// directories and symlinks, and ignore permission errors (a non-root mover
// cannot chown).
func Options(o *snapv1.RestoreOptions) kopia.RestoreOptions {
	out := kopia.RestoreOptions{
		Parallel: DefaultParallel, OverwriteFiles: true, OverwriteDirectories: true, OverwriteSymlinks: true,
		IgnorePermissionErrors: true,
	}
	if o == nil {
		return out
	}
	set := func(dst *bool, v *bool) {
		if v != nil {
			*dst = *v
		}
	}
	set(&out.DeleteExtra, o.EnableFileDeletion)
	set(&out.IgnorePermissionErrors, o.IgnorePermissionErrors)
	set(&out.WriteFilesAtomically, o.WriteFilesAtomically)
	set(&out.WriteSparseFiles, o.WriteSparseFiles)
	set(&out.SkipOwners, o.SkipOwners)
	set(&out.SkipPermissions, o.SkipPermissions)
	set(&out.SkipTimes, o.SkipTimes)
	set(&out.OverwriteFiles, o.OverwriteFiles)
	set(&out.OverwriteDirectories, o.OverwriteDirectories)
	set(&out.OverwriteSymlinks, o.OverwriteSymlinks)
	set(&out.IgnoreErrors, o.IgnoreErrors)
	set(&out.SkipExisting, o.SkipExisting)
	if o.Parallel != nil && *o.Parallel > 0 {
		out.Parallel = int(*o.Parallel)
	}
	return out
}
