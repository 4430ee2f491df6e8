package validate

import (
	"fmt"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
)

var admission = Options{Admission: true}

// expect asserts that r holds a problem at path whose message contains want,
// or no problem at all when path is "".
func expect(t *testing.T, r Result, path, want string) {
	t.Helper()
	if path == "" {
		if !r.OK() {
			t.Fatalf("want no problems, got:\n%s", strings.Join(r.Problems(), "\n"))
		}
		return
	}
	for _, e := range r.Errs.WrappedErrors() {
		for _, p := range e.Paths {
			if p == path && strings.Contains(e.Message+" "+e.Details, want) {
				return
			}
		}
	}
	t.Fatalf("want a problem at %s containing %q, got:\n%s", path, want, strings.Join(r.Problems(), "\n"))
}

func basePolicy() *snapv1.SnapshotPolicy {
	return &snapv1.SnapshotPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "pg", Namespace: "billing"},
		Spec: snapv1.SnapshotPolicySpec{
			Repository: &snapv1.RepositoryRef{Name: "nas"},
			Sources:    []snapv1.Source{{PVC: &snapv1.LocalObjectRef{Name: "data"}}},
			Retention:  &snapv1.Retention{KeepDaily: ptr.To[int32](7)},
		},
	}
}

func TestSnapshotPolicyRules(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*snapv1.SnapshotPolicy)
		path   string
		want   string
		opts   Options
	}{
		{"valid", func(*snapv1.SnapshotPolicy) {}, "", "", admission},
		{"rule 1: neither repository", func(p *snapv1.SnapshotPolicy) { p.Spec.Repository = nil }, "spec.repository", "got neither", admission},
		{"compression: an unknown compressor", func(p *snapv1.SnapshotPolicy) {
			p.Spec.Compression = &snapv1.Compression{Compressor: "zstdd"}
		}, "spec.compression.compressor", `kopia has no compressor "zstdd"`, admission},
		{"compression: a glob kopia cannot match", func(p *snapv1.SnapshotPolicy) {
			p.Spec.Compression = &snapv1.Compression{Compressor: "zstd", NeverCompress: []string{"*.zip", "media/*"}}
		}, "spec.compression.neverCompress", `entry 1 ("media/*")`, admission},
		{"compression: a stored glob kopia cannot match does not fail a run", func(p *snapv1.SnapshotPolicy) {
			p.Spec.Compression = &snapv1.Compression{Compressor: "zstd", NeverCompress: []string{"media/*"}}
		}, "", "", Options{}},
		{"compression: extensions as globs or bare", func(p *snapv1.SnapshotPolicy) {
			p.Spec.Compression = &snapv1.Compression{Compressor: "zstd", NeverCompress: []string{"*.zip", ".gz"}}
		}, "", "", admission},
		{"rule 1: both repository forms", func(p *snapv1.SnapshotPolicy) {
			p.Spec.Repositories = []snapv1.RepositoryRef{{Name: "b"}}
		}, "spec.repositories", "got both", admission},
		{"rule 2: duplicate repositories", func(p *snapv1.SnapshotPolicy) {
			p.Spec.Repository = nil
			p.Spec.Repositories = []snapv1.RepositoryRef{{Name: "a"}, {Name: "a", Kind: snapv1.KindRepository, Namespace: "billing"}}
		}, "spec.repositories[1]", "Remove the duplicate entry", admission},
		{"rule 2: same name different kinds is fine", func(p *snapv1.SnapshotPolicy) {
			p.Spec.Repository = nil
			p.Spec.Repositories = []snapv1.RepositoryRef{{Name: "a"}, {Name: "a", Kind: snapv1.KindClusterRepository}}
		}, "", "", admission},
		{"rule 3: hooks with repositories", func(p *snapv1.SnapshotPolicy) {
			p.Spec.Repository = nil
			p.Spec.Repositories = []snapv1.RepositoryRef{{Name: "a"}, {Name: "b"}}
			p.Spec.Hooks = &snapv1.Hooks{BeforeSnapshot: []snapv1.Hook{{HTTPRequest: &snapv1.HTTPRequestHook{URL: "http://x"}}}}
		}, "spec.hooks", "SnapshotReplication", admission},
		{"rule 4: cluster ref with namespace", func(p *snapv1.SnapshotPolicy) {
			p.Spec.Repository = &snapv1.RepositoryRef{Kind: snapv1.KindClusterRepository, Name: "shared", Namespace: "x"}
		}, "spec.repository.namespace", "referenced by name only", admission},
		{"rule 6: no sources", func(p *snapv1.SnapshotPolicy) { p.Spec.Sources = nil }, "spec.sources", "at least one source", admission},
		{"rule 7: two forms", func(p *snapv1.SnapshotPolicy) {
			p.Spec.Sources[0].NFS = &snapv1.NFSExport{Server: "nas", Path: "/x"}
		}, "spec.sources[0].nfs", "mutually exclusive", admission},
		{"rule 7: no form", func(p *snapv1.SnapshotPolicy) { p.Spec.Sources[0].PVC = nil }, "spec.sources[0]", "exactly one of them", admission},
		{"rule 8: namespaceSelector", func(p *snapv1.SnapshotPolicy) {
			p.Spec.Sources[0] = snapv1.Source{PVCSelector: &snapv1.PVCSelector{NamespaceSelector: &snapv1.NamespaceSelector{MatchNames: []string{"other"}}}}
		}, "spec.sources[0].pvcSelector.namespaceSelector.matchNames", "one SnapshotPolicy per namespace", admission},
		{"rule 9: In without values", func(p *snapv1.SnapshotPolicy) {
			p.Spec.Sources[0] = snapv1.Source{PVCSelector: &snapv1.PVCSelector{LabelSelector: &metav1.LabelSelector{
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn}}}}}
		}, "spec.sources[0].pvcSelector.labelSelector.matchExpressions[0].values", "at least one value", admission},
		{"rule 9: unknown operator", func(p *snapv1.SnapshotPolicy) {
			p.Spec.Sources[0] = snapv1.Source{PVCSelector: &snapv1.PVCSelector{LabelSelector: &metav1.LabelSelector{
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Equals", Values: []string{"x"}}}}}}
		}, "spec.sources[0].pvcSelector.labelSelector.matchExpressions[0].operator", "widening the selector", admission},
		{"rule 10: nfs relative path", func(p *snapv1.SnapshotPolicy) {
			p.Spec.Sources[0] = snapv1.Source{NFS: &snapv1.NFSExport{Server: "nas", Path: "export"}}
		}, "spec.sources[0].nfs.path", "absolute export path", admission},
		{"rule 10: nfs without server", func(p *snapv1.SnapshotPolicy) {
			p.Spec.Sources[0] = snapv1.Source{NFS: &snapv1.NFSExport{Path: "/export"}}
		}, "spec.sources[0].nfs.server", "nfs.server", admission},
		{"rule 10: nfs read-write", func(p *snapv1.SnapshotPolicy) {
			p.Spec.Sources[0] = snapv1.Source{NFS: &snapv1.NFSExport{Server: "nas", Path: "/export"}, ReadOnly: ptr.To(false)}
		}, "spec.sources[0].readOnly", "does not apply fsGroup", admission},
		{"rule 10: nfs with a pvcConsumer identity", func(p *snapv1.SnapshotPolicy) {
			p.Spec.Sources[0] = snapv1.Source{NFS: &snapv1.NFSExport{Server: "nas", Path: "/export"}}
			p.Spec.Mover = &snapv1.MoverSpec{InheritSecurityContextFrom: &snapv1.InheritSecurityContextFrom{PvcConsumer: &snapv1.Empty{}}}
		}, "spec.sources[0].nfs", "workloadSelector", admission},
		{"rule 10: nfs on its own", func(p *snapv1.SnapshotPolicy) {
			p.Spec.Sources[0] = snapv1.Source{NFS: &snapv1.NFSExport{Server: "nas", Path: "/export"}}
		}, "", "", admission},
		{"rule 11: stream file name", func(p *snapv1.SnapshotPolicy) {
			p.Spec.Sources[0] = streamSource("a/b.sql")
		}, "spec.sources[0].stream.fileName", "ONE file name", admission},
		{"rule 11: stream not alone", func(p *snapv1.SnapshotPolicy) {
			p.Spec.Sources = append(p.Spec.Sources, streamSource("dump.sql"))
		}, "spec.sources[1].stream", "must be the only source", admission},
		{"rule 11: stream empty selector", func(p *snapv1.SnapshotPolicy) {
			s := streamSource("dump.sql")
			s.Stream.WorkloadExec.PodSelector = metav1.LabelSelector{}
			p.Spec.Sources[0] = s
		}, "spec.sources[0].stream.workloadExec.podSelector", "matches EVERY pod", admission},
		{"rule 11: stream blank command", func(p *snapv1.SnapshotPolicy) {
			s := streamSource("dump.sql")
			s.Stream.WorkloadExec.Command = []string{" "}
			p.Spec.Sources[0] = s
		}, "spec.sources[0].stream.workloadExec.command", "stdout is snapshotted", admission},
		{"rule 11: stream with snapshot class", func(p *snapv1.SnapshotPolicy) {
			p.Spec.Sources[0] = streamSource("dump.sql")
			p.Spec.VolumeSnapshotClassName = ptr.To("csi")
		}, "spec.sources[0].stream", "never CSI-snapshotted", admission},
		{"rule 11: stream with an inherited identity", func(p *snapv1.SnapshotPolicy) {
			p.Spec.Sources[0] = streamSource("dump.sql")
			p.Spec.Mover = &snapv1.MoverSpec{InheritSecurityContextFrom: &snapv1.InheritSecurityContextFrom{WorkloadSelector: &snapv1.WorkloadSelector{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "pg"}}}}}
		}, "spec.sources[0].stream", "Remove inheritSecurityContextFrom", admission},
		{"rule 11: stream with sourcePathStrategy", func(p *snapv1.SnapshotPolicy) {
			s := streamSource("dump.sql")
			s.SourcePathStrategy = snapv1.SourcePathPvcNamespacedName
			p.Spec.Sources[0] = s
		}, "spec.sources[0].sourcePathStrategy", "no meaning on a stream", admission},
		{"rule 12: direct read-write without ack", func(p *snapv1.SnapshotPolicy) {
			p.Spec.CopyMethod = snapv1.CopyDirect
			p.Spec.Sources[0].ReadOnly = ptr.To(false)
		}, "spec.sources[0].readOnly", "acknowledgeLiveMutation: true", admission},
		{"rule 12: direct read-write with ack", func(p *snapv1.SnapshotPolicy) {
			p.Spec.CopyMethod = snapv1.CopyDirect
			p.Spec.Sources[0].ReadOnly = ptr.To(false)
			p.Spec.Sources[0].AcknowledgeLiveMutation = ptr.To(true)
		}, "", "", admission},
		{"rule 12: snapshot read-write needs no ack", func(p *snapv1.SnapshotPolicy) {
			p.Spec.Sources[0].ReadOnly = ptr.To(false)
		}, "", "", admission},
		{"rule 13: clone with selector and group", func(p *snapv1.SnapshotPolicy) {
			p.Spec.CopyMethod = snapv1.CopyClone
			p.Spec.Sources[0] = snapv1.Source{PVCSelector: &snapv1.PVCSelector{}}
		}, "spec.sources[0].pvcSelector", "groupBy: None", admission},
		{"rule 13: clone with selector and no group", func(p *snapv1.SnapshotPolicy) {
			p.Spec.CopyMethod = snapv1.CopyClone
			p.Spec.GroupBy = snapv1.GroupByNone
			p.Spec.Sources[0] = snapv1.Source{PVCSelector: &snapv1.PVCSelector{}}
		}, "", "", admission},
		{"rule 14: nfs with snapshot class", func(p *snapv1.SnapshotPolicy) {
			p.Spec.Sources[0] = snapv1.Source{NFS: &snapv1.NFSExport{Server: "nas", Path: "/x"}}
			p.Spec.VolumeSnapshotClassName = ptr.To("csi")
		}, "spec.sources[0].nfs", "cannot be CSI-snapshotted", admission},
		{"rule 15: staging timeout", func(p *snapv1.SnapshotPolicy) {
			p.Spec.Staging = &snapv1.Staging{Timeout: "ten minutes"}
		}, "spec.staging.timeout", "Go-style duration", admission},
		{"rule 15: staging timeout 0 is forever", func(p *snapv1.SnapshotPolicy) {
			p.Spec.Staging = &snapv1.Staging{Timeout: "0"}
		}, "", "", admission},
		{"rule 15: unknown access mode", func(p *snapv1.SnapshotPolicy) {
			p.Spec.Staging = &snapv1.Staging{AccessModes: []string{"RWO"}}
		}, "spec.staging.accessModes[0]", "not an access mode", admission},
		{"rule 15: duplicate access mode", func(p *snapv1.SnapshotPolicy) {
			p.Spec.Staging = &snapv1.Staging{AccessModes: []string{"ReadWriteOnce", "ReadWriteOnce"}}
		}, "spec.staging.accessModes[1]", "listed twice", admission},
		{"rule 15: RWOP not alone", func(p *snapv1.SnapshotPolicy) {
			p.Spec.Staging = &snapv1.Staging{AccessModes: []string{"ReadWriteOncePod", "ReadWriteOnce"}}
		}, "spec.staging.accessModes", "list it alone", admission},
		{"rule 15: ROX with read-write source", func(p *snapv1.SnapshotPolicy) {
			p.Spec.Staging = &snapv1.Staging{AccessModes: []string{"ReadOnlyMany"}}
			p.Spec.Sources[0].ReadOnly = ptr.To(false)
		}, "spec.staging.accessModes", "cannot be mounted read-write", admission},
		{"rule 15: staging override with Direct", func(p *snapv1.SnapshotPolicy) {
			p.Spec.CopyMethod = snapv1.CopyDirect
			p.Spec.Staging = &snapv1.Staging{StorageClassName: ptr.To("fast")}
		}, "spec.staging", "no staged PVC to override", admission},
		{"rule 16: username with @", func(p *snapv1.SnapshotPolicy) {
			p.Spec.Identity = &snapv1.PolicyIdentity{Username: "a@b"}
		}, "spec.identity.username", "must not contain '@'", admission},
		{"rule 16: hostname with space", func(p *snapv1.SnapshotPolicy) {
			p.Spec.Identity = &snapv1.PolicyIdentity{Hostname: "my host"}
		}, "spec.identity.hostname", "whitespace", admission},
		{"rule 17: empty sourcePathOverride", func(p *snapv1.SnapshotPolicy) {
			p.Spec.Sources[0].SourcePathOverride = ptr.To("")
		}, "spec.sources[0].sourcePathOverride", "must not be empty", admission},
		{"rule 17: path with spaces and colon is fine", func(p *snapv1.SnapshotPolicy) {
			p.Spec.Sources[0].SourcePathOverride = ptr.To("/my data: 2026")
		}, "", "", admission},
		{"rule 18: retention keeps nothing", func(p *snapv1.SnapshotPolicy) {
			p.Spec.Retention = &snapv1.Retention{KeepDaily: ptr.To[int32](0)}
		}, "spec.retention", "keeps no snapshots", admission},
		{"rule 18: retention absent never prunes", func(p *snapv1.SnapshotPolicy) { p.Spec.Retention = nil }, "", "", admission},
		{"rule 19: flat quick shape on admission", func(p *snapv1.SnapshotPolicy) {
			p.Spec.Verification = &snapv1.Verification{Quick: &snapv1.QuickVerification{Cron: "0 4 * * *"}}
		}, "spec.verification.quick.cron", "quick.schedule.cron", admission},
		{"rule 19: flat quick shape stored is tolerated", func(p *snapv1.SnapshotPolicy) {
			p.Spec.Verification = &snapv1.Verification{Quick: &snapv1.QuickVerification{Cron: "0 4 * * *"}}
		}, "", "", Options{}},
		{"rule 19: bad cron", func(p *snapv1.SnapshotPolicy) {
			p.Spec.Verification = &snapv1.Verification{Quick: &snapv1.QuickVerification{Schedule: &snapv1.CronSpec{Cron: "0 4 * *"}}}
		}, "spec.verification.quick.schedule.cron", "want 5 fields", admission},
		{"rule 19: bad timezone", func(p *snapv1.SnapshotPolicy) {
			p.Spec.Verification = &snapv1.Verification{Deep: &snapv1.DeepVerification{Schedule: snapv1.CronSpec{Cron: "H 5 * * 0", Timezone: "Mars/Olympus"}}}
		}, "spec.verification.deep.schedule.timezone", "IANA", admission},
		{"rule 19: zero parallel", func(p *snapv1.SnapshotPolicy) {
			p.Spec.Verification = &snapv1.Verification{Quick: &snapv1.QuickVerification{Parallel: ptr.To[int32](0)}}
		}, "spec.verification.quick.parallel", "0 would do no work", admission},
		{"rule 20: successExpr unknown variable", func(p *snapv1.SnapshotPolicy) {
			p.Spec.Verification = &snapv1.Verification{SuccessExpr: "result.ok"}
		}, "spec.verification.successExpr", "available variables: stats, snapshot, restored, tier", admission},
		{"rule 20: successExpr not bool", func(p *snapv1.SnapshotPolicy) {
			p.Spec.Verification = &snapv1.Verification{SuccessExpr: "stats.files + 1"}
		}, "spec.verification.successExpr", "must return a bool", admission},
		{"rule 21: jitter over 24h", func(p *snapv1.SnapshotPolicy) {
			p.Spec.Verification = &snapv1.Verification{Deep: &snapv1.DeepVerification{Schedule: snapv1.CronSpec{Cron: "0 5 * * 0", Jitter: "25h"}}}
		}, "spec.verification.deep.schedule.jitter", "exceeds the 24h maximum", admission},
		{"rule 21: jitter of exactly 24h", func(p *snapv1.SnapshotPolicy) {
			p.Spec.Verification = &snapv1.Verification{Deep: &snapv1.DeepVerification{Schedule: snapv1.CronSpec{Cron: "0 5 * * 0", Jitter: "24h"}}}
		}, "", "", admission},
		{"rule 21: stored over-long jitter tolerated", func(p *snapv1.SnapshotPolicy) {
			p.Spec.Verification = &snapv1.Verification{Deep: &snapv1.DeepVerification{Schedule: snapv1.CronSpec{Cron: "0 5 * * 0", Jitter: "48h"}}}
		}, "", "", Options{}},
		{"rule 22: duplicate preflight names", func(p *snapv1.SnapshotPolicy) {
			p.Spec.Preflight = &snapv1.Preflight{Checks: []snapv1.PreflightCheck{{Name: "a", Expr: "repository.ready"}, {Name: "a", Expr: "true"}}}
		}, "spec.preflight.checks[1].name", "must be unique", admission},
		{"rule 22: preflight expr", func(p *snapv1.SnapshotPolicy) {
			p.Spec.Preflight = &snapv1.Preflight{Checks: []snapv1.PreflightCheck{{Name: "a", Expr: "repository.snapshotCount"}}}
		}, "spec.preflight.checks[0].expr", "must return a bool", admission},
		{"preflight checks are bounded", func(p *snapv1.SnapshotPolicy) {
			p.Spec.Preflight = &snapv1.Preflight{}
			for i := 0; i <= MaxPreflightChecks; i++ {
				p.Spec.Preflight.Checks = append(p.Spec.Preflight.Checks, snapv1.PreflightCheck{Name: fmt.Sprint("c", i), Expr: "true"})
			}
		}, "spec.preflight.checks", "at most 32", admission},
		{"rule 23: hook timeout", func(p *snapv1.SnapshotPolicy) {
			p.Spec.Hooks = &snapv1.Hooks{BeforeSnapshot: []snapv1.Hook{{WorkloadExec: &snapv1.WorkloadExecHook{
				PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "pg"}}, Command: []string{"sync"}, Timeout: "5"}}}}
		}, "spec.hooks.beforeSnapshot[0].workloadExec.timeout", "Go-style duration", admission},
		{"rule 23: hook url scheme", func(p *snapv1.SnapshotPolicy) {
			p.Spec.Hooks = &snapv1.Hooks{AfterSnapshot: []snapv1.Hook{{HTTPRequest: &snapv1.HTTPRequestHook{URL: "ftp://x/y"}}}}
		}, "spec.hooks.afterSnapshot[0].httpRequest.url", "http:// or https://", admission},
		{"httpRequest timeout ceiling", func(p *snapv1.SnapshotPolicy) {
			p.Spec.Hooks = &snapv1.Hooks{AfterSnapshot: []snapv1.Hook{{HTTPRequest: &snapv1.HTTPRequestHook{URL: "http://x", Timeout: "2h"}}}}
		}, "spec.hooks.afterSnapshot[0].httpRequest.timeout", "ceiling of httpRequest hooks", admission},
		{"rule 23: hook method", func(p *snapv1.SnapshotPolicy) {
			p.Spec.Hooks = &snapv1.Hooks{AfterSnapshot: []snapv1.Hook{{HTTPRequest: &snapv1.HTTPRequestHook{URL: "http://x", Method: "FETCH"}}}}
		}, "spec.hooks.afterSnapshot[0].httpRequest.method", "not an HTTP method", admission},
		{"rule 23: runJob without containers", func(p *snapv1.SnapshotPolicy) {
			p.Spec.Hooks = &snapv1.Hooks{AfterSnapshot: []snapv1.Hook{{RunJob: &snapv1.RunJobHook{JobSpec: batchv1.JobSpec{}}}}}
		}, "spec.hooks.afterSnapshot[0].runJob.jobSpec.template.spec.containers", "at least one container", admission},
		{"rule 24: header name", func(p *snapv1.SnapshotPolicy) {
			p.Spec.Hooks = &snapv1.Hooks{AfterSnapshot: []snapv1.Hook{{HTTPRequest: &snapv1.HTTPRequestHook{URL: "http://x", Headers: []snapv1.HTTPHeader{{Name: "Bad Header", Value: "v"}}}}}}
		}, "spec.hooks.afterSnapshot[0].httpRequest.headers[0].name", "RFC 7230", admission},
		{"rule 24: header value with newline", func(p *snapv1.SnapshotPolicy) {
			p.Spec.Hooks = &snapv1.Hooks{AfterSnapshot: []snapv1.Hook{{HTTPRequest: &snapv1.HTTPRequestHook{URL: "http://x", Headers: []snapv1.HTTPHeader{{Name: "X-A", Value: "a\r\nb"}}}}}}
		}, "spec.hooks.afterSnapshot[0].httpRequest.headers[0].value", "CR/LF", admission},
		{"rule 24: duplicate header", func(p *snapv1.SnapshotPolicy) {
			p.Spec.Hooks = &snapv1.Hooks{AfterSnapshot: []snapv1.Hook{{HTTPRequest: &snapv1.HTTPRequestHook{URL: "http://x", Headers: []snapv1.HTTPHeader{{Name: "X-A", Value: "1"}, {Name: "x-a", Value: "2"}}}}}}
		}, "spec.hooks.afterSnapshot[0].httpRequest.headers[1].name", "duplicate header", admission},
		{"rule 24: authorization and url credentials", func(p *snapv1.SnapshotPolicy) {
			p.Spec.Hooks = &snapv1.Hooks{AfterSnapshot: []snapv1.Hook{{HTTPRequest: &snapv1.HTTPRequestHook{URL: "https://u:p@x", Headers: []snapv1.HTTPHeader{{Name: "Authorization", Value: "Bearer t"}}}}}}
		}, "spec.hooks.afterSnapshot[0].httpRequest.headers[0].name", "one auth source", admission},
		{"rule 25: limitMb", func(p *snapv1.SnapshotPolicy) {
			p.Spec.Upload = &snapv1.Upload{LimitMb: ptr.To[int32](0)}
		}, "spec.upload.limitMb", "at least 1 MB", admission},
		{"extraArgs: a flag snapflow does not map", func(p *snapv1.SnapshotPolicy) {
			p.Spec.ExtraArgs = []string{"--parallel=2", "--compression=zstd"}
		}, "spec.extraArgs[1]", "supported: --parallel", admission},
		{"extraArgs: a flag snapflow decides", func(p *snapv1.SnapshotPolicy) {
			p.Spec.ExtraArgs = []string{"--tags", "a:b"}
		}, "spec.extraArgs[0]", "decided by snapflow", admission},
		{"extraArgs: contradicts upload.limitMb", func(p *snapv1.SnapshotPolicy) {
			p.Spec.ExtraArgs = []string{"--upload-limit-mb=5"}
			p.Spec.Upload = &snapv1.Upload{LimitMb: ptr.To[int32](6)}
		}, "spec.extraArgs", "contradicts spec.upload.limitMb", admission},
		{"extraArgs: contradicts errorHandling.failFast", func(p *snapv1.SnapshotPolicy) {
			p.Spec.ExtraArgs = []string{"--fail-fast"}
			p.Spec.ErrorHandling = &snapv1.ErrorHandling{FailFast: ptr.To(false)}
		}, "spec.extraArgs", "contradicts spec.errorHandling.failFast", admission},
		{"rule 26: snapshot inheritance on a policy", func(p *snapv1.SnapshotPolicy) {
			p.Spec.Mover = &snapv1.MoverSpec{InheritSecurityContextFrom: &snapv1.InheritSecurityContextFrom{Snapshot: &snapv1.Empty{}}}
		}, "spec.mover.inheritSecurityContextFrom.snapshot", "restore-only", admission},
		{"rule 26: requests over limits", func(p *snapv1.SnapshotPolicy) {
			p.Spec.Mover = &snapv1.MoverSpec{Resources: &corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}}
		}, "spec.mover.resources.requests.memory", "exceeds limit", admission},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := basePolicy()
			tc.mutate(p)
			expect(t, SnapshotPolicy(p, tc.opts), tc.path, tc.want)
		})
	}
}

