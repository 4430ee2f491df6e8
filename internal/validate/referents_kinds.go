package validate

import (
	"context"
	"reflect"
	"sort"
	"strings"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/privilege"
)

// SnapshotReferents checks a new Snapshot against its policy. A policy that
// cannot be read is allowed: the snapshot function resolves it again.
func SnapshotReferents(ctx context.Context, lk Lookup, s *snapv1.Snapshot) Result {
	var r Result
	r.Merge(Tenancy(ctx, lk, s.Namespace, s.Spec.Repository).Via("spec.repository"))
	if s.Spec.PolicyRef == nil {
		return r
	}
	if lk == nil {
		r.Warn("the policy checks were skipped (no cluster access); the snapshot function checks again before running")
		return r
	}
	ns := s.Spec.PolicyRef.Namespace
	if ns == "" {
		ns = s.Namespace
	}
	if ns != s.Namespace {
		// Refused by Snapshot; reading it would tell the requester about
		// another namespace's policy.
		return r
	}
	p, err := lk.SnapshotPolicy(ctx, ns, s.Spec.PolicyRef.Name)
	if err != nil {
		r.Warn("could not read SnapshotPolicy %s/%s (%v); allowed, and checked again before running", ns, s.Spec.PolicyRef.Name, err)
		return r
	}
	if p == nil {
		r.Warn("SnapshotPolicy %s/%s does not exist yet; this Snapshot stays Pending until it does", ns, s.Spec.PolicyRef.Name)
		return r
	}
	if s.Spec.Repository == nil && p.Spec.Repository != nil {
		// The repository the run would write to is the policy's: the
		// namespace must still be allowed to use it when the run is made.
		r.Merge(Tenancy(ctx, lk, s.Namespace, p.Spec.Repository).Via("spec.policyRef"))
	}
	if src := s.Spec.Source; src != nil {
		// The run checks this again; admission says it first.
		switch i := int(src.SourceIndex); {
		case i >= len(p.Spec.Sources):
			r.Also(fieldErr("spec.source.sourceIndex", "is %d, but SnapshotPolicy `%s` has %d sources; remove spec.source, or run `snapflow snapshot now --policy %s`", i, p.Name, len(p.Spec.Sources), p.Name))
		case p.Spec.Sources[i].PVC == nil && p.Spec.Sources[i].PVCSelector == nil:
			r.Also(fieldErr("spec.source.sourceIndex", "pins source %d of SnapshotPolicy `%s`, which is not a PVC source, so it cannot take PVC %s; remove spec.source", i, p.Name, src.Target.PVC.Name))
		}
	}
	if s.Spec.Source == nil {
		for _, src := range p.Spec.Sources {
			if src.PVCSelector != nil {
				r.Also(missing("spec.source", "spec.source: SnapshotPolicy `"+p.Name+"` uses a pvcSelector, which expands to one Snapshot per matched PersistentVolumeClaim, so a Snapshot against it must carry spec.source naming the PVC it covers. Fix: run `snapflow snapshot now --policy "+p.Name+"`, or let a SnapshotSchedule fire it; both expand the selector for you"))
				break
			}
		}
	}
	if len(p.Spec.Repositories) > 0 {
		valid := make([]string, 0, len(p.Spec.Repositories))
		member := false
		for _, ref := range p.Spec.Repositories {
			valid = append(valid, RepoKey(ref, p.Namespace))
			if s.Spec.Repository != nil && RepoKey(ref, p.Namespace) == RepoKey(*s.Spec.Repository, s.Namespace) {
				member = true
			}
		}
		sort.Strings(valid)
		switch {
		case s.Spec.Repository == nil:
			r.Also(missing("spec.repository", "spec.repository: SnapshotPolicy `"+p.Name+"` lists multiple repositories (spec.repositories), so a child must pin exactly one member at mint time; set spec.repository to one of: "+strings.Join(valid, ", ")+", or run `snapflow snapshot now --policy "+p.Name+"` to fan out to all"))
		case !member:
			r.Also(fieldErr("spec.repository", "pins %s, but SnapshotPolicy `%s` does not list that repository (current set: %s)", RepoKey(*s.Spec.Repository, s.Namespace), p.Name, strings.Join(valid, ", ")))
		}
	} else if s.Spec.Repository != nil && p.Spec.Repository != nil && RepoKey(*s.Spec.Repository, s.Namespace) != RepoKey(*p.Spec.Repository, p.Namespace) {
		r.Also(fieldErr("spec.repository", "pins %s, but SnapshotPolicy `%s` writes to %s; remove spec.repository or name the policy's repository", RepoKey(*s.Spec.Repository, s.Namespace), p.Name, RepoKey(*p.Spec.Repository, p.Namespace)))
	}
	return r
}

