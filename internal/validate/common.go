// Package validate is the single source of snapflow's spec rules. The
// admission webhook calls it on every CREATE and UPDATE; every function runs
// it again before acting, because a webhook can be bypassed. Each problem
// names its field, says why it is wrong and how to fix it, and all problems
// of one object are reported together.
//
// Rules that only tighten a field that older objects may already hold run
// only on admission (Options.Admission), so stored objects are never bricked.
package validate

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"knative.dev/pkg/apis"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/cron"
)

// MaxJitter is the largest jitter window; jitter spreads a slot, it is not an offset.
const MaxJitter = 24 * time.Hour

// Options says in which situation an object is validated.
type Options struct {
	// Admission applies the rules that only tighten existing fields.
	Admission bool
}

// Result is the outcome of validating one object.
type Result struct {
	Errs     *apis.FieldError
	Warnings []string
}

// Also adds problems.
func (r *Result) Also(errs ...*apis.FieldError) { r.Errs = r.Errs.Also(errs...) }

// Warn adds a non-blocking finding.
func (r *Result) Warn(format string, args ...any) {
	r.Warnings = append(r.Warnings, fmt.Sprintf(format, args...))
}

// Merge folds another result into r.
func (r *Result) Merge(o Result) {
	r.Also(o.Errs)
	r.Warnings = append(r.Warnings, o.Warnings...)
}

// Via nests every problem under field.
func (r Result) Via(field string) Result {
	r.Errs = r.Errs.ViaField(field)
	return r
}

// OK reports whether nothing would be denied.
func (r Result) OK() bool { return r.Errs == nil }

// Problems lists each problem as "path: message", sorted, for CLIs and tests.
func (r Result) Problems() []string {
	var out []string
	for _, e := range r.Errs.WrappedErrors() {
		msg := e.Message
		if e.Details != "" {
			msg += " " + e.Details
		}
		paths := append([]string(nil), e.Paths...)
		sort.Strings(paths)
		out = append(out, strings.Join(paths, ", ")+": "+msg)
	}
	sort.Strings(out)
	return out
}

// fieldErr is one problem at one path (relative to where it is attached).
func fieldErr(path, format string, args ...any) *apis.FieldError {
	return &apis.FieldError{Message: fmt.Sprintf(format, args...), Paths: []string{path}}
}

func missing(path, why string) *apis.FieldError {
	return &apis.FieldError{Message: "missing required field: " + why, Paths: []string{path}}
}

// duration parses a Go-style duration field; empty is allowed.
func duration(path, v string) (time.Duration, *apis.FieldError) {
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fieldErr(path, "%q is not a valid Go-style duration; use a number with an s, m or h suffix (e.g. 90s, 10m, 2h)", v)
	}
	if d < 0 {
		return 0, fieldErr(path, "%q is negative; use a positive duration", v)
	}
	return d, nil
}

// jitter checks a jitter window; the 24h bound is admission-only.
func jitter(path, v string, opts Options) *apis.FieldError {
	d, err := duration(path, v)
	if err != nil {
		return err
	}
	if opts.Admission && d > MaxJitter {
		return fieldErr(path, "jitter of %s exceeds the 24h maximum: jitter is a per-slot spread within a cron period, not a schedule offset; use a window smaller than the cron period (e.g. 10m), or move the offset into the cron expression", v)
	}
	return nil
}

func timezone(path, v string) *apis.FieldError {
	if v == "" {
		return nil
	}
	if _, err := time.LoadLocation(v); err != nil || v == "Local" {
		return fieldErr(path, "invalid timezone %q: not a recognized IANA timezone name (e.g. UTC, Europe/Berlin, America/Chicago)", v)
	}
	return nil
}

// cronExpr checks a 5-field expression; H is resolved with a fixed seed for the shape check.
func cronExpr(path, v string) (*cron.Schedule, *apis.FieldError) {
	s, err := cron.Parse(v, "")
	if err != nil {
		return nil, fieldErr(path, "%v", err)
	}
	return s, nil
}

