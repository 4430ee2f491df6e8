package snapshot

import (
	"context"
	"errors"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/events"
	"github.com/snapflow/snapflow/functions/host"
	"github.com/snapflow/snapflow/internal/execgrant"
	"github.com/snapflow/snapflow/internal/identity"
	"github.com/snapflow/snapflow/internal/jobwatch"
	"github.com/snapflow/snapflow/internal/kopia"
	"github.com/snapflow/snapflow/internal/mover"
	"github.com/snapflow/snapflow/internal/moverjob"
	"github.com/snapflow/snapflow/internal/privilege"
	"github.com/snapflow/snapflow/internal/projection"
	"github.com/snapflow/snapflow/internal/repository"
	"github.com/snapflow/snapflow/internal/validate"
	"github.com/snapflow/snapflow/internal/volumepolicy"
)

// runPlan is everything resolved for one run.
type runPlan struct {
	policy   *snapv1.SnapshotPolicy
	repo     *repository.Object
	repoWork mover.Repository
	mounts   repository.Mounts
	src      snapv1.Source
	pvc      string
	// nfs is the export of an nfs source (pvc is then empty): the mover
	// mounts it read-only and reads it in place, as nothing can snapshot it.
	nfs *snapv1.NFSExport
	// exec is a stream source's command in the pod it runs in (pvc is
	// then empty): the mover reads its output through pods/exec.
	exec       *mover.ExecWork
	source     kopia.Source
	copyMethod snapv1.CopyMethod
	meta       kopia.Meta
	// escalations need the namespace's opt-in; privilegedAllowed is set
	// once the run's gate has read it.
	escalations       []string
	privilegedAllowed bool
	podSC             *corev1.PodSecurityContext
	sc                *corev1.SecurityContext
	// mover is the policy's mover settings with the workload's identity
	// layered under them (inheritSecurityContextFrom); workload is that
	// workload, notInherited why none was found.
	mover        *snapv1.MoverSpec
	workload     *privilege.Workload
	notInherited *privilege.NotInherited
	// From the volume policies: skip the volume, the snapshot class to
	// stage with, custom parameters for the mover, and the recorded decision.
	skip          bool
	snapshotClass *string
	custom        map[string]any
	decision      snapv1.VolumePolicyDecision
	// project copies the repository's credentials into the run's namespace.
	project bool
	// ignoredGlobal warns that the global volume policies carry sections
	// that never apply ("" when they do not).
	ignoredGlobal string
}

func (p *runPlan) resolved() *snapv1.SnapshotResolved {
	ref := p.repo.Ref
	r := &snapv1.SnapshotResolved{Repository: &ref, Sources: []snapv1.ResolvedSource{{PVC: p.pvc, SourcePath: p.source.Path}}}
	if p.project {
		r.CredentialProjection = &snapv1.CredentialProjection{Enabled: true}
	}
	return r
}

func (p *runPlan) cache() *snapv1.MoverCache {
	return moverjob.EffectiveCache(p.policy.Spec.Mover, p.repo.Spec.MoverDefaults)
}

