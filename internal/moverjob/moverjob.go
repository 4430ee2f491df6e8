// Package moverjob builds the Job and work-spec ConfigMap of a mover run.
// It is pure: the function resolves everything first and hands it over, so
// what a cluster gets is testable without one.
package moverjob

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/mover"
	"github.com/snapflow/snapflow/internal/privilege"
)

// Container paths of the mover's mounts.
const (
	WorkDir = "/etc/snapflow/work"
	// SourceDir is the volume a run reads or restores into. Its parent is
	// a writable emptyDir: kopia's restore removes a placeholder beside
	// its target (<target>.kopia-entry), which fails with "read-only file
	// system" under a read-only root even though none exists.
	SourceDir      = MountParent + "/data"
	MountParent    = "/mnt"
	RepositoryRoot = "/repository"
	CacheDir       = "/cache"
	// ConfigDir is a memory-backed emptyDir: kopia's connection config
	// holds the storage credentials and must not outlive the pod.
	ConfigDir = "/etc/snapflow/kopia"
	// TmpDir is not /tmp: the local node stand-in keeps its pods under /tmp
	// and maps mount paths by prefix.
	TmpDir = "/var/tmp"
	CADir  = "/etc/snapflow/ca"
)

// ContainerName is the mover Job's one container, whose log carries the
// run's progress.
const ContainerName = "mover"

// Defaults from the reference: the mover identity and failure policy.
const (
	DefaultUID                 = privilege.DefaultUID
	DefaultBackoffLimit        = int32(2)
	DefaultActiveDeadline      = int64(48 * 3600)
	DefaultPodStartupDeadline  = int64(300)
	DefaultTTLSecondsAfterDone = int32(3600)
	BootstrapActiveDeadline    = int64(120)
)

// Params is everything a mover Job needs, resolved.
type Params struct {
	Name, Namespace string
	Owner           metav1.OwnerReference
	Labels          map[string]string
	Image           string
	ServiceAccount  string
	// ExecAccount, for a run that runs a workload command (a stream
	// source, a streamExec restore), replaces ServiceAccount: the run's own
	// account, whose token the pod mounts and which may exec into the one
	// pod the command runs in, for this run only.
	ExecAccount string
	Work        mover.WorkSpec
	// PasswordSecret holds the kopia password under PasswordKey.
	PasswordSecret, PasswordKey string
	// CredentialsSecret holds the backend's credentials: the keys
	// mover.CredentialEnv names become environment variables, and no
	// other key does.
	CredentialsSecret string
	// CABundle is mounted and passed as --ca-file.
	CABundle *snapv1.ConfigMapKeyRef
	// SourceClaim is mounted at SourceDir (read-only when SourceReadOnly).
	SourceClaim    string
	SourceReadOnly bool
	// SourceNFS, when SourceClaim is empty, is an NFS export mounted
	// read-only at SourceDir instead (an nfs source). The privilege gate
	// refuses it without the namespace's opt-in: the node mounts it.
	SourceNFS *corev1.NFSVolumeSource
	// Placement pins the mover to the node of the workload using
	// SourceClaim (copyMethod: Direct on a ReadWriteOnce claim).
	Placement *Placement
	// Scratch, when SourceClaim is empty, is a throwaway volume mounted at
	// SourceDir instead (deep verification restores into it).
	Scratch *corev1.VolumeSource
	// Cache shapes the kopia cache volume; CacheClaim is the PVC of a
	// Persistent cache (the function creates it before the Job).
	Cache      *snapv1.MoverCache
	CacheClaim string
	// RepositoryClaim (or RepositoryNFS) is mounted at /repository for a
	// filesystem repository; neither means a node path at the backend path.
	RepositoryClaim string
	RepositoryNFS   *snapv1.NFSExport
	RepositoryHost  string
	// RepositoryHostTrusted says RepositoryHost or RepositoryNFS comes from
	// a ClusterRepository, which the cluster's administrator wrote.
	RepositoryHostTrusted bool
	// MinTTLSecondsAfterFinished keeps a finished Job at least this long,
	// whatever the mover settings say: a function that paces retries by
	// the Job deletes it itself.
	MinTTLSecondsAfterFinished int32
	// PrivilegedAllowed is the namespace's privileged-movers opt-in:
	// without it Build refuses any pod privilege.Pod objects to.
	PrivilegedAllowed bool
	Mover             *snapv1.MoverSpec
	Defaults          *snapv1.MoverDefaults
	FailurePolicy     *snapv1.FailurePolicy
	ActiveDeadline    int64 // overrides the default when FailurePolicy leaves it unset
}

