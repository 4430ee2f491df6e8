package validate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"knative.dev/pkg/apis"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/identity"
	"github.com/snapflow/snapflow/internal/privilege"
	"github.com/snapflow/snapflow/internal/volumepolicy"
)

// Lookup reads the other objects that cross-object rules need. Each getter
// returns (nil, nil) when the object does not exist, and an error only when
// it could not be read.
type Lookup interface {
	Namespace(ctx context.Context, name string) (*corev1.Namespace, error)
	Repository(ctx context.Context, namespace, name string) (*snapv1.Repository, error)
	ClusterRepository(ctx context.Context, name string) (*snapv1.ClusterRepository, error)
	SnapshotPolicy(ctx context.Context, namespace, name string) (*snapv1.SnapshotPolicy, error)
	// SnapshotPolicies lists every policy in the cluster.
	SnapshotPolicies(ctx context.Context) ([]snapv1.SnapshotPolicy, error)
	// PVCs lists the metadata of the PersistentVolumeClaims in namespace.
	PVCs(ctx context.Context, namespace string) ([]metav1.ObjectMeta, error)
	// Snapshots and Restores list those of namespace ("": every namespace).
	Snapshots(ctx context.Context, namespace string) ([]snapv1.Snapshot, error)
	Restores(ctx context.Context, namespace string) ([]snapv1.Restore, error)
	// ConfigMap reads a ConfigMap (nil when it does not exist).
	ConfigMap(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error)
}

// What happens when a referent cannot be read: tenancy fails closed (a
// namespace never gains access to a repository by accident); every other
// cross-object check fails open with a warning, because the functions run
// the same checks again before acting.

// ErrNotGiven is what an offline Lookup returns for an object that is not
// among the manifests it was given: absent from the files, not from the cluster.
var ErrNotGiven = errors.New("not among the given manifests")

// Tenancy checks that a ClusterRepository lets consumerNS use it. Offline,
// a ClusterRepository that was not given is reported as unchecked.
func Tenancy(ctx context.Context, lk Lookup, consumerNS string, ref *snapv1.RepositoryRef) Result {
	var r Result
	r.Also(tenancy(ctx, lk, consumerNS, ref, &r))
	return r
}

func tenancy(ctx context.Context, lk Lookup, consumerNS string, ref *snapv1.RepositoryRef, r *Result) *apis.FieldError {
	if ref == nil || ref.Kind != snapv1.KindClusterRepository {
		return nil
	}
	if lk == nil {
		return fieldErr("", "cannot check that namespace %q may use ClusterRepository %q: no cluster access to read it; denying (fail-closed)", consumerNS, ref.Name)
	}
	cr, err := lk.ClusterRepository(ctx, ref.Name)
	if errors.Is(err, ErrNotGiven) {
		r.Warn("ClusterRepository %q is not among the given manifests, so whether namespace %q may use it was not checked", ref.Name, consumerNS)
		return nil
	}
	if err != nil {
		return fieldErr("", "cannot read ClusterRepository %q to check that namespace %q may use it (%v); denying (fail-closed)", ref.Name, consumerNS, err)
	}
	if cr == nil {
		return fieldErr("name", "ClusterRepository %q does not exist; create it first (or fix the name) so its allowedNamespaces can be checked", ref.Name)
	}
	an := cr.Spec.AllowedNamespaces
	switch {
	case an == nil:
		return fieldErr("", "ClusterRepository %q has no allowedNamespaces, so no namespace may use it; ask its owner to add %q to spec.allowedNamespaces", ref.Name, consumerNS)
	case an.All != nil && *an.All:
		return nil
	case an.List != nil:
		for _, ns := range an.List {
			if ns == consumerNS {
				return nil
			}
		}
		return fieldErr("", "namespace %q is not in the allowedNamespaces of ClusterRepository %q; ask its owner to add it to spec.allowedNamespaces.list", consumerNS, ref.Name)
	case an.Selector != nil:
		sel, err := metav1.LabelSelectorAsSelector(an.Selector)
		if err != nil {
			return fieldErr("", "ClusterRepository %q has an invalid allowedNamespaces.selector (%v); denying (fail-closed)", ref.Name, err)
		}
		ns, err := lk.Namespace(ctx, consumerNS)
		if errors.Is(err, ErrNotGiven) {
			r.Warn("namespace %q is not among the given manifests, so its labels could not be matched against the allowedNamespaces.selector of ClusterRepository %q", consumerNS, ref.Name)
			return nil
		}
		if err != nil || ns == nil {
			return fieldErr("", "ClusterRepository %q gates by label selector but namespace %q labels were not available to evaluate; denying (fail-closed)", ref.Name, consumerNS)
		}
		if sel.Matches(labels.Set(ns.Labels)) {
			return nil
		}
		return fieldErr("", "namespace %q does not match the allowedNamespaces.selector of ClusterRepository %q (%s); label the namespace or ask the repository's owner to widen the selector", consumerNS, ref.Name, sel.String())
	}
	return fieldErr("", "ClusterRepository %q allows no namespaces; denying", ref.Name)
}