// plan resolves policy, repository, source and identity. A problem the user
// must fix comes back as a gate (fatal when no change elsewhere can fix it).
func (f *Function) plan(ctx context.Context, s *snapv1.Snapshot) (*runPlan, *gate, error) {
	invalid := func(format string, args ...any) (*runPlan, *gate, error) {
		return nil, &gate{cond: wellknown.ConditionReady, reason: ReasonInvalidSpec, message: fmt.Sprintf(format, args...), fatal: true}, nil
	}
	// The webhook's rules, again: it may have been bypassed.
	if res := validate.Snapshot(s, validate.Options{}); !res.OK() {
		return invalid("the Snapshot is invalid: %v", res.Errs)
	}
	pns := s.Namespace
	if s.Spec.PolicyRef.Namespace != "" {
		pns = s.Spec.PolicyRef.Namespace
	}
	var pol snapv1.SnapshotPolicy
	if err := f.Client.Get(ctx, client.ObjectKey{Namespace: pns, Name: s.Spec.PolicyRef.Name}, &pol); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &gate{cond: wellknown.ConditionReady, reason: "PolicyNotFound",
				message: fmt.Sprintf("SnapshotPolicy %s/%s does not exist; create it (or fix spec.policyRef) and this Snapshot will start", pns, s.Spec.PolicyRef.Name)}, nil
		}
		return nil, nil, err
	}
	if res := validate.SnapshotPolicy(&pol, validate.Options{}); !res.OK() {
		return invalid("SnapshotPolicy %s is invalid: %v", pol.Name, res.Errs)
	}
	if pol.Spec.Suspend {
		return nil, &gate{cond: wellknown.ConditionReady, reason: "PolicySuspended", message: fmt.Sprintf("SnapshotPolicy %s is suspended; set spec.suspend: false to let this Snapshot run", pol.Name)}, nil
	}
	refs := validate.PolicyRefs(&pol)
	ref := refs[0]
	if s.Spec.Repository != nil {
		ref = *s.Spec.Repository
	} else if len(refs) > 1 {
		// Unreachable through ReconcileSnapshot, which fans such runs out first.
		return invalid("SnapshotPolicy %s writes to %d repositories, so this Snapshot must name one in spec.repository", pol.Name, len(refs))
	}
	if ref.Kind == "" {
		ref.Kind = snapv1.KindRepository
	}
	if ref.Kind == snapv1.KindClusterRepository {
		if msg := f.tenancyProblem(ctx, s.Namespace, ref); msg != "" {
			return nil, &gate{cond: wellknown.ConditionReady, reason: "RepositoryNotAllowed", message: msg}, nil
		}
	}
	repo, err := f.getRepository(ctx, ref, pol.Namespace)
	if apierrors.IsNotFound(err) {
		return nil, &gate{cond: wellknown.ConditionReady, reason: ReasonWaitingForRepository,
			message: fmt.Sprintf("%s %s does not exist yet; this Snapshot starts once it is created and Ready", ref.Kind, ref.Name)}, nil
	}
	if err != nil {
		return nil, nil, err
	}
	if repo.Spec.Mode == snapv1.ModeReadOnly {
		return invalid("%s is ReadOnly; snapshots cannot be written to it", repo.Key())
	}
	p := &runPlan{policy: &pol, repo: repo}
	if p.repoWork, p.mounts, err = repository.Work(repo.Ref, repo.Obj, repo.Spec); err != nil {
		return invalid("%s: %v", repo.Key(), err)
	}
	if why := repo.ClaimProblem(p.mounts, "mover", s.Namespace); why != "" {
		return invalid("%s; use an S3 or NFS backend for a shared repository", why)
	}
	// Consent is checked before any side effect (hooks, staging).
	if msg := repository.ProjectionRefused(repo, s.Namespace, repository.ProjectionEnabled(pol.Spec.CredentialProjection), "SnapshotPolicy "+pol.Name); msg != "" {
		return invalid("%s", msg)
	}
	p.project = repo.Homes().Needed(s.Namespace)

	// The source: a selector child pins its PVC; otherwise the policy's single PVC source.
	switch {
	case s.Spec.Source != nil:
		i := int(s.Spec.Source.SourceIndex)
		if i < 0 || i >= len(pol.Spec.Sources) {
			return invalid("spec.source.sourceIndex %d is out of range: SnapshotPolicy %s has %d sources", i, pol.Name, len(pol.Spec.Sources))
		}
		p.src, p.pvc = pol.Spec.Sources[i], s.Spec.Source.Target.PVC.Name
		if p.src.PVC == nil && p.src.PVCSelector == nil {
			return invalid("spec.source.sourceIndex %d pins source %d of SnapshotPolicy %s, which is not a PVC source, so it cannot take PVC %s; remove spec.source", i, i, pol.Name, p.pvc)
		}
	case len(pol.Spec.Sources) == 1 && pol.Spec.Sources[0].PVC != nil:
		p.src, p.pvc = pol.Spec.Sources[0], pol.Spec.Sources[0].PVC.Name
	case len(pol.Spec.Sources) == 1 && pol.Spec.Sources[0].NFS != nil:
		p.src, p.nfs = pol.Spec.Sources[0], pol.Spec.Sources[0].NFS
		return f.planExport(ctx, s, p)
	case len(pol.Spec.Sources) == 1 && pol.Spec.Sources[0].Stream != nil:
		p.src = pol.Spec.Sources[0]
		return f.planStream(ctx, s, p)
	default:
		return invalid("SnapshotPolicy %s has %d sources, so this Snapshot must pin one PVC in spec.source", pol.Name, len(pol.Spec.Sources))
	}
	var pvc corev1.PersistentVolumeClaim
	if err := f.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: p.pvc}, &pvc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &gate{cond: wellknown.ConditionReady, reason: ReasonSourceNotFound, message: fmt.Sprintf("PVC %s/%s (the policy's source) does not exist; create it and this Snapshot will start", s.Namespace, p.pvc)}, nil
		}
		return nil, nil, err
	}
	if pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.VolumeName == "" {
		// An unbound claim holds no data yet, and volume policies match on
		// the bound PersistentVolume: deciding now could back up a volume a
		// storageClass rule would skip once it binds.
		return nil, &gate{cond: wellknown.ConditionReady, reason: ReasonSourceNotBound, message: fmt.Sprintf("PVC %s/%s is not bound to a volume yet (phase %s); nothing has been written to it, and volume policies match on its PersistentVolume. This Snapshot starts once it binds; with a WaitForFirstConsumer storage class, start the workload that uses it", s.Namespace, p.pvc, phaseOr(pvc.Status.Phase))}, nil
	}
	p.copyMethod = pol.Spec.CopyMethod
	if p.copyMethod == "" {
		p.copyMethod = snapv1.CopySnapshot
	}
	p.snapshotClass = pol.Spec.VolumeSnapshotClassName
	return f.planRun(ctx, s, p, volumepolicy.Volume{PVC: &pvc})
}