func streamSource(file string) snapv1.Source {
	return snapv1.Source{Stream: &snapv1.StreamSource{FileName: file, WorkloadExec: snapv1.StreamExec{
		PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "pg"}}, Command: []string{"pg_dumpall"}}}}
}

// Every problem of one object is reported together.
func TestAllProblemsTogether(t *testing.T) {
	p := basePolicy()
	p.Spec.Repository = nil
	p.Spec.Retention = &snapv1.Retention{}
	p.Spec.Identity = &snapv1.PolicyIdentity{Username: "a:b"}
	r := SnapshotPolicy(p, admission)
	if n := len(r.Problems()); n != 3 {
		t.Fatalf("want 3 problems, got %d:\n%s", n, strings.Join(r.Problems(), "\n"))
	}
}

func baseSnapshot() *snapv1.Snapshot {
	return &snapv1.Snapshot{
		ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "billing"},
		Spec:       snapv1.SnapshotSpec{PolicyRef: &snapv1.PolicyRef{Name: "pg"}},
	}
}

func TestSnapshotRules(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*snapv1.Snapshot)
		path   string
		want   string
	}{
		{"valid", func(*snapv1.Snapshot) {}, "", ""},
		{"no policyRef on a manual snapshot", func(s *snapv1.Snapshot) { s.Spec.PolicyRef = nil }, "spec.policyRef", "runs a SnapshotPolicy"},
		{"rule 31: discovered with Delete", func(s *snapv1.Snapshot) {
			s.Labels = map[string]string{wellknown.LabelOrigin: "discovered"}
			s.Spec.DeletionPolicy = snapv1.DeletionDelete
		}, "spec.deletionPolicy", "must use deletionPolicy: Retain"},
		{"rule 31: discovered with Retain", func(s *snapv1.Snapshot) {
			s.Labels = map[string]string{wellknown.LabelOrigin: "discovered"}
			s.Spec.PolicyRef = nil
			s.Spec.DeletionPolicy = snapv1.DeletionRetain
		}, "", ""},
		{"rule 32: adopted with onScheduleDelete", func(s *snapv1.Snapshot) {
			s.Status.Origin = snapv1.OriginAdopted
			s.Spec.OnScheduleDelete = snapv1.CascadeDelete
		}, "spec.onScheduleDelete", "no owning SnapshotSchedule"},
		{"rule 33: zero startup deadline", func(s *snapv1.Snapshot) {
			s.Spec.FailurePolicy = &snapv1.FailurePolicy{PodStartupDeadlineSeconds: ptr.To[int64](0)}
		}, "spec.failurePolicy.podStartupDeadlineSeconds", "at least 1 second"},
		{"rule 33: negative backoff", func(s *snapv1.Snapshot) {
			s.Spec.FailurePolicy = &snapv1.FailurePolicy{BackoffLimit: ptr.To[int32](-1)}
		}, "spec.failurePolicy.backoffLimit", "at least 0"},
		{"rule 34: too many tags", func(s *snapv1.Snapshot) {
			s.Spec.Tags = map[string]string{}
			for _, k := range "abcdefghijk" {
				s.Spec.Tags[string(k)] = "v"
			}
		}, "spec.tags", "at most 10"},
		{"rule 34: tag with colon", func(s *snapv1.Snapshot) { s.Spec.Tags = map[string]string{"a:b": "v"} }, "spec.tags[a:b]", "contains a colon"},
		{"rule 34: reserved tag", func(s *snapv1.Snapshot) { s.Spec.Tags = map[string]string{"kopiur-x": "v"} }, "spec.tags[kopiur-x]", "reserved"},
		{"rule 34: long value", func(s *snapv1.Snapshot) { s.Spec.Tags = map[string]string{"k": strings.Repeat("v", 257)} }, "spec.tags[k]", "at most 256"},
		{"rule 37: description", func(s *snapv1.Snapshot) { s.Spec.Description = strings.Repeat("d", 1025) }, "spec.description", "at most 1024"},
		{"repository ref shape", func(s *snapv1.Snapshot) {
			s.Spec.Repository = &snapv1.RepositoryRef{Kind: snapv1.KindClusterRepository, Name: "c", Namespace: "x"}
		}, "spec.repository.namespace", "by name only"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := baseSnapshot()
			tc.mutate(s)
			expect(t, Snapshot(s, admission), tc.path, tc.want)
		})
	}
}