// PolicyRefs is every repository a policy writes to, in spec order.
func PolicyRefs(p *snapv1.SnapshotPolicy) []snapv1.RepositoryRef {
	if p.Spec.Repository != nil {
		return []snapv1.RepositoryRef{*p.Spec.Repository}
	}
	return p.Spec.Repositories
}

func refField(p *snapv1.SnapshotPolicy, i int) string {
	if p.Spec.Repository != nil {
		return "spec.repository"
	}
	return fmt.Sprintf("spec.repositories[%d]", i)
}

// identityDefaults reads the identityDefaults of a referenced repository.
func identityDefaults(ctx context.Context, lk Lookup, ref snapv1.RepositoryRef, ns string) (*snapv1.IdentityDefaults, error) {
	if ref.Kind == snapv1.KindClusterRepository {
		cr, err := lk.ClusterRepository(ctx, ref.Name)
		if err != nil || cr == nil {
			return nil, err
		}
		return cr.Spec.IdentityDefaults, nil
	}
	if ref.Namespace != "" {
		ns = ref.Namespace
	}
	r, err := lk.Repository(ctx, ns, ref.Name)
	if err != nil || r == nil {
		return nil, err
	}
	return r.Spec.IdentityDefaults, nil
}

// IdentityOwnership refuses a kopia hostname of another namespace in a
// namespace-bound repository (a ClusterRepository, unless annotated as
// Shared): writing, restoring or deleting under it would touch another
// tenant's backups. An unreadable repository is left to Tenancy, which
// fails closed on its own.
func IdentityOwnership(ctx context.Context, lk Lookup, consumerNS string, ref snapv1.RepositoryRef, hostname, field string) Result {
	var r Result
	if lk == nil || ref.Kind != snapv1.KindClusterRepository || hostname == "" {
		return r
	}
	cr, err := lk.ClusterRepository(ctx, ref.Name)
	if err != nil || cr == nil {
		return r
	}
	if !identity.NamespaceBound(ref.Kind, cr.Annotations) {
		return r
	}
	if pr := identity.OwnerProblem(hostname, consumerNS); pr != "" {
		r.Also(fieldErr(field, "%s", pr))
	}
	return r
}

// addresses is where a policy writes in one repository: user@host:path per
// concrete source, and user@host:<selector> for a selector whose paths are
// only known at expansion time.
func addresses(p *snapv1.SnapshotPolicy, id identity.Identity) map[string]bool {
	out := map[string]bool{}
	for i, src := range p.Spec.Sources {
		var path string
		switch {
		case src.PVC != nil:
			path = identity.PVCSourcePath(src, p.Namespace, src.PVC.Name)
		case src.NFS != nil:
			path = identity.NFSSourcePath(src)
		case src.Stream != nil:
			path = identity.StreamSourcePath(src)
		default:
			path = fmt.Sprintf("<selector %d, %s>", i, src.SourcePathStrategy)
		}
		out[id.String()+":"+path] = true
	}
	return out
}

