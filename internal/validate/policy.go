package validate

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"knative.dev/pkg/apis"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/egress"
	"github.com/snapflow/snapflow/internal/expr"
	"github.com/snapflow/snapflow/internal/identity"
	"github.com/snapflow/snapflow/internal/kopiaflags"
)

var accessModes = map[string]bool{"ReadWriteOnce": true, "ReadOnlyMany": true, "ReadWriteMany": true, "ReadWriteOncePod": true}

// SnapshotPolicy checks a recipe on its own (referent checks live in Referents).
func SnapshotPolicy(p *snapv1.SnapshotPolicy, opts Options) Result {
	var r Result
	s := &p.Spec
	r.Also(policyRepositories(p).ViaField("spec"))
	r.Also(policySources(s, opts).ViaField("spec"))
	if s.Identity != nil {
		for field, v := range map[string]string{"username": s.Identity.Username, "hostname": s.Identity.Hostname} {
			if v == "" {
				continue
			}
			if pr := identity.ComponentProblem(v); pr != "" {
				r.Also(fieldErr("spec.identity."+field, "%q is not a valid kopia identity component: %s (kopia parses username@hostname:path on the first @ and first :, with no escaping)", v, pr))
			}
		}
	}
	r.Also(extraArgs(s))
	if c := s.Compression; c != nil {
		if err := kopiaflags.Compressor(c.Compressor); err != nil {
			r.Also(fieldErr("spec.compression.compressor", "%v", err))
		}
		// Entries kopia cannot match were admitted once and only cost
		// compression work: runs ignore them (PolicyFromSpec) rather than
		// fail a backup over a hint.
		if _, err := kopiaflags.NeverCompress(c.NeverCompress); err != nil && opts.Admission {
			r.Also(fieldErr("spec.compression.neverCompress", "%v", err))
		}
	}
	if class, ok := p.Annotations[wellknown.AnnotationVolumeGroupSnapshotClass]; ok {
		path := "metadata.annotations[" + wellknown.AnnotationVolumeGroupSnapshotClass + "]"
		switch {
		case len(validation.IsDNS1123Subdomain(class)) > 0:
			r.Also(fieldErr(path, "%q is not a VolumeGroupSnapshotClass name (a DNS subdomain: lower-case letters, digits, '-' and '.'); name the class your CSI driver's groups are cut with (kubectl get volumegroupsnapshotclasses), or remove the annotation for the driver's default", class))
		case s.GroupBy == snapv1.GroupByNone || s.CopyMethod == snapv1.CopyClone:
			r.Also(fieldErr(path, "names the class of a VolumeGroupSnapshot, but this policy cuts no group (groupBy: None, or copyMethod: Clone); remove the annotation, or group with groupBy: VolumeGroupSnapshot and copyMethod Snapshot or Direct"))
		case !hasSelector(p):
			r.Warn("%s names a VolumeGroupSnapshotClass, but no source of this policy is a pvcSelector, and only a selector's PVCs are cut as a group", path)
		}
	}
	if s.Retention != nil && retentionKeepsNothing(s.Retention) {
		r.Also(fieldErr("spec.retention", "keeps no snapshots: every keep* bucket is unset or 0, so GFS retention would prune every Snapshot immediately (data loss). Set at least one bucket (e.g. keepLatest: 1), or omit spec.retention entirely to disable pruning"))
	}
	if s.Staging != nil {
		r.Also(staging(s).ViaField("spec.staging"))
	}
	if s.Verification != nil {
		r.Also(verification(s.Verification, opts).ViaField("spec.verification"))
	}
	if s.Preflight != nil {
		r.Also(preflight(s.Preflight).ViaField("spec.preflight"))
		for i, c := range s.Preflight.Checks {
			for _, v := range expr.Unguarded(c.Expr) {
				r.Warn("spec.preflight.checks[%d].expr reads %s without %s: until snapflow has observed it, the check holds every run (and fails it after the timeout); write %s || ... or %s && ...", i, v, expr.PreflightGuards[v], "!"+expr.PreflightGuards[v], expr.PreflightGuards[v])
			}
		}
	}
	if s.Hooks != nil {
		if len(s.Repositories) > 0 {
			r.Also(fieldErr("spec.hooks", "cannot be combined with spec.repositories: the first fan-out child to finish would run the after-snapshot (thaw) hooks while the other children's movers are still reading, so the quiesce contract cannot be honored. Use a single-repository policy (spec.repository) with hooks, plus a SnapshotReplication to copy its snapshots into the second repository"))
		}
		for i, h := range s.Hooks.BeforeSnapshot {
			r.Also(hook(h).ViaFieldIndex("beforeSnapshot", i).ViaField("spec.hooks"))
		}
		for i, h := range s.Hooks.AfterSnapshot {
			r.Also(hook(h).ViaFieldIndex("afterSnapshot", i).ViaField("spec.hooks"))
		}
	}
	if u := s.Upload; u != nil {
		if u.LimitMb != nil && *u.LimitMb < 1 {
			r.Also(fieldErr("spec.upload.limitMb", "must be at least 1 MB, the most a run uploads before it is aborted (got %d); remove it for no limit", *u.LimitMb))
		}
		r.Also(minCount("spec.upload.maxParallelSnapshots", u.MaxParallelSnapshots), minCount("spec.upload.maxParallelFileReads", u.MaxParallelFileReads))
	}
	r.Also(mover(s.Mover, false).ViaField("spec.mover"))
	if s.ResourcePolicy != nil && s.ResourcePolicy.Name == "" {
		r.Also(missing("spec.resourcePolicy.name", "name (the ConfigMap holding the volume policies)"))
	}
	return r
}