// Name derives a DNS-label name from base and a uid suffix, at most 63 chars.
func Name(base, uid string) string {
	h := sha256.Sum256([]byte(uid))
	suffix := hex.EncodeToString(h[:])[:8]
	base = strings.TrimRight(base, "-.")
	if len(base) > 63-9 {
		base = strings.TrimRight(base[:63-9], "-.")
	}
	return base + "-" + suffix
}

// Prefix cuts an object's name to at most n characters for use in front
// of a suffix (in a Job name or a label value), with no trailing '-', '.'
// or '_'.
func Prefix(name string, n int) string {
	if len(name) > n {
		name = name[:n]
	}
	return strings.TrimRight(name, "-._")
}

// Build renders the ConfigMap holding the work spec and the Job that runs
// it. A Job that needs the namespace's privileged-movers opt-in it does not
// have is refused with a *privilege.NotPermitted: every mover passes here,
// so no run can skip the gate.
func Build(p Params) (*batchv1.Job, *corev1.ConfigMap, error) {
	job, cm, err := render(p)
	if err != nil {
		return nil, nil, err
	}
	if r := escalations(p, job); len(r) > 0 && !p.PrivilegedAllowed {
		return nil, nil, &privilege.NotPermitted{Namespace: p.Namespace, Reasons: r}
	}
	return job, cm, nil
}

func escalations(p Params, job *batchv1.Job) []string {
	var t privilege.Trusted
	if p.RepositoryHostTrusted && p.RepositoryHost != "" {
		t.HostPaths = []string{p.RepositoryHost}
	}
	if p.RepositoryHostTrusted && p.RepositoryNFS != nil {
		t.NFS = []string{p.RepositoryNFS.Server + ":" + p.RepositoryNFS.Path}
	}
	// The trust covers the repository's volume only: a source naming the
	// same export or node path is a tenant's choice, not the
	// administrator's.
	spec := job.Spec.Template.Spec.DeepCopy()
	var repo []corev1.Volume
	spec.Volumes = slices.DeleteFunc(spec.Volumes, func(v corev1.Volume) bool {
		if v.Name == repositoryVolume {
			repo = append(repo, v)
			return true
		}
		return false
	})
	r := privilege.Pod(spec, privilege.Trusted{})
	r = append(r, privilege.Pod(&corev1.PodSpec{Volumes: repo}, t)...)
	return append(r, privilege.Annotations(job.Spec.Template.Annotations)...)
}

// repositoryVolume is the pod volume of a filesystem repository.
const repositoryVolume = "repository"