// PolicyReferents runs the checks that read other objects. old is nil on CREATE.
func PolicyReferents(ctx context.Context, lk Lookup, p, old *snapv1.SnapshotPolicy) Result {
	var r Result
	refs := PolicyRefs(p)
	for i := range refs {
		r.Merge(Tenancy(ctx, lk, p.Namespace, &refs[i]).Via(refField(p, i)))
	}
	if lk == nil {
		r.Warn("identity collision and identity-change checks were skipped (no cluster access); snapflow checks again before each backup")
		return r
	}
	if rp := p.Spec.ResourcePolicy; rp != nil && rp.Name != "" && (old == nil || old.Spec.ResourcePolicy == nil || *old.Spec.ResourcePolicy != *rp) {
		// Checked when set or changed only: a ConfigMap edited since must
		// not block the policy's own finalizer updates.
		r.Merge(resourcePolicyReferent(ctx, lk, p.Namespace, rp.Name))
	}
	escalations := privilege.Mover(nil, p.Spec.Mover, nil)
	for _, src := range p.Spec.Sources {
		escalations = append(escalations, privilege.Export(src.NFS)...)
	}
	privilegeWarning(ctx, lk, p.Namespace, "the mover", escalations, &r)
	if h := p.Spec.Hooks; h != nil {
		for i, hk := range append(append([]snapv1.Hook(nil), h.BeforeSnapshot...), h.AfterSnapshot...) {
			if hk.RunJob != nil {
				privilegeWarning(ctx, lk, p.Namespace, fmt.Sprintf("runJob hook %d", i), privilege.RunJob(&hk.RunJob.JobSpec.Template), &r)
			}
		}
	}

	// Resolve this policy's identity in each repository once.
	ids := make([]identity.Identity, len(refs))
	for i, ref := range refs {
		defaults, err := identityDefaults(ctx, lk, ref, p.Namespace)
		if err != nil {
			r.Warn("could not read %s to resolve the kopia identity (%v); identity checks for it were skipped", RepoKey(ref, p.Namespace), err)
			continue
		}
		id, err := identity.Resolve(p, defaults)
		if err != nil {
			// An invalid explicit identity is already reported on its own field.
			if !explicitIdentityInvalid(p) {
				r.Also(fieldErr(refField(p, i), "%v", err))
			}
			continue
		}
		ids[i] = id
		field := refField(p, i)
		if p.Spec.Identity != nil && p.Spec.Identity.Hostname != "" {
			field = "spec.identity.hostname"
		}
		r.Merge(IdentityOwnership(ctx, lk, p.Namespace, ref, id.Hostname, field))
	}

	for _, res := range []Result{sourceOverlaps(ctx, lk, p), identityCollisions(ctx, lk, p, refs, ids)} {
		if old != nil && res.Errs != nil && (equality.Semantic.DeepEqual(old.Spec, p.Spec) || p.DeletionTimestamp != nil) {
			// An update that leaves the spec alone (a finalizer, a label,
			// an annotation), or any update of a policy being deleted,
			// cannot make a collision or an overlap that matters: refusing
			// it would only wedge whoever maintains or deletes the object,
			// while the functions still refuse such backups before each run.
			res.Warn("%s (let through: this update does not change the spec)", res.Errs.Error())
			res.Errs = nil
		}
		r.Merge(res)
	}
	if old != nil {
		r.Merge(identityChange(ctx, lk, p, old, refs, ids))
	}
	return r
}

func identityCollisions(ctx context.Context, lk Lookup, p *snapv1.SnapshotPolicy, refs []snapv1.RepositoryRef, ids []identity.Identity) Result {
	var r Result
	others, err := lk.SnapshotPolicies(ctx)
	if err != nil {
		r.Warn("could not list SnapshotPolicies to check for identity collisions (%v); allowed, and checked again before each backup", err)
		return r
	}
	for i, ref := range refs {
		if ids[i].Username == "" {
			continue
		}
		key := RepoKey(ref, p.Namespace)
		for _, c := range collisionsIn(ctx, lk, p, ref, ids[i], others) {
			r.Also(fieldErr(refField(p, i), "resolved identity %q collides with existing SnapshotPolicy %s/%s in repository %s; two policies must not share a kopia identity in the same repository (give this policy a distinct spec.identity, or target a different repository)", c.Address, c.Policy.Namespace, c.Policy.Name, key))
		}
	}
	return r
}

// Collision is another SnapshotPolicy that writes to one of a policy's
// kopia addresses (user@host:path) in the same repository.
type Collision struct {
	Policy  *snapv1.SnapshotPolicy
	Address string
}