func cronSpec(c *snapv1.CronSpec, opts Options) *apis.FieldError {
	if c == nil {
		return nil
	}
	var errs *apis.FieldError
	if c.Cron == "" {
		errs = errs.Also(missing("cron", "cron (a 5-field expression such as \"0 4 * * *\")"))
	} else if _, err := cronExpr("cron", c.Cron); err != nil {
		errs = errs.Also(err)
	}
	return errs.Also(jitter("jitter", c.Jitter, opts), timezone("timezone", c.Timezone))
}

// minCount checks a count that must do some work when set.
func minCount(path string, v *int32) *apis.FieldError {
	if v != nil && *v < 1 {
		return fieldErr(path, "must be at least 1 (got %d): 0 would do no work; set a positive count or remove the field", *v)
	}
	return nil
}

// repositoryRef checks the shape of a reference; whether it resolves is for the referent checks.
func repositoryRef(ref *snapv1.RepositoryRef) *apis.FieldError {
	if ref == nil {
		return nil
	}
	var errs *apis.FieldError
	if ref.Name == "" {
		errs = errs.Also(missing("name", "name (the Repository or ClusterRepository to use)"))
	}
	if ref.Kind == snapv1.KindClusterRepository && ref.Namespace != "" {
		errs = errs.Also(fieldErr("namespace", "must not be set when kind is ClusterRepository (a ClusterRepository is referenced by name only; got namespace %q); remove namespace", ref.Namespace))
	}
	return errs
}

// RepoKey is a normalised reference: kind/namespace/name, with the referrer's
// namespace filled in for a Repository.
func RepoKey(ref snapv1.RepositoryRef, referrerNamespace string) string {
	q := ref.Qualified(referrerNamespace)
	if q.Kind == snapv1.KindClusterRepository {
		return string(q.Kind) + "/" + q.Name
	}
	return string(q.Kind) + "/" + q.Namespace + "/" + q.Name
}

// labelSelector refuses selectors the API server would reject or silently widen.
func labelSelector(sel *metav1.LabelSelector) *apis.FieldError {
	if sel == nil {
		return nil
	}
	var errs *apis.FieldError
	for i, e := range sel.MatchExpressions {
		switch e.Operator {
		case metav1.LabelSelectorOpIn, metav1.LabelSelectorOpNotIn:
			if len(e.Values) == 0 {
				errs = errs.Also(fieldErr("values", "operator %s requires at least one value; an empty list renders as `%s %s ()`, which the API server rejects", e.Operator, e.Key, strings.ToLower(string(e.Operator))).ViaFieldIndex("matchExpressions", i))
			}
		case metav1.LabelSelectorOpExists, metav1.LabelSelectorOpDoesNotExist:
			if len(e.Values) > 0 {
				errs = errs.Also(fieldErr("values", "operator %s takes no values; remove them", e.Operator).ViaFieldIndex("matchExpressions", i))
			}
		default:
			errs = errs.Also(fieldErr("operator", "%q is not a label-selector operator (expected In, NotIn, Exists or DoesNotExist); an unrecognized operator would be dropped, widening the selector to more objects than intended", e.Operator).ViaFieldIndex("matchExpressions", i))
		}
		if e.Key == "" {
			errs = errs.Also(missing("key", "key (the label to match)").ViaFieldIndex("matchExpressions", i))
		}
	}
	return errs
}

func selectorEmpty(sel metav1.LabelSelector) bool {
	return len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0
}

// resources refuses requests above limits: the API server would reject the
// mover pod and the Job would hang instead of failing.
func resources(r *corev1.ResourceRequirements) *apis.FieldError {
	if r == nil {
		return nil
	}
	var errs *apis.FieldError
	names := make([]string, 0, len(r.Requests))
	for n := range r.Requests {
		names = append(names, string(n))
	}
	sort.Strings(names)
	for _, n := range names {
		req := r.Requests[corev1.ResourceName(n)]
		lim, ok := r.Limits[corev1.ResourceName(n)]
		if ok && req.Cmp(lim) > 0 {
			errs = errs.Also(fieldErr("requests."+n, "request %s exceeds limit %s; the API server rejects a pod whose requests exceed its limits, so the mover Job would never create a pod (it hangs instead of failing). Lower the request or raise the limit", req.String(), lim.String()))
		}
	}
	return errs
}