func render(p Params) (*batchv1.Job, *corev1.ConfigMap, error) {
	work, err := p.Work.Marshal()
	if err != nil {
		return nil, nil, fmt.Errorf("render the work spec: %w", err)
	}
	labels := map[string]string{wellknown.LabelManagedBy: wellknown.ManagedByValue}
	for k, v := range p.Labels {
		labels[k] = v
	}
	owner := []metav1.OwnerReference{p.Owner}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, Labels: labels, OwnerReferences: owner},
		Data:       map[string]string{mover.WorkSpecKey: work},
	}

	// The termination message is part of the run's result (what a
	// deletion finished), so its path is spelled out, not left to a default.
	// The digest rides in the pod template, which nobody can change: a
	// ConfigMap edited (or made in advance) by anyone who may write
	// ConfigMaps in the namespace is refused by the mover, so nobody can
	// change what a run does, or which command it runs in a workload.
	args := []string{"mover", "--work", WorkDir + "/" + mover.WorkSpecKey, "--work-digest", mover.Digest([]byte(work)),
		"--cache-dir", CacheDir, "--config-dir", ConfigDir, "--termination-log", corev1.TerminationMessagePathDefault}
	vols := []corev1.Volume{
		{Name: "work", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: p.Name}}}},
		{Name: "cache", VolumeSource: CacheVolume(p.Cache, p.CacheClaim)},
		{Name: "kopia-config", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: ptr(resource.MustParse("1Mi"))}}},
		// The root filesystem is read-only; kopia spills large tree walks
		// (verification, deletion) to temporary files.
		{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	mounts := []corev1.VolumeMount{{Name: "work", MountPath: WorkDir, ReadOnly: true}, {Name: "cache", MountPath: CacheDir},
		{Name: "kopia-config", MountPath: ConfigDir}, {Name: "tmp", MountPath: TmpDir}}
	if p.SourceClaim != "" {
		vols = append(vols, corev1.Volume{Name: "source", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: p.SourceClaim, ReadOnly: p.SourceReadOnly}}})
		mounts = append(mounts, corev1.VolumeMount{Name: "source", MountPath: SourceDir, ReadOnly: p.SourceReadOnly})
		args = append(args, "--source", SourceDir)
	} else if p.SourceNFS != nil {
		nfs := *p.SourceNFS
		nfs.ReadOnly = true
		vols = append(vols, corev1.Volume{Name: "source", VolumeSource: corev1.VolumeSource{NFS: &nfs}})
		mounts = append(mounts, corev1.VolumeMount{Name: "source", MountPath: SourceDir, ReadOnly: true})
		args = append(args, "--source", SourceDir)
	} else if p.Scratch != nil {
		vols = append(vols, corev1.Volume{Name: "scratch", VolumeSource: *p.Scratch})
		mounts = append(mounts, corev1.VolumeMount{Name: "scratch", MountPath: SourceDir})
		args = append(args, "--source", SourceDir)
	}
	if p.SourceClaim != "" || p.SourceNFS != nil || p.Scratch != nil {
		vols = append(vols, corev1.Volume{Name: "mnt", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr(resource.MustParse("1Mi"))}}})
		mounts = append(mounts, corev1.VolumeMount{Name: "mnt", MountPath: MountParent})
	}
	if p.Work.Repository.Backend.Filesystem != nil {
		var src corev1.VolumeSource
		switch {
		case p.RepositoryClaim != "":
			src.PersistentVolumeClaim = &corev1.PersistentVolumeClaimVolumeSource{ClaimName: p.RepositoryClaim}
		case p.RepositoryNFS != nil:
			src.NFS = &corev1.NFSVolumeSource{Server: p.RepositoryNFS.Server, Path: p.RepositoryNFS.Path}
		default:
			src.HostPath = &corev1.HostPathVolumeSource{Path: p.RepositoryHost}
		}
		vols = append(vols, corev1.Volume{Name: repositoryVolume, VolumeSource: src})
		mounts = append(mounts, corev1.VolumeMount{Name: repositoryVolume, MountPath: RepositoryRoot})
		args = append(args, "--repository-root", RepositoryRoot)
	}
	if p.CABundle != nil {
		key := p.CABundle.Key
		if key == "" {
			key = "ca.crt"
		}
		vols = append(vols, corev1.Volume{Name: "ca", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: p.CABundle.Name}, Items: []corev1.KeyToPath{{Key: key, Path: "ca.crt"}}}}})
		mounts = append(mounts, corev1.VolumeMount{Name: "ca", MountPath: CADir, ReadOnly: true})
		args = append(args, "--ca-file", CADir+"/ca.crt")
	}
	passKey := p.PasswordKey
	if passKey == "" {
		passKey = mover.EnvPassword
	}
	env := []corev1.EnvVar{{Name: mover.EnvPassword, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: p.PasswordSecret}, Key: passKey}}}}
	env = append(env, corev1.EnvVar{Name: "TMPDIR", Value: TmpDir})
	if p.CredentialsSecret != "" {
		for _, k := range mover.CredentialEnv(p.Work.Repository.Backend) {
			ref := &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: p.CredentialsSecret}, Key: k.Name}
			if k.Optional {
				ref.Optional = ptr(true)
			}
			env = append(env, corev1.EnvVar{Name: k.Name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: ref}})
		}
	}

	podSC, sc := privilege.SecurityContexts(p.Defaults, p.Mover)
	container := corev1.Container{
		Name: ContainerName, Image: p.Image, Command: []string{"snapflow"}, Args: args,
		Env: env, VolumeMounts: mounts, SecurityContext: sc,
		TerminationMessagePath:   corev1.TerminationMessagePathDefault,
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
	if r := resources(p.Defaults, p.Mover); r != nil {
		container.Resources = *r
	}
	fp := failurePolicy(p.FailurePolicy, p.ActiveDeadline)
	ttl := DefaultTTLSecondsAfterDone
	if p.Defaults != nil && p.Defaults.TTLSecondsAfterFinished != nil {
		ttl = *p.Defaults.TTLSecondsAfterFinished
	}
	if p.Mover != nil && p.Mover.TTLSecondsAfterFinished != nil {
		ttl = *p.Mover.TTLSecondsAfterFinished
	}
	ttl = max(ttl, p.MinTTLSecondsAfterFinished)
	podLabels := map[string]string{}
	for k, v := range labels {
		podLabels[k] = v
	}
	var annotations map[string]string
	if d := p.Defaults; d != nil {
		for k, v := range d.PodLabels {
			podLabels[k] = v
		}
		annotations = d.PodAnnotations
	}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, Labels: labels, OwnerReferences: owner,
			Annotations: map[string]string{wellknown.SnapflowPrefix + "pod-startup-deadline-seconds": fmt.Sprint(*fp.PodStartupDeadlineSeconds)}},
		Spec: batchv1.JobSpec{
			BackoffLimit:          fp.BackoffLimit,
			ActiveDeadlineSeconds: fp.ActiveDeadlineSeconds,
			// A failure the mover reported is the run's outcome; only a
			// crash (killed, evicted, out of memory) is worth another pod.
			PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
				Action: batchv1.PodFailurePolicyActionFailJob,
				OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{ContainerName: ptr(ContainerName),
					Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{mover.ExitReported}},
			}}},
			TTLSecondsAfterFinished: &ttl,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels, Annotations: annotations},
				Spec: corev1.PodSpec{
					RestartPolicy:      corev1.RestartPolicyNever,
					ServiceAccountName: p.ServiceAccount,
					// The mover reports through its termination message and
					// talks to no API server: a pod of its namespace that
					// took its account would get no token to misuse.
					AutomountServiceAccountToken: ptr(false),
					SecurityContext:              podSC,
					Containers:                   []corev1.Container{container},
					Volumes:                      vols,
				},
			},
		},
	}
	if d := p.Defaults; d != nil {
		job.Spec.Template.Spec.NodeSelector = d.NodeSelector
		job.Spec.Template.Spec.Tolerations = d.Tolerations
		job.Spec.Template.Spec.Affinity = d.Affinity
	}
	if p.ExecAccount != "" {
		// Only a workload command needs the API server: its token may exec
		// into one pod, and the function revokes that when the run ends.
		job.Spec.Template.Spec.ServiceAccountName = p.ExecAccount
		job.Spec.Template.Spec.AutomountServiceAccountToken = ptr(true)
	}
	place(&job.Spec.Template.Spec, p.Placement)
	return job, cm, nil
}