// IdentityCollisions is the admission check for one repository of p, run
// again before a backup: the webhook may have been bypassed, or a
// repository's identityDefaults changed since the policies were admitted.
func IdentityCollisions(ctx context.Context, lk Lookup, p *snapv1.SnapshotPolicy, ref snapv1.RepositoryRef) ([]Collision, error) {
	defaults, err := identityDefaults(ctx, lk, ref, p.Namespace)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", RepoKey(ref, p.Namespace), err)
	}
	id, err := identity.Resolve(p, defaults)
	if err != nil {
		return nil, err
	}
	others, err := lk.SnapshotPolicies(ctx)
	if err != nil {
		return nil, fmt.Errorf("list SnapshotPolicies: %w", err)
	}
	return collisionsIn(ctx, lk, p, ref, id, others), nil
}

// Earlier is the colliding policy that was there first, if any: at run
// time the older policy keeps its lineage and the newer one stops, so a
// policy slipped past admission cannot halt another's backups.
func Earlier(p *snapv1.SnapshotPolicy, cs []Collision) *Collision {
	for i := range cs {
		o := cs[i].Policy
		ot, pt := o.CreationTimestamp, p.CreationTimestamp
		if ot.Before(&pt) || (ot.Equal(&pt) && o.Namespace+"/"+o.Name < p.Namespace+"/"+p.Name) {
			return &cs[i]
		}
	}
	return nil
}

// collisionsIn compares p's addresses under id in ref with every other
// policy writing to the same repository.
func collisionsIn(ctx context.Context, lk Lookup, p *snapv1.SnapshotPolicy, ref snapv1.RepositoryRef, id identity.Identity, others []snapv1.SnapshotPolicy) []Collision {
	var out []Collision
	mine := addresses(p, id)
	key := RepoKey(ref, p.Namespace)
	for oi := range others {
		o := &others[oi]
		if o.Namespace == p.Namespace && o.Name == p.Name {
			continue
		}
		for _, oref := range PolicyRefs(o) {
			if RepoKey(oref, o.Namespace) != key {
				continue
			}
			defaults, err := identityDefaults(ctx, lk, oref, o.Namespace)
			if err != nil {
				continue
			}
			oid, err := identity.Resolve(o, defaults)
			if err != nil {
				continue
			}
			for addr := range addresses(o, oid) {
				if mine[addr] {
					out = append(out, Collision{Policy: o, Address: addr})
				}
			}
		}
	}
	slices.SortStableFunc(out, func(a, b Collision) int { return strings.Compare(a.Address, b.Address) })
	return out
}