func policyRepositories(p *snapv1.SnapshotPolicy) *apis.FieldError {
	s := &p.Spec
	var errs *apis.FieldError
	switch {
	case s.Repository == nil && len(s.Repositories) == 0:
		errs = errs.Also(&apis.FieldError{Message: "exactly one of spec.repository and spec.repositories must be set (got neither); set spec.repository to name the single target repository, or spec.repositories to list 1-8 targets for multi-repository fan-out", Paths: []string{"repository", "repositories"}})
	case s.Repository != nil && len(s.Repositories) > 0:
		errs = errs.Also(&apis.FieldError{Message: "exactly one of spec.repository and spec.repositories must be set (got both); keep spec.repository for a single target, or move it into spec.repositories for fan-out", Paths: []string{"repository", "repositories"}})
	}
	errs = errs.Also(repositoryRef(s.Repository).ViaField("repository"))
	if len(s.Repositories) > 8 {
		errs = errs.Also(fieldErr("repositories", "lists %d repositories; at most 8 are allowed", len(s.Repositories)))
	}
	seen := map[string]int{}
	for i, ref := range s.Repositories {
		errs = errs.Also(repositoryRef(&ref).ViaFieldIndex("repositories", i))
		key := RepoKey(ref, p.Namespace)
		if first, dup := seen[key]; dup {
			errs = errs.Also(fieldErr(fmt.Sprintf("repositories[%d]", i), "spec.repositories[%d] and spec.repositories[%d] both name %s: each listed repository must be distinct, or the two fan-out children would interleave writes into one kopia identity in that repository. Remove the duplicate entry", first, i, key))
		} else {
			seen[key] = i
		}
	}
	return errs
}

func retentionKeepsNothing(r *snapv1.Retention) bool {
	for _, v := range []*int32{r.KeepLatest, r.KeepHourly, r.KeepDaily, r.KeepWeekly, r.KeepMonthly, r.KeepAnnual} {
		if v != nil && *v > 0 {
			return false
		}
	}
	return true
}

func policySources(s *snapv1.SnapshotPolicySpec, opts Options) *apis.FieldError {
	var errs *apis.FieldError
	if len(s.Sources) == 0 {
		return missing("sources", "spec.sources (at least one source required)")
	}
	if len(s.Sources) > 100 {
		errs = errs.Also(fieldErr("sources", "lists %d sources; at most 100 are allowed", len(s.Sources)))
	}
	streams := 0
	for _, src := range s.Sources {
		if src.Stream != nil {
			streams++
		}
	}
	for i, src := range s.Sources {
		errs = errs.Also(source(s, src, streams, len(s.Sources)).ViaFieldIndex("sources", i))
	}
	return errs
}