// EffectiveCache is the cache settings a run uses: its own mover's, else
// the repository's moverDefaults.
func EffectiveCache(m *snapv1.MoverSpec, d *snapv1.MoverDefaults) *snapv1.MoverCache {
	var base, over *snapv1.MoverCache
	if d != nil {
		base = d.Cache
	}
	if m != nil {
		over = m.Cache
	}
	switch {
	case over == nil:
		return base
	case base == nil:
		return over
	}
	// The recipe's settings overlay the repository's field by field: a
	// policy that only raises the capacity keeps the repository's class.
	out := base.DeepCopy()
	if over.Capacity != nil {
		out.Capacity = over.Capacity
	}
	if over.StorageClassName != nil {
		out.StorageClassName = over.StorageClassName
	}
	if over.Mode != "" {
		out.Mode = over.Mode
	}
	if over.ContentCacheSizeMb != nil {
		out.ContentCacheSizeMb = over.ContentCacheSizeMb
	}
	if over.MetadataCacheSizeMb != nil {
		out.MetadataCacheSizeMb = over.MetadataCacheSizeMb
	}
	if over.Ownership != nil {
		out.Ownership = over.Ownership
	}
	return out
}

// CacheBudgets hands kopia the cache's content and metadata budgets. A
// budget left unset on a cache of a given capacity takes 40% of it: kopia's
// own defaults (5000 MB each) would overflow a smaller volume and get the
// mover evicted, and waste a larger one.
func CacheBudgets(w *mover.WorkSpec, c *snapv1.MoverCache) {
	if c == nil {
		return
	}
	if c.Capacity != nil {
		if share := c.Capacity.Value() * 2 / 5 >> 20; share > 0 {
			w.ContentCacheMB, w.MetadataCacheMB = share, share
		}
	}
	if c.ContentCacheSizeMb != nil {
		w.ContentCacheMB = *c.ContentCacheSizeMb
	}
	if c.MetadataCacheSizeMb != nil {
		w.MetadataCacheMB = *c.MetadataCacheSizeMb
	}
}