// planExport plans the run of an nfs source. Nothing can snapshot or
// clone an export, so whatever copyMethod says (it governs PVC sources)
// the mover mounts the export read-only and reads it in place.
func (f *Function) planExport(ctx context.Context, s *snapv1.Snapshot, p *runPlan) (*runPlan, *gate, error) {
	p.copyMethod = snapv1.CopyDirect
	vol := &corev1.Volume{Name: "source", VolumeSource: corev1.VolumeSource{NFS: p.nfsVolume()}}
	return f.planRun(ctx, s, p, volumepolicy.Volume{PodVolume: vol})
}

// nfsVolume is the pod volume of an nfs source: read-only, as admission
// requires.
func (p *runPlan) nfsVolume() *corev1.NFSVolumeSource {
	if p.nfs == nil {
		return nil
	}
	return &corev1.NFSVolumeSource{Server: p.nfs.Server, Path: p.nfs.Path, ReadOnly: true}
}

// planRun resolves what every kind of source shares once the source is
// known: identity, collisions, volume policies, the mover's identity and
// its privileges.
func (f *Function) planRun(ctx context.Context, s *snapv1.Snapshot, p *runPlan, vol volumepolicy.Volume) (*runPlan, *gate, error) {
	pol := p.policy
	if g, err := f.planIdentity(ctx, s, p); g != nil || err != nil {
		return nil, g, err
	}
	if err := f.applyVolumePolicies(ctx, p, vol); err != nil {
		return nil, &gate{cond: wellknown.ConditionReady, reason: ReasonInvalidSpec, fatal: true, message: "volume policies: " + err.Error()}, nil
	}
	if err := f.inheritIdentity(ctx, s, p); err != nil {
		return nil, nil, err
	}
	p.settleMover()
	switch mv := pol.Spec.Mover; {
	case p.workload != nil:
		// The data's group, which a restore inheriting this record gives
		// its target; the mover itself kept its own fsGroup (ForBackup).
		if g := p.workload.FSGroup; g != nil {
			p.meta.FSGroup = g
		}
		p.meta.Src = srcInherited
	case mv != nil && (mv.PodSecurityContext != nil || mv.SecurityContext != nil || mv.PrivilegedMode):
		p.meta.Src = "explicit"
	}
	return p, nil, nil
}

// settleMover sets the mover's security contexts from the repository's
// defaults and p.mover, the escalations the privilege gate judges, and the
// identity the run records.
func (p *runPlan) settleMover() {
	p.podSC, p.sc = privilege.SecurityContexts(p.repo.Spec.MoverDefaults, p.mover)
	var repoVol *corev1.VolumeSource
	if !p.mounts.HostTrusted {
		repoVol = privilege.RepositoryVolume(p.repo.Spec.Backend.Filesystem)
	}
	p.escalations = append(privilege.Mover(p.repo.Spec.MoverDefaults, p.mover, repoVol), privilege.Export(p.nfs)...)
	uid, gid := privilege.Effective(p.podSC, p.sc)
	p.meta = kopia.Meta{UID: uid, GID: gid, FSGroup: p.podSC.FSGroup, Src: "default"}
}