func source(s *snapv1.SnapshotPolicySpec, src snapv1.Source, streams, total int) *apis.FieldError {
	var errs *apis.FieldError
	forms := []string{}
	if src.PVC != nil {
		forms = append(forms, "pvc")
	}
	if src.PVCSelector != nil {
		forms = append(forms, "pvcSelector")
	}
	if src.NFS != nil {
		forms = append(forms, "nfs")
	}
	if src.Stream != nil {
		forms = append(forms, "stream")
	}
	switch len(forms) {
	case 0:
		return missing("", "source.pvc, source.pvcSelector, source.nfs, or source.stream (each source is exactly one of them)")
	case 1:
	default:
		return &apis.FieldError{Message: fmt.Sprintf("fields %s are mutually exclusive but several were set (snapshot source); split them into separate sources", strings.Join(forms, ", ")), Paths: forms}
	}
	readOnlyFalse := src.ReadOnly != nil && !*src.ReadOnly
	hasVSC := s.VolumeSnapshotClassName != nil && *s.VolumeSnapshotClassName != ""
	if src.SourcePathOverride != nil {
		if pr := identity.SourcePathProblem(*src.SourcePathOverride); pr != "" {
			errs = errs.Also(fieldErr("sourcePathOverride", "%q is not a valid kopia source path: %s", *src.SourcePathOverride, pr))
		}
	}
	switch {
	case src.PVC != nil:
		if src.PVC.Name == "" {
			errs = errs.Also(missing("pvc.name", "pvc.name (the PersistentVolumeClaim to back up)"))
		}
	case src.PVCSelector != nil:
		sel := src.PVCSelector
		if sel.NamespaceSelector != nil && len(sel.NamespaceSelector.MatchNames) > 0 {
			errs = errs.Also(fieldErr("pvcSelector.namespaceSelector.matchNames", "a backup's mover Pod can only mount PersistentVolumeClaims in its own namespace, so a selector cannot reach PVCs in another one. Use one SnapshotPolicy per namespace (each may point at the same repository)"))
		}
		errs = errs.Also(labelSelector(sel.LabelSelector).ViaField("pvcSelector.labelSelector"))
		if s.CopyMethod == snapv1.CopyClone && s.GroupBy != snapv1.GroupByNone {
			errs = errs.Also(fieldErr("pvcSelector", "copyMethod: Clone clones each PVC independently and has no group equivalent, so it cannot honor groupBy: VolumeGroupSnapshot (the default). Set groupBy: None to accept independent per-PVC clones, or use copyMethod: Snapshot"))
		}
	case src.NFS != nil:
		if src.NFS.Server == "" {
			errs = errs.Also(missing("nfs.server", "snapshot source nfs.server"))
		}
		if !strings.HasPrefix(src.NFS.Path, "/") {
			errs = errs.Also(fieldErr("nfs.path", "must be an absolute export path beginning with '/' (got %q)", src.NFS.Path))
		} else if pr := identity.SourcePathProblem(src.NFS.Path); pr != "" && src.SourcePathOverride == nil {
			// The export path is the kopia source path unless overridden.
			errs = errs.Also(fieldErr("nfs.path", "%q cannot be a kopia source path: %s; set sourcePathOverride", src.NFS.Path, pr))
		}
		if readOnlyFalse {
			errs = errs.Also(fieldErr("readOnly", "readOnly: false is not supported on an nfs source: the kubelet does not apply fsGroup to in-tree NFS volumes, so a read-write mount grants the mover no additional readability and only exposes the export to writes. Remove readOnly, and grant read access on the NFS server instead"))
		}
		if m := s.Mover; m != nil && m.InheritSecurityContextFrom != nil && m.InheritSecurityContextFrom.PvcConsumer != nil {
			errs = errs.Also(fieldErr("nfs", "spec.mover.inheritSecurityContextFrom.pvcConsumer finds the pod that mounts the source PVC, and an nfs source has none; use inheritSecurityContextFrom.workloadSelector to name the workload whose identity reads the export"))
		}
		if hasVSC {
			errs = errs.Also(fieldErr("nfs", "an NFS source cannot be CSI-snapshotted, so spec.volumeSnapshotClassName is meaningless with it; remove volumeSnapshotClassName or move the NFS source to its own policy"))
		}
	case src.Stream != nil:
		errs = errs.Also(stream(src, streams, total, hasVSC))
		if m := s.Mover; m != nil && m.InheritSecurityContextFrom != nil {
			errs = errs.Also(fieldErr("stream", "spec.mover.inheritSecurityContextFrom gives the mover the identity that reads a volume's files, and a stream source has none: the command runs in the workload as the workload's own user. Remove inheritSecurityContextFrom"))
		}
	}
	if s.CopyMethod == snapv1.CopyDirect && readOnlyFalse && src.NFS == nil && src.Stream == nil &&
		(src.AcknowledgeLiveMutation == nil || !*src.AcknowledgeLiveMutation) {
		errs = errs.Also(fieldErr("readOnly", "copyMethod: Direct with readOnly: false mounts the LIVE source volume read-write, so the kubelet will recursively chgrp its contents to the mover's fsGroup (65532 by default) and make them group-writable, permanently, while the workload is running. Prefer copyMethod: Snapshot or Clone, which rewrite only a throwaway staged copy. If you do mean to rewrite the live volume, set acknowledgeLiveMutation: true on this source"))
	}
	return errs
}

