// Package fanout turns one firing of a SnapshotPolicy into the Snapshots
// that run it: one per (PVC, repository) pair, each pinning what the
// admission rules require (spec.source for selector policies, spec.repository
// for multi-repository ones), with deterministic names so a repeated firing
// never mints twice. Schedules, `snapflow snapshot now` and the
// `snapshot requested` event all use it.
package fanout

import (
	"fmt"
	"hash/fnv"
	"regexp"
	"sort"
	"strings"
	"time"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
)

// MaxChildren caps one firing; over it nothing is minted.
const MaxChildren = 400

// SlotFormat is the timestamp in minted names.
const SlotFormat = "20060102150405"

// Child is one Snapshot to mint.
type Child struct {
	Name       string
	Source     *snapv1.SnapshotSource
	Repository *snapv1.RepositoryRef
}

// ErrTooMany is returned (with the count) when a firing exceeds MaxChildren.
type ErrTooMany struct{ N int }

func (e ErrTooMany) Error() string {
	return fmt.Sprintf("the policy expands to %d (PVC, repository) pairs, over the cap of %d per firing; nothing was created. Narrow the pvcSelector or split the policy", e.N, MaxChildren)
}

// Base is the name stem of a firing at slot: <prefix>-<YYYYMMDDHHMMSS>.
func Base(prefix string, slot time.Time) string {
	return prefix + "-" + slot.UTC().Format(SlotFormat)
}

// Children expands policy p for one firing named base. selected maps the
// index of each pvcSelector source to the PVC names it matches now. A PVC
// two sources cover is left out, and the children of the others come with
// an ErrOverlap naming it: one contested label must not stop the backups
// of every other volume of the policy.
func Children(p *snapv1.SnapshotPolicy, base string, selected map[int][]string) ([]Child, error) {
	overlaps := Overlaps(p, selected)
	contested := map[string]bool{}
	for _, o := range overlaps {
		contested[o.PVC] = true
	}
	type src struct {
		ref    *snapv1.SnapshotSource
		marker bool
	}
	var sources []src
	grouped := map[int32]bool{}
	for i, s := range p.Spec.Sources {
		switch {
		case s.PVC != nil:
			if contested[s.PVC.Name] {
				continue
			}
			// A plain PVC source needs no pin; with several sources each child still pins its index.
			var ref *snapv1.SnapshotSource
			if len(p.Spec.Sources) > 1 {
				ref = &snapv1.SnapshotSource{SourceIndex: int32(i), Target: snapv1.SnapshotTarget{PVC: snapv1.PVCTarget{Name: s.PVC.Name}}}
			}
			sources = append(sources, src{ref: ref, marker: len(p.Spec.Sources) > 1})
		case s.PVCSelector != nil:
			names := append([]string(nil), selected[i]...)
			sort.Strings(names)
			members := 0
			for _, n := range names {
				if contested[n] {
					continue
				}
				members++
				sources = append(sources, src{ref: &snapv1.SnapshotSource{SourceIndex: int32(i), Target: snapv1.SnapshotTarget{PVC: snapv1.PVCTarget{Name: n}}}, marker: true})
			}
			grouped[int32(i)] = members > 1 && Grouped(p)
		case (s.NFS != nil || s.Stream != nil) && len(p.Spec.Sources) == 1:
			// The policy's one source: its Snapshot needs no pin.
			sources = append(sources, src{})
		case s.NFS != nil:
			return nil, fmt.Errorf("spec.sources[%d]: an nfs source must be the only source of its SnapshotPolicy, as a Snapshot cannot pin an export; move it to a policy of its own", i)
		default:
			return nil, fmt.Errorf("spec.sources[%d]: a stream source must be the only source of its SnapshotPolicy, as a Snapshot cannot pin a stream; move it to a policy of its own", i)
		}
	}
	repos := []*snapv1.RepositoryRef{nil}
	if len(p.Spec.Repositories) > 0 && p.Spec.Repository == nil {
		repos = repos[:0]
		for i := range p.Spec.Repositories {
			r := p.Spec.Repositories[i]
			if r.Kind == "" {
				r.Kind = snapv1.KindRepository
			}
			repos = append(repos, &r)
		}
	}
	if n := len(sources) * len(repos); n > MaxChildren {
		return nil, ErrTooMany{N: n}
	}
	var out []Child
	for _, s := range sources {
		for _, r := range repos {
			c := Child{Source: s.ref, Repository: r}
			if s.ref != nil && grouped[s.ref.SourceIndex] {
				// One consistent group per source, firing and repository.
				src := *s.ref
				key := ""
				if r != nil {
					key = string(r.Kind) + "/" + r.Namespace + "/" + r.Name
				}
				src.Group = &snapv1.SnapshotGroup{Namespace: p.Namespace, VolumeGroupSnapshotName: GroupName(base, src.SourceIndex, key)}
				c.Source = &src
			}
			c.Name = Name(base, c, s.marker, len(repos) > 1)
			out = append(out, c)
		}
	}
	if len(overlaps) > 0 {
		return out, ErrOverlap{Overlaps: overlaps}
	}
	return out, nil
}

// Grouped says whether the members of p's selector sources share one
// VolumeGroupSnapshot: groupBy VolumeGroupSnapshot, the schema default.
// Clone with a group is refused at admission. A Direct policy's members
// are grouped too, since a volume policy may still decide, per volume at
// run time, to snapshot them; a member that reads its live volume never
// touches the group.
func Grouped(p *snapv1.SnapshotPolicy) bool {
	return p.Spec.GroupBy != snapv1.GroupByNone && p.Spec.CopyMethod != snapv1.CopyClone
}

var nonDNS = regexp.MustCompile(`[^a-z0-9-]+`)

func slug(s string, limit int) string {
	s = strings.Trim(nonDNS.ReplaceAllString(strings.ToLower(s), "-"), "-")
	if len(s) > limit {
		s = strings.TrimRight(s[:limit], "-")
	}
	return s
}

// Name is base[-pvc-<slug>-<h8>][-repo-<slug>-<h8>], at most 63 characters.
// Each hash covers the full unclipped tuple, so clipping never collides.
func Name(base string, c Child, pvcMarker, repoMarker bool) string {
	var suffix string
	if pvcMarker && c.Source != nil {
		pvc := c.Source.Target.PVC.Name
		suffix += "-pvc-" + slug(pvc, 12) + "-" + tag(base, fmt.Sprint(c.Source.SourceIndex), pvc)
	}
	if repoMarker && c.Repository != nil {
		r := c.Repository
		suffix += "-repo-" + slug(r.Name, 10) + "-" + tag(base, string(r.Kind), r.Namespace, r.Name)
	}
	return slug(base, 63-len(suffix)) + suffix
}

// GroupName is the VolumeGroupSnapshot of one firing (base), one selector
// source and one repository (repoKey, "" for a single-repository policy):
// each repository's children read their own group, as the guide says.
// It is base-<...>-vgs<source>-<h8>, at most 63 characters, and the hash
// covers the full tuple, so clipping base never collides.
func GroupName(base string, sourceIndex int32, repoKey string) string {
	suffix := fmt.Sprintf("-vgs%d-%s", sourceIndex, tag(base, fmt.Sprint(sourceIndex), repoKey))
	return slug(base, 63-len(suffix)) + suffix
}

// tag is the hash that keeps a clipped name unique: fnv-32a of parts.
func tag(parts ...string) string {
	h := fnv.New32a()
	h.Write([]byte(strings.Join(parts, "\x00")))
	return fmt.Sprintf("%08x", h.Sum32())
}