// An unparseable origin marker is admitted with a warning and the origin rules skipped.
func TestUnknownOrigin(t *testing.T) {
	s := baseSnapshot()
	s.Labels = map[string]string{wellknown.LabelOrigin: "imported"}
	s.Spec.DeletionPolicy = snapv1.DeletionDelete
	s.Spec.OnScheduleDelete = snapv1.CascadeDelete
	r := Snapshot(s, admission)
	expect(t, r, "", "")
	if len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "held inert") {
		t.Fatalf("warnings = %v", r.Warnings)
	}
}

func TestSnapshotScheduleRules(t *testing.T) {
	base := func() *snapv1.SnapshotSchedule {
		return &snapv1.SnapshotSchedule{ObjectMeta: metav1.ObjectMeta{Name: "n", Namespace: "billing"},
			Spec: snapv1.SnapshotScheduleSpec{PolicyRef: &snapv1.LocalObjectRef{Name: "pg"}, Schedule: snapv1.Schedule{Cron: "H 2 * * *"}}}
	}
	tests := []struct {
		name   string
		mutate func(*snapv1.SnapshotSchedule)
		path   string
		want   string
		opts   Options
	}{
		{"valid", func(*snapv1.SnapshotSchedule) {}, "", "", admission},
		{"rule 38: both", func(s *snapv1.SnapshotSchedule) { s.Spec.PolicySelector = &metav1.LabelSelector{} }, "spec.policySelector", "mutually exclusive", admission},
		{"rule 38: neither", func(s *snapv1.SnapshotSchedule) { s.Spec.PolicyRef = nil }, "spec.policyRef", "exactly one of spec.policyRef or spec.policySelector", admission},
		{"rule 39: cron", func(s *snapv1.SnapshotSchedule) { s.Spec.Schedule.Cron = "0 2 * * * *" }, "spec.schedule.cron", "want 5 fields", admission},
		{"rule 39: timezone", func(s *snapv1.SnapshotSchedule) { s.Spec.Schedule.Timezone = "CEST" }, "spec.schedule.timezone", "IANA", admission},
		{"rule 39: jitter", func(s *snapv1.SnapshotSchedule) { s.Spec.Schedule.Jitter = "30 minutes" }, "spec.schedule.jitter", "Go-style duration", admission},
		{"rule 40: jitter bound", func(s *snapv1.SnapshotSchedule) { s.Spec.Schedule.Jitter = "36h" }, "spec.schedule.jitter", "24h maximum", admission},
		{"rule 40: negative deadline", func(s *snapv1.SnapshotSchedule) { s.Spec.Schedule.StartingDeadlineSeconds = ptr.To[int64](-5) }, "spec.schedule.startingDeadlineSeconds", "never runs", admission},
		{"rule 40: stored negative deadline tolerated", func(s *snapv1.SnapshotSchedule) { s.Spec.Schedule.StartingDeadlineSeconds = ptr.To[int64](-5) }, "", "", Options{}},
		{"selector operator", func(s *snapv1.SnapshotSchedule) {
			s.Spec.PolicyRef = nil
			s.Spec.PolicySelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpNotIn}}}
		}, "spec.policySelector.matchExpressions[0].values", "at least one value", admission},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := base()
			tc.mutate(s)
			expect(t, SnapshotSchedule(s, tc.opts), tc.path, tc.want)
		})
	}
	s := base()
	s.Spec.Schedule.Cron = "*/5 * * * *"
	r := SnapshotSchedule(s, admission)
	if !r.OK() || len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "~12×/hour") {
		t.Fatalf("rule 41: sub-hourly cron should warn, got %v %v", r.Problems(), r.Warnings)
	}
}