func stream(src snapv1.Source, streams, total int, hasVSC bool) *apis.FieldError {
	var errs *apis.FieldError
	st := src.Stream
	if fn := st.FileName; fn == "" || fn == "." || fn == ".." || strings.ContainsAny(fn, "/\x00") || hasControl(fn) {
		errs = errs.Also(fieldErr("stream.fileName", "%q is not a usable file name. Give ONE file name (e.g. postgres.sql): no '/', not '.' or '..', no control characters", fn))
	}
	blank := true
	for _, c := range st.WorkloadExec.Command {
		if strings.TrimSpace(c) != "" {
			blank = false
		}
	}
	if blank {
		errs = errs.Also(missing("stream.workloadExec.command", "stream.workloadExec.command (the command whose stdout is snapshotted)"))
	}
	if selectorEmpty(st.WorkloadExec.PodSelector) {
		errs = errs.Also(fieldErr("stream.workloadExec.podSelector", "the podSelector is empty, which matches EVERY pod in the namespace; select the one workload to run the command in"))
	}
	errs = errs.Also(labelSelector(&st.WorkloadExec.PodSelector).ViaField("stream.workloadExec.podSelector"))
	if _, err := duration("stream.workloadExec.timeout", st.WorkloadExec.Timeout); err != nil {
		errs = errs.Also(err)
	}
	if src.ReadOnly != nil && !*src.ReadOnly {
		errs = errs.Also(fieldErr("readOnly", "has no meaning on a stream source (nothing is mounted); remove it"))
	}
	if src.AcknowledgeLiveMutation != nil {
		errs = errs.Also(fieldErr("acknowledgeLiveMutation", "has no meaning on a stream source (nothing is mounted); remove it"))
	}
	if src.SourcePathStrategy != "" && src.SourcePathStrategy != snapv1.SourcePathPvcName {
		errs = errs.Also(fieldErr("sourcePathStrategy", "has no meaning on a stream source; remove it"))
	}
	if total > 1 {
		errs = errs.Also(fieldErr("stream", "a stream source must be the only source in its SnapshotPolicy, but this one has %d sources (%d of them streams); put the stream in a policy of its own", total, streams))
	}
	if hasVSC {
		errs = errs.Also(fieldErr("stream", "a stream source is never CSI-snapshotted, so spec.volumeSnapshotClassName is meaningless with it; remove volumeSnapshotClassName"))
	}
	return errs
}

func hasControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return true
		}
	}
	return false
}

func staging(s *snapv1.SnapshotPolicySpec) *apis.FieldError {
	st := s.Staging
	var errs *apis.FieldError
	if st.Timeout != "0" {
		if _, err := duration("timeout", st.Timeout); err != nil {
			errs = errs.Also(err)
		}
	}
	seen := map[string]bool{}
	for i, m := range st.AccessModes {
		switch {
		case !accessModes[m]:
			errs = errs.Also(fieldErr(fmt.Sprintf("accessModes[%d]", i), "%q is not an access mode (use ReadWriteOnce, ReadOnlyMany, ReadWriteMany or ReadWriteOncePod)", m))
		case seen[m]:
			errs = errs.Also(fieldErr(fmt.Sprintf("accessModes[%d]", i), "%s is listed twice; list each access mode once", m))
		}
		seen[m] = true
	}
	if seen["ReadWriteOncePod"] && len(st.AccessModes) > 1 {
		errs = errs.Also(fieldErr("accessModes", "ReadWriteOncePod cannot be combined with other access modes; list it alone"))
	}
	if len(st.AccessModes) == 1 && st.AccessModes[0] == "ReadOnlyMany" {
		for _, src := range s.Sources {
			if src.ReadOnly != nil && !*src.ReadOnly {
				errs = errs.Also(fieldErr("accessModes", "[ReadOnlyMany] cannot be mounted read-write, but a source sets readOnly: false; use ReadWriteOnce or drop readOnly: false"))
				break
			}
		}
	}
	overrides := st.StorageClassName != nil || len(st.AccessModes) > 0
	if overrides {
		if s.CopyMethod == snapv1.CopyDirect {
			errs = errs.Also(fieldErr("", "copyMethod: Direct mounts the live source PVC, so there is no staged PVC to override; remove staging.storageClassName and staging.accessModes, or use copyMethod: Snapshot or Clone"))
		}
		for _, src := range s.Sources {
			if src.NFS != nil || src.Stream != nil {
				errs = errs.Also(fieldErr("", "an nfs or stream source is read in place and never staged, so staging.storageClassName and staging.accessModes have nothing to apply to; remove them"))
				break
			}
		}
	}
	return errs
}