// planIdentity resolves the run's kopia source and checks that the run's
// namespace owns it and no earlier policy writes it.
func (f *Function) planIdentity(ctx context.Context, s *snapv1.Snapshot, p *runPlan) (*gate, error) {
	invalid := func(format string, args ...any) (*gate, error) {
		return &gate{cond: wellknown.ConditionReady, reason: ReasonInvalidSpec, message: fmt.Sprintf(format, args...), fatal: true}, nil
	}
	var err error
	if p.source, err = resolveIdentity(p.policy, p.repo, p.src, p.pvc); err != nil {
		return invalid("%v", err)
	}
	if p.repoWork.NamespaceBound {
		if pr := identity.OwnerProblem(p.source.Hostname, s.Namespace); pr != "" {
			return invalid("%s", pr)
		}
	}
	return f.collisionGate(ctx, p.policy, p.repo.Ref)
}

// inheritIdentity applies inheritSecurityContextFrom: the mover reads the
// volume as the workload that wrote it. The pods are read fresh, before the
// privilege gate, so an identity inherited from a root pod needs the
// namespace's opt-in like any other root mover. No workload to copy is not
// an error: the explicit and default settings are the fallback, and the
// run's SecurityContextInherited condition says so.
func (f *Function) inheritIdentity(ctx context.Context, s *snapv1.Snapshot, p *runPlan) error {
	ns := s.Namespace
	p.mover = p.policy.Spec.Mover
	if p.mover == nil || p.mover.InheritSecurityContextFrom == nil {
		return nil
	}
	if r := s.Status.Recorded; r != nil && r.Src == srcInherited {
		// Pinned when the run claimed its slot, before its hooks: a hook
		// that scales the workload down must not change whom it runs as.
		id := &corev1.PodSecurityContext{RunAsUser: r.UID, RunAsGroup: r.GID, FSGroup: r.FSGroup}
		p.workload = &privilege.Workload{Identity: id, FSGroup: r.FSGroup, Pinned: true}
		p.mover = privilege.Inherit(p.mover, privilege.ForBackup(id))
		return nil
	}
	w, ni, err := host.Workload(ctx, f.Client, ns, p.mover.InheritSecurityContextFrom, p.pvc)
	if err != nil || ni != nil || w == nil {
		p.notInherited = ni
		return err
	}
	w.FSGroup = w.Identity.FSGroup
	p.workload = w
	p.mover = privilege.Inherit(p.mover, privilege.ForBackup(w.Identity))
	return nil
}

// srcInherited is the recorded identity's source when it came from the
// workload (the kopiur-meta src value).
const srcInherited = "inherited"

// recorded is the identity the run records (status.recorded).
func (p *runPlan) recorded() *snapv1.RecordedIdentity {
	return &snapv1.RecordedIdentity{UID: p.meta.UID, GID: p.meta.GID, FSGroup: p.meta.FSGroup, Src: p.meta.Src}
}

// inheritCondition reports what inheritSecurityContextFrom resolved to (nil
// when the policy does not ask to inherit).
func (p *runPlan) inheritCondition(gen int64) *metav1.Condition {
	c := &metav1.Condition{Type: wellknown.ConditionSecurityContextInherited, ObservedGeneration: gen}
	as := privilege.Describe(p.meta.UID, p.meta.GID, p.meta.FSGroup)
	switch {
	case p.workload != nil && p.workload.Pinned:
		c.Status, c.Reason = metav1.ConditionTrue, privilege.ReasonInherited
		c.Message = "the mover runs as " + as + ", inherited from the workload when the run claimed its slot"
	case p.workload != nil:
		c.Status, c.Reason = metav1.ConditionTrue, privilege.ReasonInherited
		c.Message = fmt.Sprintf("the mover runs as %s, inherited from container %s of pod %s", as, p.workload.Container, p.workload.Pod)
	case p.notInherited != nil:
		c.Status, c.Reason = metav1.ConditionFalse, p.notInherited.Reason
		c.Message = fmt.Sprintf("%s; the mover runs as %s from its explicit and default settings", p.notInherited.Message, as)
	default:
		return nil
	}
	return c
}

func phaseOr(p corev1.PersistentVolumeClaimPhase) string {
	if p == "" {
		return "unset"
	}
	return string(p)
}

// poolKey identifies a repository's concurrency pool in a label value.
func poolKey(r *repository.Object) string {
	return repository.PoolKey(r.Ref.Kind, r.Namespace, r.Ref.Name)
}