func identityChange(ctx context.Context, lk Lookup, p, old *snapv1.SnapshotPolicy, refs []snapv1.RepositoryRef, ids []identity.Identity) Result {
	var r Result
	if old.Status.LastSuccessfulSnapshot == nil || strings.TrimSpace(p.Annotations[wellknown.AnnotationAllowIdentityChange]) != "" {
		return r
	}
	fork := func(path, from, to string) {
		r.Also(fieldErr(path, "this edit changes the policy's resolved kopia identity from %q to %q, but the policy already has snapshot history; new snapshots would land under a new kopia source while the old lineage's Snapshot CRs keep competing in the same GFS retention timeline, and restore and verify resolve only the new identity. To intentionally re-identify, set annotation %s (any non-empty value)", from, to, wellknown.AnnotationAllowIdentityChange))
	}
	oldRefs := PolicyRefs(old)
	oldByKey := map[string]snapv1.RepositoryRef{}
	for _, ref := range oldRefs {
		oldByKey[RepoKey(ref, old.Namespace)] = ref
	}
	newKeys := map[string]bool{}
	for i, ref := range refs {
		key := RepoKey(ref, p.Namespace)
		newKeys[key] = true
		oref, ok := oldByKey[key]
		if !ok || ids[i].Username == "" {
			continue
		}
		defaults, err := identityDefaults(ctx, lk, oref, old.Namespace)
		if err != nil {
			continue
		}
		oid, err := identity.Resolve(old, defaults)
		if err == nil && oid != ids[i] {
			fork("spec.identity", oid.String(), ids[i].String())
		}
	}
	// A PVC source or NFS export whose path changes forks that source's
	// lineage.
	oldPaths := map[string]string{}
	for _, src := range old.Spec.Sources {
		switch {
		case src.PVC != nil:
			oldPaths["pvc/"+src.PVC.Name] = identity.PVCSourcePath(src, old.Namespace, src.PVC.Name)
		case src.NFS != nil:
			oldPaths["nfs/"+src.NFS.Server+":"+src.NFS.Path] = identity.NFSSourcePath(src)
		}
	}
	for i, src := range p.Spec.Sources {
		key, now := "", ""
		switch {
		case src.PVC != nil:
			key, now = "pvc/"+src.PVC.Name, identity.PVCSourcePath(src, p.Namespace, src.PVC.Name)
		case src.NFS != nil:
			key, now = "nfs/"+src.NFS.Server+":"+src.NFS.Path, identity.NFSSourcePath(src)
		}
		if was, ok := oldPaths[key]; ok && key != "" && now != was {
			fork(fmt.Sprintf("spec.sources[%d].sourcePathOverride", i), was, now)
		}
		if src.NFS != nil && i < len(old.Spec.Sources) {
			if prev := old.Spec.Sources[i]; prev.NFS != nil && prev.NFS.Server != src.NFS.Server && identity.NFSSourcePath(prev) == now {
				r.Warn("spec.sources[%d].nfs.server changed from %q to %q while the kopia source path stays %q: the existing snapshot lineage continues with the new server's data, and retention treats both as one history", i, prev.NFS.Server, src.NFS.Server, now)
			}
		}
		if src.PVCSelector != nil && i < len(old.Spec.Sources) && old.Spec.Sources[i].PVCSelector != nil &&
			strategy(old.Spec.Sources[i]) != strategy(src) {
			fork(fmt.Sprintf("spec.sources[%d].sourcePathStrategy", i), string(strategy(old.Spec.Sources[i])), string(strategy(src)))
		}
	}
	var removed []string
	for key := range oldByKey {
		if !newKeys[key] {
			removed = append(removed, key)
		}
	}
	sort.Strings(removed)
	for _, key := range removed {
		r.Warn("repository %s was removed from a policy with snapshot history: its existing snapshots stay there, but no new backups go to it and retention no longer prunes them", key)
	}
	return r
}

func strategy(s snapv1.Source) snapv1.SourcePathStrategy {
	if s.SourcePathStrategy == "" {
		return snapv1.SourcePathPvcName
	}
	return s.SourcePathStrategy
}

func explicitIdentityInvalid(p *snapv1.SnapshotPolicy) bool {
	id := p.Spec.Identity
	return id != nil && ((id.Username != "" && identity.ComponentProblem(id.Username) != "") ||
		(id.Hostname != "" && identity.ComponentProblem(id.Hostname) != ""))
}

// resourcePolicyReferent checks the volume policies a policy names: an
// invalid document fails every run, so it is refused; one not there yet
// (GitOps may apply it next) or not readable is a warning.
func resourcePolicyReferent(ctx context.Context, lk Lookup, ns, name string) Result {
	var r Result
	cm, err := lk.ConfigMap(ctx, ns, name)
	switch {
	case errors.Is(err, ErrNotGiven):
		r.Warn("spec.resourcePolicy: ConfigMap %s/%s is not among the given manifests, so its volume policies were not checked", ns, name)
		return r
	case err != nil:
		r.Warn("spec.resourcePolicy: could not read ConfigMap %s/%s (%v); its volume policies were not checked, and every run checks them again", ns, name, err)
		return r
	case cm == nil:
		r.Warn("spec.resourcePolicy: ConfigMap %s/%s does not exist; every run of this policy fails until it is created", ns, name)
		return r
	}
	doc, err := volumepolicy.FromConfigMap(cm)
	if err == nil {
		var warnings []string
		warnings, err = doc.Validate()
		for _, w := range warnings {
			r.Warn("spec.resourcePolicy: ConfigMap %s/%s: %s", ns, name, w)
		}
	}
	if err != nil {
		r.Also(fieldErr("spec.resourcePolicy.name", "ConfigMap %s/%s holds invalid volume policies, so every run of this policy would fail: %v", ns, name, err))
	}
	return r
}