func verification(v *snapv1.Verification, opts Options) *apis.FieldError {
	var errs *apis.FieldError
	if q := v.Quick; q != nil {
		if opts.Admission && (q.Cron != "" || q.Jitter != "" || q.Timezone != "") {
			errs = errs.Also(fieldErr("quick.cron", "the flat verification.quick.cron shape moved to verification.quick.schedule.cron (matching deep.schedule): nest the same fields under quick.schedule, e.g. quick: {schedule: {cron: \"0 4 * * *\", jitter: 30m}}"))
		}
		errs = errs.Also(cronSpec(q.Schedule, opts).ViaField("quick.schedule"))
		errs = errs.Also(minCount("quick.parallel", q.Parallel), minCount("quick.fileParallelism", q.FileParallelism), minCount("quick.fileQueueLength", q.FileQueueLength))
	}
	if d := v.Deep; d != nil {
		errs = errs.Also(cronSpec(&d.Schedule, opts).ViaField("deep.schedule"), minCount("deep.parallel", d.Parallel))
		if d.Capacity != nil && d.Capacity.Sign() <= 0 {
			errs = errs.Also(fieldErr("deep.capacity", "must be positive (got %s); remove it to restore into an emptyDir", d.Capacity.String()))
		}
	}
	if v.SuccessExpr != "" {
		if err := expr.Success.Check(v.SuccessExpr); err != nil {
			errs = errs.Also(fieldErr("successExpr", "successExpr %q %v", v.SuccessExpr, err))
		}
	}
	return errs
}

// MaxPreflightChecks bounds spec.preflight.checks (the CRD says so too):
// every check is compiled and evaluated for every run.
const MaxPreflightChecks = 32

func preflight(p *snapv1.Preflight) *apis.FieldError {
	var errs *apis.FieldError
	if p.Timeout != "0" {
		if _, err := duration("timeout", p.Timeout); err != nil {
			errs = errs.Also(err)
		}
	}
	if len(p.Checks) > MaxPreflightChecks {
		errs = errs.Also(fieldErr("checks", "%d preflight checks, at most %d are allowed; fold related conditions into one expr with &&", len(p.Checks), MaxPreflightChecks))
	}
	seen := map[string]bool{}
	for i, c := range p.Checks {
		name := strings.TrimSpace(c.Name)
		switch {
		case name == "":
			errs = errs.Also(missing("name", "name (a short label shown when the check holds a run)").ViaFieldIndex("checks", i))
		case seen[name]:
			errs = errs.Also(fieldErr("name", "duplicate preflight check name %q; names must be unique", name).ViaFieldIndex("checks", i))
		}
		seen[name] = true
		if err := expr.Preflight.Check(c.Expr); err != nil {
			errs = errs.Also(fieldErr("expr", "preflight expr %q %v", c.Expr, err).ViaFieldIndex("checks", i))
		}
	}
	return errs
}

var httpMethods = map[string]bool{"GET": true, "POST": true, "PUT": true, "PATCH": true, "DELETE": true, "HEAD": true, "OPTIONS": true}

func hook(h snapv1.Hook) *apis.FieldError {
	var errs *apis.FieldError
	n := 0
	if w := h.WorkloadExec; w != nil {
		n++
		if len(w.Command) == 0 {
			errs = errs.Also(missing("workloadExec.command", "workloadExec.command (the command to run in the workload)"))
		}
		if selectorEmpty(w.PodSelector) {
			errs = errs.Also(fieldErr("workloadExec.podSelector", "the podSelector is empty, which matches EVERY pod in the namespace; select the workload to run the hook in"))
		}
		errs = errs.Also(labelSelector(&w.PodSelector).ViaField("workloadExec.podSelector"), hookTimeout("workloadExec.timeout", w.Timeout))
	}
	if j := h.RunJob; j != nil {
		n++
		if len(j.JobSpec.Template.Spec.Containers) == 0 {
			errs = errs.Also(missing("runJob.jobSpec.template.spec.containers", "runJob.jobSpec.template.spec.containers (the Job needs at least one container)"))
		}
		errs = errs.Also(hookTimeout("runJob.timeout", j.Timeout))
	}
	if hr := h.HTTPRequest; hr != nil {
		n++
		errs = errs.Also(httpHook(hr).ViaField("httpRequest"))
	}
	if n != 1 {
		errs = errs.Also(&apis.FieldError{Message: "each hook is exactly one of workloadExec, runJob or httpRequest; split them into separate hook entries", Paths: []string{"workloadExec", "runJob", "httpRequest"}})
	}
	return errs
}