func TestRestoreRules(t *testing.T) {
	base := func() *snapv1.Restore {
		return &snapv1.Restore{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "billing"},
			Spec: snapv1.RestoreSpec{
				Source: snapv1.RestoreSource{SnapshotRef: &snapv1.NamespacedObjectRef{Name: "s"}},
				Target: snapv1.RestoreTarget{PVCRef: &snapv1.LocalObjectRef{Name: "data"}},
			}}
	}
	q := resource.MustParse("10Gi")
	tests := []struct {
		name   string
		mutate func(*snapv1.Restore)
		path   string
		want   string
	}{
		{"valid", func(*snapv1.Restore) {}, "", ""},
		{"rule 43: identity without repository", func(r *snapv1.Restore) {
			r.Spec.Source = snapv1.RestoreSource{Identity: &snapv1.IdentitySource{Username: "u", Hostname: "h"}}
		}, "spec.repository", "requires spec.repository"},
		{"rule 44: asOf", func(r *snapv1.Restore) {
			r.Spec.Source = snapv1.RestoreSource{FromPolicy: &snapv1.FromPolicy{Name: "pg", AsOf: "yesterday"}}
		}, "spec.source.fromPolicy.asOf", "RFC3339"},
		{"rule 45: snapshotID with asOf", func(r *snapv1.Restore) {
			r.Spec.Repository = &snapv1.RepositoryRef{Name: "nas"}
			r.Spec.Source = snapv1.RestoreSource{Identity: &snapv1.IdentitySource{Username: "u", Hostname: "h", SnapshotID: "k1", AsOf: "2026-01-01T00:00:00Z"}}
		}, "spec.source.identity.snapshotID", "mutually exclusive"},
		{"rule 46: waitTimeout beyond deadline", func(r *snapv1.Restore) {
			r.Spec.Policy = &snapv1.RestorePolicy{WaitTimeout: "2h"}
			r.Spec.FailurePolicy = &snapv1.FailurePolicy{ActiveDeadlineSeconds: ptr.To[int64](3600)}
		}, "spec.policy.waitTimeout", "shorter than failurePolicy.activeDeadlineSeconds"},
		{"rule 46: waitTimeout parse", func(r *snapv1.Restore) { r.Spec.Policy = &snapv1.RestorePolicy{WaitTimeout: "soon"} }, "spec.policy.waitTimeout", "Go-style duration"},
		{"rule 47: pvc without capacity", func(r *snapv1.Restore) {
			r.Spec.Target = snapv1.RestoreTarget{PVC: &snapv1.NewPVCTarget{Name: "new"}}
		}, "spec.target.pvc.capacity", "target.pvc.capacity"},
		{"rule 47: pvc with capacity", func(r *snapv1.Restore) {
			r.Spec.Target = snapv1.RestoreTarget{PVC: &snapv1.NewPVCTarget{Name: "new", Capacity: &q}}
		}, "", ""},
		{"rule 48: populator with inheritance", func(r *snapv1.Restore) {
			r.Spec.Target = snapv1.RestoreTarget{Populator: &snapv1.Empty{}}
			r.Spec.Mover = &snapv1.MoverSpec{InheritSecurityContextFrom: &snapv1.InheritSecurityContextFrom{Snapshot: &snapv1.Empty{}}}
		}, "spec.mover.inheritSecurityContextFrom", "no workload pod exists"},
		{"rule 48: pvcConsumer on a restore", func(r *snapv1.Restore) {
			r.Spec.Mover = &snapv1.MoverSpec{InheritSecurityContextFrom: &snapv1.InheritSecurityContextFrom{PvcConsumer: &snapv1.Empty{}}}
		}, "spec.mover.inheritSecurityContextFrom.pvcConsumer", "backup-only"},
		{"rule 48: parallel 0", func(r *snapv1.Restore) { r.Spec.Options = &snapv1.RestoreOptions{Parallel: ptr.To[int32](0)} }, "spec.options.parallel", "at least 1"},
		{"rule 48: failure policy", func(r *snapv1.Restore) {
			r.Spec.FailurePolicy = &snapv1.FailurePolicy{ActiveDeadlineSeconds: ptr.To[int64](0)}
		}, "spec.failurePolicy.activeDeadlineSeconds", "at least 1 second"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := base()
			tc.mutate(r)
			expect(t, Restore(r, admission), tc.path, tc.want)
		})
	}
}