// reclaiming names a live maintenance Job of the repository that runs
// without kopia's safety margins: a backup started beside it could reuse
// content that run is deleting.
// Only a Maintenance's Job in the namespace that may maintain the
// repository counts: anyone may label a Job of their own, and would
// otherwise hold every backup of a shared repository.
func (f *Function) reclaiming(ctx context.Context, r *repository.Object) (bool, string, error) {
	ns := f.maintenanceNamespace(r)
	var jobs batchv1.JobList
	if err := f.Client.List(ctx, &jobs, client.InNamespace(ns), client.MatchingLabels{wellknown.LabelReclaiming: poolKey(r)}); err != nil {
		return false, "", fmt.Errorf("list maintenance jobs: %w", err)
	}
	for _, j := range jobs.Items {
		if o := metav1.GetControllerOf(&j); o == nil || o.Kind != "Maintenance" || o.APIVersion != snapv1.GroupVersion.String() {
			continue
		}
		if jobwatch.Live(&j) {
			return true, fmt.Sprintf("maintenance job %s/%s reclaims %s with safety none; this run starts when it finishes", j.Namespace, j.Name, r.Key()), nil
		}
	}
	return false, "", nil
}

func ownerRef(s *snapv1.Snapshot) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: snapv1.GroupVersion.String(), Kind: "Snapshot", Name: s.Name, UID: s.UID, Controller: ptr(true), BlockOwnerDeletion: ptr(true)}
}

func ptr[T any](v T) *T { return &v }

func (f *Function) createJob(ctx context.Context, s *snapv1.Snapshot, p *runPlan, name string) error {
	claim, readOnly := p.pvc, true
	if p.copyMethod != snapv1.CopyDirect {
		claim = stagedName(s)
	}
	if p.nfs != nil || p.exec != nil {
		claim = ""
	}
	// readOnly: false is how a source is made readable through fsGroup:
	// a kubelet gives a volume to the pod's fsGroup only when it is
	// mounted read-write (a staged copy's group changes, not the live
	// volume's, unless the mover mounts it: Direct).
	if p.src.ReadOnly != nil && !*p.src.ReadOnly {
		readOnly = false
	}
	cache := p.cache()
	cacheClaim := ""
	if cache != nil && cache.Mode == snapv1.CachePersistent {
		// The cache outlives the run (the next one starts warm) and goes
		// with its policy when the policy is deleted.
		ref := p.repo.Ref
		if ref.Kind == snapv1.KindRepository && ref.Namespace == "" {
			ref.Namespace = p.repo.Namespace
		}
		cacheClaim = moverjob.CacheClaimName(p.policy.Name, p.pvc, ref)
		pvc := moverjob.CacheClaim(cacheClaim, s.Namespace, cache, map[string]string{wellknown.LabelConfig: p.policy.Name})
		if p.policy.Namespace == s.Namespace {
			pvc.OwnerReferences = []metav1.OwnerReference{{APIVersion: snapv1.GroupVersion.String(), Kind: "SnapshotPolicy", Name: p.policy.Name, UID: p.policy.UID}}
		}
		if err := f.Client.Create(ctx, pvc); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create the persistent cache PVC %s: %w", cacheClaim, err)
		}
	}
	params := moverjob.Params{
		Name: name, Namespace: s.Namespace, Owner: ownerRef(s), Cache: cache, CacheClaim: cacheClaim,
		Labels: map[string]string{wellknown.LabelSnapshot: s.Name, wellknown.LabelOp: mover.OpSnapshot, wellknown.LabelRepoPool: poolKey(p.repo)},
		Image:  f.MoverImage, ServiceAccount: f.MoverServiceAccount,
		Work:           p.workSpec(s),
		PasswordSecret: p.repo.Spec.Encryption.PasswordSecretRef.Name, PasswordKey: p.repo.Spec.Encryption.PasswordSecretRef.Key,
		CredentialsSecret: p.mounts.Credentials, CABundle: p.mounts.CABundle,
		SourceClaim: claim, SourceReadOnly: readOnly, SourceNFS: p.nfsVolume(),
		RepositoryClaim: p.mounts.RepoClaim, RepositoryNFS: p.mounts.RepoNFS, RepositoryHost: p.mounts.HostPath,
		RepositoryHostTrusted: p.mounts.HostTrusted, PrivilegedAllowed: p.privilegedAllowed,
		Mover: p.mover, Defaults: p.repo.Spec.MoverDefaults, FailurePolicy: s.Spec.FailurePolicy,
	}
	if p.exec != nil {
		params.ExecAccount = name
	}
	if p.copyMethod == snapv1.CopyDirect && p.nfs == nil && p.exec == nil && moverjob.Colocates(p.repo.Spec.MoverDefaults) {
		pl, err := f.directPlacement(ctx, s.Namespace, p.pvc)
		if err != nil {
			return err
		}
		params.Placement = pl
	}
	job, cm, err := moverjob.Build(params)
	if err != nil {
		return err
	}
	if err := projection.Apply(ctx, f.Client, job, p.repo.Homes(), p.project, ""); err != nil {
		return err
	}
	if err := host.CreateWorkSpec(ctx, f.Client, cm); err != nil {
		return err
	}
	if p.exec != nil {
		// Granted last, so that no refusal above leaves it behind.
		if err := execgrant.Ensure(ctx, f.Client, execgrant.Grant{Name: name, Namespace: s.Namespace, Pod: p.exec.Pod, Owner: ownerRef(s),
			ImagePullSecrets: PullSecrets(ctx, f.Client, s.Namespace, f.MoverServiceAccount)}); err != nil {
			return err
		}
	}
	if err := f.Client.Create(ctx, job); err != nil && !apierrors.IsAlreadyExists(err) {
		if p.exec != nil {
			err = errors.Join(err, execgrant.Revoke(ctx, f.Client, s.Namespace, name))
		}
		return fmt.Errorf("create the mover job: %w", err)
	}
	return nil
}