func hookTimeout(path, v string) *apis.FieldError {
	_, err := duration(path, v)
	return err
}

func httpHook(h *snapv1.HTTPRequestHook) *apis.FieldError {
	var errs *apis.FieldError
	u, perr := url.Parse(h.URL)
	if perr != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = errs.Also(fieldErr("url", "%q is not an http:// or https:// URL", h.URL))
	}
	if h.Method != "" && !httpMethods[strings.ToUpper(h.Method)] {
		errs = errs.Also(fieldErr("method", "%q is not an HTTP method (use GET, POST, PUT, PATCH, DELETE, HEAD or OPTIONS)", h.Method))
	}
	errs = errs.Also(hookTimeout("timeout", h.Timeout))
	if d, err := time.ParseDuration(h.Timeout); err == nil && d > egress.MaxTimeout {
		errs = errs.Also(fieldErr("timeout", "%s exceeds the %s ceiling of httpRequest hooks (the snapshot run waits on the call); answer quickly and do long work asynchronously, or use a runJob hook", h.Timeout, egress.MaxTimeout))
	}
	seen := map[string]int{}
	for i, hd := range h.Headers {
		path := fmt.Sprintf("headers[%d]", i)
		if !isToken(hd.Name) {
			errs = errs.Also(fieldErr(path+".name", "%q is not a valid HTTP header name: names are case-insensitive RFC 7230 tokens (letters, digits and !#$%%&'*+-.^_`|~)", hd.Name))
		}
		if len(hd.Name) > 65535 {
			errs = errs.Also(fieldErr(path+".name", "is longer than 65535 bytes"))
		}
		for _, b := range []byte(hd.Value) {
			if (b < 0x20 && b != '\t') || b == 0x7f {
				errs = errs.Also(fieldErr(path+".value", "control characters (including CR/LF) are not allowed in header values: put multi-line payloads in body, not a header"))
				break
			}
		}
		key := strings.ToLower(hd.Name)
		if first, dup := seen[key]; dup {
			errs = errs.Also(fieldErr(path+".name", "duplicate header %q (also headers[%d]): each header may be set once; combine the values", hd.Name, first))
		} else {
			seen[key] = i
		}
		if key == "authorization" && u != nil && u.User != nil {
			errs = errs.Also(fieldErr(path+".name", "an explicit Authorization header conflicts with credentials in the URL (user:pass@...): use one auth source, not both"))
		}
	}
	return errs
}

func isToken(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// extraArgs refuses kopia flags snapflow does not map to the library, and
// those that contradict the typed field setting the same option.
func extraArgs(s *snapv1.SnapshotPolicySpec) *apis.FieldError {
	if len(s.ExtraArgs) == 0 {
		return nil
	}
	x, err := kopiaflags.Parse(s.ExtraArgs)
	var fe *kopiaflags.Error
	if errors.As(err, &fe) {
		return fieldErr(fmt.Sprintf("spec.extraArgs[%d]", fe.Index), "%v", fe.Err)
	}
	var errs *apis.FieldError
	if lim := s.Upload; x.UploadLimitMB > 0 && lim != nil && lim.LimitMb != nil && int(*lim.LimitMb) != x.UploadLimitMB {
		errs = errs.Also(fieldErr("spec.extraArgs", "--upload-limit-mb=%d contradicts spec.upload.limitMb: %d; set the limit in one place", x.UploadLimitMB, *lim.LimitMb))
	}
	if e := s.ErrorHandling; x.FailFast != nil && e != nil && e.FailFast != nil && *e.FailFast != *x.FailFast {
		errs = errs.Also(fieldErr("spec.extraArgs", "--fail-fast=%t contradicts spec.errorHandling.failFast: %t; set it in one place", *x.FailFast, *e.FailFast))
	}
	return errs
}