// failurePolicy checks the mover Job bounds shared by Snapshot and Restore.
func failurePolicy(fp *snapv1.FailurePolicy) *apis.FieldError {
	if fp == nil {
		return nil
	}
	var errs *apis.FieldError
	if fp.BackoffLimit != nil && *fp.BackoffLimit < 0 {
		errs = errs.Also(fieldErr("backoffLimit", "must be at least 0 (got %d)", *fp.BackoffLimit))
	}
	if fp.ActiveDeadlineSeconds != nil && *fp.ActiveDeadlineSeconds < 1 {
		errs = errs.Also(fieldErr("activeDeadlineSeconds", "must be at least 1 second (got %d) because it caps how long a running mover may take; remove it for the 48h default", *fp.ActiveDeadlineSeconds))
	}
	if fp.PodStartupDeadlineSeconds != nil && *fp.PodStartupDeadlineSeconds < 1 {
		errs = errs.Also(fieldErr("podStartupDeadlineSeconds", "must be at least 1 second (got %d) because it bounds how long a non-starting mover pod is tolerated; remove it for the 300s default", *fp.PodStartupDeadlineSeconds))
	}
	return errs
}

func moverCache(c *snapv1.MoverCache) *apis.FieldError {
	if c == nil || c.Capacity == nil || c.Capacity.Sign() > 0 {
		return nil
	}
	return fieldErr("capacity", "must be positive (got %s); remove it to use an emptyDir cache", c.Capacity.String())
}

// mover checks a mover block; restore says whether snapshot inheritance is allowed.
func mover(m *snapv1.MoverSpec, restore bool) *apis.FieldError {
	if m == nil {
		return nil
	}
	var errs *apis.FieldError
	if in := m.InheritSecurityContextFrom; in != nil {
		if in.Snapshot != nil && !restore {
			errs = errs.Also(fieldErr("inheritSecurityContextFrom.snapshot", "is restore-only: a backup mover's identity is read from the live workload (pvcConsumer or workloadSelector), not from a snapshot"))
		}
		if in.PvcConsumer != nil && restore {
			errs = errs.Also(fieldErr("inheritSecurityContextFrom.pvcConsumer", "is backup-only: a restore target has no consuming pod to copy from; use snapshot (the identity the backup recorded) or workloadSelector"))
		}
		if in.WorkloadSelector != nil && selectorEmpty(in.WorkloadSelector.PodSelector) {
			errs = errs.Also(fieldErr("inheritSecurityContextFrom.workloadSelector.podSelector", "is empty, which matches every pod in the namespace; select the workload whose security context the mover should copy"))
		}
	}
	if m.Cache != nil {
		errs = errs.Also(moverCache(m.Cache).ViaField("cache"))
	}
	return errs.Also(resources(m.Resources).ViaField("resources"))
}

// privilegeWarning warns that what (the mover, a runJob hook) would be
// refused at run time for want of the namespace opt-in; lk may be nil.
func privilegeWarning(ctx context.Context, lk Lookup, namespace, what string, reasons []string, r *Result) {
	if len(reasons) == 0 || lk == nil {
		return
	}
	ns, err := lk.Namespace(ctx, namespace)
	if err != nil || ns == nil {
		return
	}
	if v := ns.Annotations[wellknown.AnnotationPrivilegedMovers]; v != "true" {
		r.Warn("%s would run with elevated privileges (%s), but namespace %q lacks the annotation %s: \"true\", so each run will be refused (MoverPermitted=False, or a failed hook); annotate the namespace or remove those settings", what, strings.Join(reasons, "; "), namespace, wellknown.AnnotationPrivilegedMovers)
	}
}