// PullSecrets are the image pull secrets of the mover ServiceAccount
// account in ns, which a run's own ServiceAccount needs to pull the same
// image (none when it cannot be read).
func PullSecrets(ctx context.Context, c client.Client, ns, account string) []corev1.LocalObjectReference {
	if account == "" {
		return nil
	}
	var sa corev1.ServiceAccount
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: account}, &sa); err != nil {
		return nil
	}
	return sa.ImagePullSecrets
}

// directPlacement reads the source claim and the pods of its namespace,
// fresh, to place a Direct mover where the claim is attached now.
func (f *Function) directPlacement(ctx context.Context, ns, claim string) (*moverjob.Placement, error) {
	var pvc corev1.PersistentVolumeClaim
	if err := f.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: claim}, &pvc); err != nil {
		return nil, fmt.Errorf("read the source PVC %s/%s: %w", ns, claim, err)
	}
	var pods corev1.PodList
	if err := f.Client.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("list the pods of namespace %s to find the node the source PVC is attached to: %w", ns, err)
	}
	return moverjob.DirectPlacement(&pvc, pods.Items)
}

// emitResult sends the run's outcome as a CloudEvent with an id stable per
// Snapshot, so a redelivery is recognisable.
func (f *Function) emitResult(ctx context.Context, s *snapv1.Snapshot) error {
	if f.Emitter == nil {
		return nil
	}
	typ := events.SnapshotSucceeded
	switch s.Status.Phase {
	case snapv1.SnapshotFailed:
		typ = events.SnapshotFailed
	case snapv1.SnapshotUnchanged:
		typ = events.SnapshotUnchanged
	}
	data := events.SnapshotResult{Namespace: s.Namespace, Name: s.Name, UID: string(s.UID), Phase: string(s.Status.Phase)}
	if s.Spec.PolicyRef != nil {
		data.Policy = s.Spec.PolicyRef.Name
	}
	if r := s.Status.Snapshot; r != nil {
		data.KopiaSnapshotID = r.KopiaSnapshotID
	}
	if r := s.Status.Resolved; r != nil && r.Repository != nil {
		data.Repository = string(r.Repository.Kind) + "/" + r.Repository.Name
	}
	if st := s.Status.Stats; st != nil {
		if st.BytesNew != nil {
			data.BytesNew = *st.BytesNew
		}
		if st.SizeBytes != nil {
			data.SizeBytes = *st.SizeBytes
		}
	}
	if fl := s.Status.Failure; fl != nil {
		data.FailureClass, data.Message = fl.Class, fl.Message
	}
	e, err := events.New(string(s.UID)+"/"+string(s.Status.Phase), typ, s.Namespace+"/"+s.Name, data)
	if err != nil {
		return err
	}
	return f.Emitter.Emit(ctx, e)
}