// RestoreReferents checks tenancy and, for a fromPolicy restore, that the
// repository to read from is unambiguous.
func RestoreReferents(ctx context.Context, lk Lookup, rs *snapv1.Restore) Result {
	var r Result
	r.Merge(Tenancy(ctx, lk, rs.Namespace, rs.Spec.Repository).Via("spec.repository"))
	privilegeWarning(ctx, lk, rs.Namespace, "the mover", privilege.Mover(nil, rs.Spec.Mover, nil), &r)
	if id := rs.Spec.Source.Identity; id != nil && rs.Spec.Repository != nil {
		r.Merge(IdentityOwnership(ctx, lk, rs.Namespace, *rs.Spec.Repository, id.Hostname, "spec.source.identity.hostname"))
	}
	fp := rs.Spec.Source.FromPolicy
	if fp == nil {
		return r
	}
	if lk == nil {
		r.Warn("the repository choice of this fromPolicy restore was not checked (no cluster access); the restore function checks it before resolving")
		return r
	}
	ns := fp.Namespace
	if ns == "" {
		ns = rs.Namespace
	}
	if ns != rs.Namespace {
		// Admission reads with its own rights, so what it found there would
		// tell the requester about another namespace's policy; the restore
		// function reads it only while the Restore's author may.
		r.Warn("SnapshotPolicy %s/%s is in another namespace, so it is not checked here: the restore function reads it only while you may get it and list its Snapshots there", ns, fp.Name)
		return r
	}
	p, err := lk.SnapshotPolicy(ctx, ns, fp.Name)
	if err != nil || p == nil {
		if err != nil {
			r.Warn("could not read SnapshotPolicy %s/%s (%v); the restore function checks the repository choice before resolving", ns, fp.Name, err)
		}
		return r
	}
	refs := PolicyRefs(p)
	valid := make([]string, 0, len(refs))
	member := rs.Spec.Repository == nil
	for _, ref := range refs {
		valid = append(valid, RepoKey(ref, p.Namespace))
		if rs.Spec.Repository != nil && RepoKey(ref, p.Namespace) == RepoKey(*rs.Spec.Repository, rs.Namespace) {
			member = true
		}
	}
	sort.Strings(valid)
	switch {
	case len(p.Spec.Repositories) > 0 && rs.Spec.Repository == nil:
		r.Also(missing("spec.repository", "spec.repository: SnapshotPolicy `"+p.Name+"` lists multiple repositories (spec.repositories), so a fromPolicy restore must say which one to read: set spec.repository to one of: "+strings.Join(valid, ", ")))
	case !member:
		r.Also(fieldErr("spec.repository", "names %s, which is not a repository of SnapshotPolicy `%s`; use one of: %s", RepoKey(*rs.Spec.Repository, rs.Namespace), p.Name, strings.Join(valid, ", ")))
	}
	return r
}

// RepositoryPrivilege warns when a namespaced Repository's moverDefaults or
// filesystem backend (a bare node path, an inline NFS export) would have its
// movers refused at run time.
func RepositoryPrivilege(ctx context.Context, lk Lookup, repo *snapv1.Repository) Result {
	var r Result
	vol := privilege.RepositoryVolume(repo.Spec.Backend.Filesystem)
	privilegeWarning(ctx, lk, repo.Namespace, "the mover", privilege.Mover(repo.Spec.MoverDefaults, nil, vol), &r)
	return r
}

// RepositoryReferents guards an identityDefaults edit that would re-identify
// consumer policies with history. key is the repository's RepoKey.
func RepositoryReferents(ctx context.Context, lk Lookup, key string, annotations map[string]string, old, cur *snapv1.RepositorySpec) Result {
	var r Result
	if old == nil || reflect.DeepEqual(old.IdentityDefaults, cur.IdentityDefaults) {
		return r
	}
	if lk == nil {
		r.Warn("identityDefaults changed, but the consumer policies could not be checked (no cluster access); policies that resolve their identity through this repository will write under a new identity")
		return r
	}
	policies, err := lk.SnapshotPolicies(ctx)
	if err != nil {
		r.Warn("identityDefaults changed, but SnapshotPolicies could not be listed (%v) to find consumers with history", err)
		return r
	}
	var affected []string
	for _, p := range policies {
		if p.Status.LastSuccessfulSnapshot == nil {
			continue
		}
		if p.Spec.Identity != nil && p.Spec.Identity.Username != "" && p.Spec.Identity.Hostname != "" {
			continue // a fully pinned identity does not depend on the repository
		}
		for _, ref := range PolicyRefs(&p) {
			if RepoKey(ref, p.Namespace) == key {
				affected = append(affected, p.Namespace+"/"+p.Name)
				break
			}
		}
	}
	if len(affected) == 0 {
		return r
	}
	sort.Strings(affected)
	shown := affected
	if len(shown) > 5 {
		shown = append(append([]string(nil), shown[:5]...), "...")
	}
	if strings.TrimSpace(annotations[wellknown.AnnotationAllowIdentityChange]) != "" {
		r.Warn("identityDefaults changed with %s set: %d consumer policies with history will write under a new identity: %s", wellknown.AnnotationAllowIdentityChange, len(affected), strings.Join(shown, ", "))
		return r
	}
	r.Also(fieldErr("spec.identityDefaults", "this edit changes identityDefaults, which would re-identify %d consumer policies with snapshot history (%s): their next backups would start a new kopia lineage. To intentionally re-identify, set annotation %s (any non-empty value) on this repository; or pin an explicit spec.identity (both username AND hostname) on the affected policies first", len(affected), strings.Join(shown, ", "), wellknown.AnnotationAllowIdentityChange))
	return r
}