// CacheVolume is where kopia keeps its cache: an emptyDir (capped at the
// capacity when one is given), a generic ephemeral PVC when a storage class
// is named too, or the claim of a Persistent cache, which outlives the Job
// so the next run starts warm.
func CacheVolume(c *snapv1.MoverCache, claim string) corev1.VolumeSource {
	switch {
	case c == nil:
		return corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}
	case c.Mode == snapv1.CachePersistent && claim != "":
		return corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}
	case c.Capacity != nil && c.StorageClassName != nil:
		return corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: c.StorageClassName,
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: *c.Capacity}},
			}}}}
	case c.Capacity != nil:
		q := c.Capacity.DeepCopy()
		return corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &q}}
	}
	return corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}
}

// CacheClaimName is the PVC of a Persistent cache: one per source and
// repository, so runs of different sources never share (or contend for) it.
func CacheClaimName(policy, pvc string, repo snapv1.RepositoryRef) string {
	return Name("kopia-cache-"+pvc, policy+"/"+string(repo.Kind)+"/"+repo.Namespace+"/"+repo.Name)
}

// CacheClaim is the PVC a Persistent cache lives on.
func CacheClaim(name, namespace string, c *snapv1.MoverCache, labels map[string]string) *corev1.PersistentVolumeClaim {
	size := resource.MustParse(DefaultCacheCapacity)
	if c.Capacity != nil {
		size = c.Capacity.DeepCopy()
	}
	l := map[string]string{wellknown.LabelManagedBy: wellknown.ManagedByValue}
	for k, v := range labels {
		l[k] = v
	}
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: l},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: c.StorageClassName,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
		},
	}
}

// DefaultCacheCapacity sizes a Persistent cache without a capacity: kopia's
// default caches are 5,000 MB each, bounded further by the size limits.
const DefaultCacheCapacity = "10Gi"

func failurePolicy(fp *snapv1.FailurePolicy, activeDeadline int64) snapv1.FailurePolicy {
	out := snapv1.FailurePolicy{}
	if fp != nil {
		out = *fp.DeepCopy()
	}
	if out.BackoffLimit == nil {
		v := DefaultBackoffLimit
		out.BackoffLimit = &v
	}
	if out.ActiveDeadlineSeconds == nil {
		v := DefaultActiveDeadline
		if activeDeadline > 0 {
			v = activeDeadline
		}
		out.ActiveDeadlineSeconds = &v
	}
	if out.PodStartupDeadlineSeconds == nil {
		v := DefaultPodStartupDeadline
		out.PodStartupDeadlineSeconds = &v
	}
	return out
}

// PodStartupDeadline reads the deadline Build stamped on a Job.
func PodStartupDeadline(j *batchv1.Job) time.Duration {
	var s int64
	if _, err := fmt.Sscan(j.Annotations[wellknown.SnapflowPrefix+"pod-startup-deadline-seconds"], &s); err != nil || s <= 0 {
		s = DefaultPodStartupDeadline
	}
	return time.Duration(s) * time.Second
}

func resources(d *snapv1.MoverDefaults, m *snapv1.MoverSpec) *corev1.ResourceRequirements {
	if m != nil && m.Resources != nil {
		return m.Resources
	}
	if d != nil {
		return d.Resources
	}
	return nil
}

func ptr[T any](v T) *T { return &v }

// Pinned reports whether work is the work spec j's mover was started with:
// the digest in j's pod template, which the mover checked before it ran.
// The work spec's ConfigMap sits in the run's namespace, so whoever may
// write ConfigMaps there can change it after the mover read it; a function
// reading the spec back to interpret the report (which members a deletion
// removed, which volume a snapshot covered) must read the one that ran.
func Pinned(j *batchv1.Job, work string) bool {
	want := mover.Digest([]byte(work))
	for _, c := range j.Spec.Template.Spec.Containers {
		if c.Name != ContainerName {
			continue
		}
		for i, a := range c.Args {
			if a == "--work-digest" && i+1 < len(c.Args) {
				return c.Args[i+1] == want
			}
		}
	}
	return false
}
