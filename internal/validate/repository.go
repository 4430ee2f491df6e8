package validate

import (
	"fmt"
	"net"
	"net/url"
	"reflect"
	"regexp"
	"strings"
	"time"

	"knative.dev/pkg/apis"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/expr"
)

var (
	dnsLabel     = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	s3BucketName = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)
	// Google's rules: 3-63 characters (222 with dots, 63 between them) of
	// lower-case letters, digits, '-', '_' and '.'.
	gcsBucketName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]$`)
)

// Repository checks a namespaced Repository.
func Repository(repo *snapv1.Repository, opts Options) Result {
	return repositorySpec(&repo.Spec, RepoKey(snapv1.RepositoryRef{Name: repo.Name}, repo.Namespace), repo.Namespace, false, opts)
}

// ClusterRepository checks a ClusterRepository, including its tenancy block.
func ClusterRepository(repo *snapv1.ClusterRepository, opts Options) Result {
	r := repositorySpec(&repo.Spec.RepositorySpec, RepoKey(snapv1.RepositoryRef{Kind: snapv1.KindClusterRepository, Name: repo.Name}, ""), "", true, opts)
	if an := repo.Spec.AllowedNamespaces; an != nil {
		forms := 0
		if an.List != nil {
			forms++
			for i, ns := range an.List {
				if !dnsLabel.MatchString(ns) {
					r.Also(fieldErr(fmt.Sprintf("spec.allowedNamespaces.list[%d]", i), "%q is not a namespace name", ns))
				}
			}
		}
		if an.Selector != nil {
			forms++
			r.Also(labelSelector(an.Selector).ViaField("spec.allowedNamespaces.selector"))
		}
		if an.All != nil {
			forms++
			if !*an.All {
				r.Also(fieldErr("spec.allowedNamespaces.all", "allowedNamespaces.all must be true to grant access (false is meaningless); remove allowedNamespaces to allow nobody, or list the namespaces"))
			}
		}
		if forms != 1 {
			r.Also(&apis.FieldError{Message: "exactly one of allowedNamespaces.list, allowedNamespaces.selector or allowedNamespaces.all must be set", Paths: []string{"spec.allowedNamespaces"}})
		}
	} else {
		r.Warn("ClusterRepository has no spec.allowedNamespaces, so no namespace may use it; add allowedNamespaces (a list, a selector, or all: true)")
	}
	return r
}

// RepositoryUpdate holds the rules that compare a stored repository with
// its edit. created says whether a kopia repository was ever connected for
// it (status.uniqueId is set): until then the format settings under
// spec.create are still only intentions, free to change.
func RepositoryUpdate(old, cur *snapv1.RepositorySpec, created bool) Result {
	var r Result
	if !created {
		return r
	}
	oc, nc := old.Create, cur.Create
	if oc == nil {
		oc = &snapv1.RepositoryCreate{}
	}
	if nc == nil {
		nc = &snapv1.RepositoryCreate{}
	}
	immutable := func(field, was, is string) {
		if was != "" && was != is {
			r.Also(fieldErr("spec.create."+field, "is immutable after repository creation (it is fixed in the kopia repository format; was %q, now %q); create a new Repository or ClusterRepository instead of editing this field", was, is))
		}
	}
	immutable("splitter", oc.Splitter, nc.Splitter)
	immutable("hash", oc.Hash, nc.Hash)
	immutable("encryption", oc.Encryption, nc.Encryption)
	if oc.ECC != nil && (nc.ECC == nil || oc.ECC.Algorithm != nc.ECC.Algorithm || !eqInt32(oc.ECC.OverheadPercent, nc.ECC.OverheadPercent)) {
		r.Also(fieldErr("spec.create.ecc", "is immutable after repository creation (it is fixed in the kopia repository format); create a new Repository or ClusterRepository instead of editing this field"))
	}
	return r
}

func eqInt32(a, b *int32) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}

// repositorySpec checks the shared spec; self is the repository's RepoKey and
// ns its namespace ("" for a ClusterRepository).
func repositorySpec(s *snapv1.RepositorySpec, self, ns string, cluster bool, opts Options) Result {
	var r Result
	r.Also(backend(&s.Backend).ViaField("spec.backend"))
	if s.Encryption.PasswordSecretRef.Name == "" {
		r.Also(missing("spec.encryption.passwordSecretRef.name", "encryption.passwordSecretRef.name (the Secret holding the kopia password)"))
	}
	// The mover reads these from a Repository's own namespace, which may
	// be spelled out; another one would be ignored.
	foreign := func(v string) bool { return !cluster && v != "" && v != ns }
	if v := s.Encryption.PasswordSecretRef.Namespace; foreign(v) {
		r.Also(fieldErr("spec.encryption.passwordSecretRef.namespace", "a Repository reads its password from its own namespace; remove namespace (got %q)", v))
	}
	if sf := s.Backend.SFTP; sf != nil && foreign(sf.Auth.SecretRef.Namespace) {
		r.Also(fieldErr("spec.backend.sftp.auth.secretRef.namespace", "a Repository reads its backend credentials from its own namespace; remove namespace (got %q)", sf.Auth.SecretRef.Namespace))
	}
	if g := s.Backend.GCS; g != nil && g.Auth != nil && g.Auth.SecretRef != nil && foreign(g.Auth.SecretRef.Namespace) {
		r.Also(fieldErr("spec.backend.gcs.auth.secretRef.namespace", "a Repository reads its backend credentials from its own namespace; remove namespace (got %q)", g.Auth.SecretRef.Namespace))
	}
	if dav := s.Backend.WebDAV; dav != nil && dav.Auth != nil && foreign(dav.Auth.SecretRef.Namespace) {
		r.Also(fieldErr("spec.backend.webDav.auth.secretRef.namespace", "a Repository reads its backend credentials from its own namespace; remove namespace (got %q)", dav.Auth.SecretRef.Namespace))
	}
	if dav := s.Backend.WebDAV; dav != nil && dav.Auth != nil && strings.HasPrefix(dav.URL, "http://") {
		r.Warn("spec.backend.webDav.url: http:// sends the WebDAV password in the clear on every request; use https://")
	}
	if cluster && s.Encryption.PasswordSecretRef.Namespace == "" {
		r.Also(missing("spec.encryption.passwordSecretRef.namespace", "encryption.passwordSecretRef.namespace (a ClusterRepository has no namespace of its own to read the password Secret from)"))
	}
	if id := s.IdentityDefaults; id != nil {
		if id.Cluster != "" {
			switch {
			case strings.Contains(id.Cluster, "."):
				r.Also(fieldErr("spec.identityDefaults.cluster", "identityDefaults.cluster %q is not a valid cluster identity suffix: must not contain '.' (the first '.' in a hostname is the namespace/cluster delimiter)", id.Cluster))
			case len(id.Cluster) > 32 || !dnsLabel.MatchString(id.Cluster):
				r.Also(fieldErr("spec.identityDefaults.cluster", "identityDefaults.cluster %q is not a valid cluster identity suffix: use an RFC 1123 label of at most 32 characters (lower-case letters, digits and '-')", id.Cluster))
			}
		}
		for field, src := range map[string]string{"hostnameExpr": id.HostnameExpr, "usernameExpr": id.UsernameExpr} {
			if src == "" {
				continue
			}
			if err := expr.Identity.Check(src); err != nil {
				r.Also(fieldErr("spec.identityDefaults."+field, "%s %q %v", field, src, err))
			}
		}
	}
	if c := s.Catalog; c != nil {
		r.Also(catalog(c, s, cluster).ViaField("spec.catalog"))
	}
	if m := s.Maintenance; m != nil {
		if m.Namespace != "" && !cluster {
			r.Also(fieldErr("spec.maintenance.namespace", "is only meaningful on a ClusterRepository; a Repository runs maintenance in its own namespace. Remove it"))
		}
		if m.Schedule != nil {
			r.Also(cronSpec(m.Schedule.Quick, opts).ViaField("spec.maintenance.schedule.quick"), cronSpec(m.Schedule.Full, opts).ViaField("spec.maintenance.schedule.full"))
		}
	}
	if sv := s.Server; sv != nil {
		r.Also(server(sv, s.Mode, cluster).ViaField("spec.server"))
	}
	if p := s.Parameters; p != nil {
		r.Also(parameters(p, s).ViaField("spec.parameters"))
	}
	if h := s.Health; h != nil {
		if h.IndexBlobWarnThreshold != nil && *h.IndexBlobWarnThreshold < 0 {
			r.Also(fieldErr("spec.health.indexBlobWarnThreshold", "must be at least 0 (got %d); 0 disables the warning", *h.IndexBlobWarnThreshold))
		}
		if pr := h.Probe; pr != nil {
			if d, err := duration("spec.health.probe.interval", pr.Interval); err != nil {
				r.Also(err)
			} else if pr.Interval != "" && d < 30*time.Second {
				r.Also(fieldErr("spec.health.probe.interval", "%s is below the 30s minimum: probing more often only loads the backend", pr.Interval))
			}
			r.Also(minCount("spec.health.probe.failureThreshold", pr.FailureThreshold))
		}
	}
	if md := s.MoverDefaults; md != nil {
		r.Merge(moverDefaults(md, s))
	}
	if sd := s.ScheduleDefaults; sd != nil {
		r.Also(jitter("spec.scheduleDefaults.jitter", sd.Jitter, opts), timezone("spec.scheduleDefaults.timezone", sd.Timezone))
	}
	if sd := s.Seed; sd != nil {
		r.Also(seed(sd, s, self, ns, cluster).ViaField("spec.seed"))
	}
	if c := s.Concurrency; c != nil && c.MaxConcurrentJobs != nil && *c.MaxConcurrentJobs < 0 {
		r.Also(fieldErr("spec.concurrency.maxConcurrentJobs", "must be at least 0 (got %d); 0 or absent is unlimited", *c.MaxConcurrentJobs))
	}
	if dp := s.DeletionProtection; dp != nil && dp.Threshold != nil && *dp.Threshold < 0 {
		r.Also(fieldErr("spec.deletionProtection.threshold", "must be at least 0 (got %d); 0 disables the mass-deletion breaker", *dp.Threshold))
	}
	if s3 := s.Backend.S3; s3 != nil && s3.TLS != nil && s3.TLS.CABundleRef != nil && s3.TLS.InsecureSkipVerify {
		r.Warn("spec.backend.s3.tls sets both caBundleRef and insecureSkipVerify: certificates are not verified, so the CA bundle has no effect; drop insecureSkipVerify to verify against the bundle")
	}
	return r
}

func backend(b *snapv1.Backend) *apis.FieldError {
	var errs *apis.FieldError
	forms := 0
	if f := b.Filesystem; f != nil {
		forms++
		if !strings.HasPrefix(f.Path, "/") {
			errs = errs.Also(fieldErr("filesystem.path", "must be an absolute path beginning with '/' (got %q)", f.Path))
		}
		if v := f.Volume; v != nil {
			switch {
			case v.PVC != nil && v.NFS != nil, v.PVC == nil && v.NFS == nil:
				errs = errs.Also(&apis.FieldError{Message: "exactly one of filesystem.volume.pvc and filesystem.volume.nfs must be set", Paths: []string{"filesystem.volume"}})
			case v.NFS != nil:
				if v.NFS.Server == "" {
					errs = errs.Also(missing("filesystem.volume.nfs.server", "filesystem.volume.nfs.server"))
				}
				if !strings.HasPrefix(v.NFS.Path, "/") {
					errs = errs.Also(fieldErr("filesystem.volume.nfs.path", "must be an absolute export path beginning with '/' (got %q)", v.NFS.Path))
				}
			}
		}
	}
	if s3 := b.S3; s3 != nil {
		forms++
		if !s3BucketName.MatchString(s3.Bucket) || strings.Contains(s3.Bucket, "..") || net.ParseIP(s3.Bucket) != nil {
			errs = errs.Also(fieldErr("s3.bucket", "%q is not a valid bucket name: use 3-63 lower-case letters, digits, '.' and '-', starting and ending with a letter or digit", s3.Bucket))
		}
		if strings.Contains(s3.Endpoint, "://") || strings.Contains(s3.Endpoint, "/") {
			errs = errs.Also(fieldErr("s3.endpoint", "%q must be host[:port] without a scheme or path (e.g. s3.us-east-1.amazonaws.com or minio.storage.svc:9000); use tls.disableTls for plain HTTP", s3.Endpoint))
		}
		errs = errs.Also(objectStoreAuth(s3.Auth).ViaField("s3.auth"))
		if strings.HasPrefix(s3.Prefix, "/") {
			errs = errs.Also(fieldErr("s3.prefix", "must not start with '/' (got %q): object keys have no leading slash", s3.Prefix))
		}
	}
	if a := b.Azure; a != nil {
		forms++
		errs = errs.Also(objectStoreAuth(a.Auth).ViaField("azure.auth"))
	}
	if g := b.GCS; g != nil {
		forms++
		errs = errs.Also(objectStoreAuth(g.Auth).ViaField("gcs.auth"))
		if !validGCSBucket(g.Bucket) {
			errs = errs.Also(fieldErr("gcs.bucket", "%q is not a valid bucket name: use 3-63 lower-case letters, digits, '-', '_' and '.' (up to 222 with dots, 63 between them), starting and ending with a letter or digit, not starting with \"goog\"", g.Bucket))
		}
		if strings.HasPrefix(g.Prefix, "/") {
			errs = errs.Also(fieldErr("gcs.prefix", "%q starts with '/': object names have no leading slash, so give the prefix without it", g.Prefix))
		}
	}
	if b.B2 != nil {
		forms++
	}
	if b.GDrive != nil {
		forms++
	}
	if b.Rclone != nil {
		forms++
		if !strings.Contains(b.Rclone.RemotePath, ":") {
			errs = errs.Also(fieldErr("rclone.remotePath", "%q must be remote:path as rclone understands it", b.Rclone.RemotePath))
		}
	}
	if sf := b.SFTP; sf != nil {
		forms++
		if !strings.HasPrefix(sf.Path, "/") {
			errs = errs.Also(fieldErr("sftp.path", "must be an absolute path beginning with '/' (got %q)", sf.Path))
		}
	}
	if w := b.WebDAV; w != nil {
		forms++
		if u, err := url.Parse(w.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = errs.Also(fieldErr("webDav.url", "is not an http:// or https:// URL"))
		} else if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			errs = errs.Also(fieldErr("webDav.url", "%s carries credentials, a query or a fragment: the URL is shown in status and the mover's work spec, so put the credentials in the Secret of webDav.auth (KOPIA_WEBDAV_USERNAME, KOPIA_WEBDAV_PASSWORD) and give the URL alone", u.Redacted()))
		}
	}
	if forms != 1 {
		errs = errs.Also(&apis.FieldError{Message: fmt.Sprintf("exactly one backend must be set (got %d): choose one of azure, b2, filesystem, gcs, gdrive, rclone, s3, sftp, webDav", forms), Paths: []string{""}})
	}
	return errs
}

func objectStoreAuth(a *snapv1.ObjectStoreAuth) *apis.FieldError {
	if a == nil {
		return nil
	}
	if (a.SecretRef == nil) == (a.WorkloadIdentity == nil) {
		return &apis.FieldError{Message: "exactly one of secretRef and workloadIdentity must be set", Paths: []string{"secretRef", "workloadIdentity"}}
	}
	if a.SecretRef != nil && a.SecretRef.Name == "" {
		return missing("secretRef.name", "secretRef.name (the Secret with the access keys)")
	}
	return nil
}

func catalog(c *snapv1.Catalog, s *snapv1.RepositorySpec, cluster bool) *apis.FieldError {
	var errs *apis.FieldError
	if d, err := duration("refreshInterval", c.RefreshInterval); err != nil {
		errs = errs.Also(err)
	} else if c.RefreshInterval != "" && d < 30*time.Second {
		errs = errs.Also(fieldErr("refreshInterval", "%s is below the 30s minimum: each refresh lists every snapshot in the repository", c.RefreshInterval))
	}
	if rt := c.Retain; rt != nil {
		if rt.PerIdentity != nil && *rt.PerIdentity < 0 {
			errs = errs.Also(fieldErr("retain.perIdentity", "must be at least 0 (got %d)", *rt.PerIdentity))
		}
		errs = errs.Also(minCount("retain.maxAgeDays", rt.MaxAgeDays))
	}
	if c.FallbackNamespace != "" && !cluster {
		errs = errs.Also(fieldErr("fallbackNamespace", "is only meaningful on a ClusterRepository: a Repository materialises discovered snapshots in its own namespace. Remove it"))
	}
	if c.ForeignSnapshots != "" {
		if s.IdentityDefaults == nil || s.IdentityDefaults.Cluster == "" {
			errs = errs.Also(fieldErr("foreignSnapshots", "catalog.foreignSnapshots is set, but classifying a snapshot as \"foreign\" requires a cluster identity: set spec.identityDefaults.cluster, or remove foreignSnapshots"))
		}
		if c.ForeignSnapshots == "Fallback" && (!cluster || c.FallbackNamespace == "") {
			errs = errs.Also(fieldErr("foreignSnapshots", "Fallback places foreign snapshots in catalog.fallbackNamespace, which only a ClusterRepository has; set fallbackNamespace on a ClusterRepository, or use Ignore"))
		}
	} else if cluster && c.FallbackNamespace != "" {
		errs = errs.Also(fieldErr("foreignSnapshots", "a ClusterRepository with catalog.fallbackNamespace must say what happens to other clusters' snapshots: set foreignSnapshots to Ignore or Fallback"))
	}
	return errs
}

func server(sv *snapv1.RepositoryServer, mode snapv1.RepositoryMode, cluster bool) *apis.FieldError {
	var errs *apis.FieldError
	if a := sv.Auth; a != nil && a.Insecure && !a.AcknowledgeInsecure {
		errs = errs.Also(fieldErr("auth.insecure", "spec.server.auth.insecure requires acknowledgeInsecure: true: a no-auth kopia server exposes full read, write and delete of every backup with no login"))
	}
	if sv.Port != nil && *sv.Port == 0 {
		errs = errs.Also(fieldErr("port", "must not be 0; remove it for the default port"))
	}
	if mode == snapv1.ModeReadOnly && sv.ReadOnly != nil && !*sv.ReadOnly {
		errs = errs.Also(fieldErr("readOnly", "readOnly: false is refused on a repository with mode: ReadOnly; remove it"))
	}
	if cluster && sv.Enabled && sv.Namespace == "" {
		errs = errs.Also(missing("namespace", "server.namespace (a ClusterRepository's server needs a namespace to run in)"))
	}
	if !cluster && sv.Namespace != "" {
		errs = errs.Also(fieldErr("namespace", "is only meaningful on a ClusterRepository; a Repository's server runs in its own namespace. Remove it"))
	}
	return errs
}

func parameters(p *snapv1.RepositoryParameters, s *snapv1.RepositorySpec) *apis.FieldError {
	var errs *apis.FieldError
	if s.Mode == snapv1.ModeReadOnly {
		return fieldErr("", "repository parameters change the kopia repository, which mode: ReadOnly forbids; remove spec.parameters or use mode: ReadWrite")
	}
	if e := p.Epoch; e != nil {
		for field, v := range map[string]string{"minDuration": e.MinDuration, "refreshFrequency": e.RefreshFrequency} {
			if _, err := duration("epoch."+field, v); err != nil {
				errs = errs.Also(err)
			}
		}
		errs = errs.Also(minCount("epoch.advanceOnCount", e.AdvanceOnCount), minCount("epoch.checkpointFrequency", e.CheckpointFrequency), minCount("epoch.deleteParallelism", e.DeleteParallelism))
		if e.AdvanceOnSizeMiB != nil && *e.AdvanceOnSizeMiB < 1 {
			errs = errs.Also(fieldErr("epoch.advanceOnSizeMiB", "must be at least 1 (got %d)", *e.AdvanceOnSizeMiB))
		}
	}
	if br := p.BlobRetention; br != nil {
		if s.Backend.S3 == nil && s.Backend.Azure == nil && s.Backend.GCS == nil {
			errs = errs.Also(fieldErr("blobRetention", "object-lock blob retention needs an s3, azure or gcs backend"))
		}
		if d, err := duration("blobRetention.period", br.Period); err != nil {
			errs = errs.Also(fieldErr("blobRetention.period", "%q is not a valid Go-style duration; write 30 days as 720h, not 30d", br.Period))
		} else if d < 24*time.Hour {
			errs = errs.Also(fieldErr("blobRetention.period", "%s is below the 24h minimum; write 30 days as 720h, not 30d", br.Period))
		}
	}
	return errs
}

func moverDefaults(md *snapv1.MoverDefaults, s *snapv1.RepositorySpec) Result {
	var r Result
	reserved := func(field string, m map[string]string) {
		for k := range m {
			if strings.HasPrefix(k, wellknown.Prefix) || strings.HasPrefix(k, wellknown.SnapflowPrefix) || k == wellknown.LabelManagedBy {
				r.Also(fieldErr(fmt.Sprintf("spec.moverDefaults.%s[%s]", field, k), "%q is reserved by snapflow: it stamps this key on every mover pod and its own value wins the merge; choose another key", k))
			}
		}
	}
	reserved("podLabels", md.PodLabels)
	reserved("podAnnotations", md.PodAnnotations)
	r.Also(resources(md.Resources).ViaField("spec.moverDefaults.resources"))
	if md.Cache != nil {
		r.Also(moverCache(md.Cache).ViaField("spec.moverDefaults.cache"))
	}
	if t := md.Throttle; t != nil {
		for name, v := range map[string]*int64{"uploadBytesPerSecond": t.UploadBytesPerSecond, "downloadBytesPerSecond": t.DownloadBytesPerSecond,
			"readOpsPerSecond": t.ReadOpsPerSecond, "writeOpsPerSecond": t.WriteOpsPerSecond} {
			if v != nil && *v < 1 {
				r.Also(fieldErr("spec.moverDefaults.throttle."+name, "must be at least 1 (got %d): kopia treats an absent field, not 0, as no limit; remove it for no limit", *v))
			}
		}
	}
	if fs := s.Backend.Filesystem; fs != nil && fs.Volume != nil && fs.Volume.NFS != nil && md.PodSecurityContext != nil && md.PodSecurityContext.FSGroup != nil && len(md.PodSecurityContext.SupplementalGroups) == 0 {
		r.Warn("NFS filesystem repository: fsGroup is ignored on NFS; grant the mover write access via moverDefaults.podSecurityContext.supplementalGroups (the export's group) instead")
	}
	return r
}

func seed(sd *snapv1.Seed, s *snapv1.RepositorySpec, self, ns string, cluster bool) *apis.FieldError {
	var errs *apis.FieldError
	if s.Mode == snapv1.ModeReadOnly {
		errs = errs.Also(fieldErr("", "seeding writes into this repository, which mode: ReadOnly forbids; remove spec.seed or use mode: ReadWrite"))
	}
	from := sd.From
	switch {
	case (from.Backend == nil) == (from.Repository == nil):
		errs = errs.Also(&apis.FieldError{Message: "exactly one of seed.from.backend and seed.from.repository must be set", Paths: []string{"from"}})
	case from.Backend != nil:
		errs = errs.Also(backend(from.Backend).ViaField("from.backend"))
		if sd.Migrate != nil {
			errs = errs.Also(fieldErr("migrate", "seed.migrate tunes a snapshot-level seed from a repository; a seed from a backend copies blobs, so use seed.sync"))
		}
		if reflect.DeepEqual(*from.Backend, s.Backend) {
			errs = errs.Also(fieldErr("from.backend", "names this repository's own storage; a seed must copy from somewhere else"))
		}
		if fs := from.Backend.Filesystem; fs != nil {
			if fs.Volume == nil {
				errs = errs.Also(fieldErr("from.backend.filesystem.volume", "a seed source must be mountable into the seed Job: give filesystem.volume (a PVC or an NFS export), not a bare node path"))
			}
			if own := s.Backend.Filesystem; own != nil && own.Path == fs.Path {
				errs = errs.Also(fieldErr("from.backend.filesystem.path", "%q is also this repository's own path: the seed Job mounts both, so they would collide; give the seed source a different path", fs.Path))
			}
		}
		b := from.Backend
		for _, src := range []struct {
			field string
			set   bool
			auth  *snapv1.ObjectStoreAuth
		}{{"s3", b.S3 != nil, authOf(b.S3)}, {"azure", b.Azure != nil, authOf(b.Azure)}, {"gcs", b.GCS != nil, authOf(b.GCS)}} {
			if src.set && src.auth == nil {
				errs = errs.Also(missing("from.backend."+src.field+".auth", "from.backend."+src.field+".auth (the seed Job needs credentials for the source: a secretRef or workloadIdentity)"))
			}
		}
		if ref := seedSecret(from.Backend); ref != nil {
			switch {
			case cluster && ref.Namespace != "":
				errs = errs.Also(fieldErr("from.backend", "a ClusterRepository's seed credentials are read from the install namespace; remove the Secret's namespace (got %q)", ref.Namespace))
			case !cluster && ref.Namespace != "":
				errs = errs.Also(fieldErr("from.backend", "a Repository reads its seed credentials from its own namespace; remove the Secret's namespace (got %q)", ref.Namespace))
			}
		}
	case from.Repository != nil:
		errs = errs.Also(repositoryRef(from.Repository).ViaField("from.repository"))
		if RepoKey(*from.Repository, ns) == self {
			errs = errs.Also(fieldErr("from.repository", "names this repository itself; a seed must copy from another repository"))
		}
		if sd.Sync != nil {
			errs = errs.Also(fieldErr("sync", "seed.sync tunes a blob-level seed from a backend; a seed from a repository migrates snapshots, so use seed.migrate"))
		}
	}
	if sd.Sync != nil {
		errs = errs.Also(minCount("sync.parallel", sd.Sync.Parallel))
	}
	if sd.Migrate != nil {
		errs = errs.Also(minCount("migrate.parallel", sd.Migrate.Parallel))
	}
	return errs.Also(failurePolicy(sd.FailurePolicy).ViaField("failurePolicy"))
}

// seedSecret is the credentials Secret of an object-store seed source.
func seedSecret(b *snapv1.Backend) *snapv1.SecretRef {
	for _, a := range []*snapv1.ObjectStoreAuth{authOf(b.S3), authOf(b.Azure), authOf(b.GCS)} {
		if a != nil && a.SecretRef != nil {
			return a.SecretRef
		}
	}
	return nil
}

func authOf[T snapv1.S3Backend | snapv1.AzureBackend | snapv1.GCSBackend](b *T) *snapv1.ObjectStoreAuth {
	if b == nil {
		return nil
	}
	switch v := any(b).(type) {
	case *snapv1.S3Backend:
		return v.Auth
	case *snapv1.AzureBackend:
		return v.Auth
	case *snapv1.GCSBackend:
		return v.Auth
	}
	return nil
}

func validGCSBucket(b string) bool {
	if !gcsBucketName.MatchString(b) || strings.HasPrefix(b, "goog") || net.ParseIP(b) != nil || strings.Contains(b, "..") {
		return false
	}
	parts := strings.Split(b, ".")
	if len(parts) == 1 && len(b) > 63 {
		return false
	}
	for _, p := range parts {
		if len(p) > 63 {
			return false
		}
	}
	return true
}
