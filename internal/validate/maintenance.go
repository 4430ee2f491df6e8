package validate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"knative.dev/pkg/apis"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/identity"
)

// Maintenance modes a run-mode annotation may name.
const (
	MaintenanceQuick = "quick"
	MaintenanceFull  = "full"
)

// Maintenance checks a Maintenance on its own.
func Maintenance(m *snapv1.Maintenance, opts Options) Result {
	var r Result
	sp := &m.Spec
	ref := sp.Repository
	r.Also(repositoryRef(&ref).ViaField("spec.repository"))
	if ref.Kind != snapv1.KindClusterRepository && ref.Namespace != "" && ref.Namespace != m.Namespace {
		r.Also(fieldErr("spec.repository.namespace", "a Maintenance maintains a Repository of its own namespace (%q), not of %q: maintenance deletes data, so it runs where the repository lives; create the Maintenance in namespace %s", m.Namespace, ref.Namespace, ref.Namespace))
	}
	if s := sp.Schedule; s != nil {
		r.Also(cronSpec(s.Quick, opts).ViaField("spec.schedule.quick"), cronSpec(s.Full, opts).ViaField("spec.schedule.full"))
	}
	if o := sp.Ownership; o != nil {
		if o.Owner != "" {
			r.Also(ownerName("spec.ownership.owner", o.Owner))
		}
		for i, a := range o.OwnerAliases {
			r.Also(ownerName(fmt.Sprintf("spec.ownership.ownerAliases[%d]", i), a))
		}
		switch o.TakeoverPolicy {
		case "", snapv1.TakeoverNever, snapv1.TakeoverAlways:
		default:
			r.Also(fieldErr("spec.ownership.takeoverPolicy", "%q is not a takeover policy (use Never or Always)", o.TakeoverPolicy))
		}
	}
	if mv := sp.Mover; mv != nil {
		if in := mv.InheritSecurityContextFrom; in != nil && (in.PvcConsumer != nil || in.Snapshot != nil || in.WorkloadSelector != nil) {
			r.Also(fieldErr("spec.mover.inheritSecurityContextFrom", "is not honoured by maintenance, which reads no volume and writes only to the repository; remove it"))
		}
		r.Also(mover(mv, false).ViaField("spec.mover"))
	}
	r.Also(failurePolicy(sp.FailurePolicy).ViaField("spec.failurePolicy"))
	_, _, err := MaintenanceRequest(m.Annotations)
	if err != nil {
		r.Also(&apis.FieldError{Message: "invalid maintenance run annotation: " + err.Error(), Paths: []string{"metadata.annotations"}})
	}
	switch v := m.Annotations[wellknown.AnnotationMaintenanceSafety]; v {
	case "", "full":
	case "none":
		r.Warn("%s: none makes requested runs reclaim deleted data at once, which is safe only while nothing else writes to the repository; snapflow starts such a run only when none of its own Jobs use the repository and holds backups meanwhile, but cannot see other kopia clients", wellknown.AnnotationMaintenanceSafety)
	default:
		r.Also(fieldErr("metadata.annotations["+wellknown.AnnotationMaintenanceSafety+"]", "%q is not a safety level (use full, kopia's default margins, or none)", v))
	}
	return r
}

// MaintenanceRequest reads the run-requested and run-mode annotations: when
// a manual run was asked for (nil: none) and of which mode (quick unless
// run-mode says full).
func MaintenanceRequest(annotations map[string]string) (*time.Time, string, error) {
	mode := annotations[wellknown.AnnotationMaintenanceRunMode]
	switch mode {
	case "":
		mode = MaintenanceQuick
	case MaintenanceQuick, MaintenanceFull:
	default:
		return nil, "", fmt.Errorf("%s=%q is neither quick nor full", wellknown.AnnotationMaintenanceRunMode, mode)
	}
	v := annotations[wellknown.AnnotationMaintenanceRunReq]
	if v == "" {
		return nil, mode, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return nil, "", fmt.Errorf("%s=%q is not an RFC3339 time (e.g. %s)", wellknown.AnnotationMaintenanceRunReq, v, time.Now().UTC().Format(time.RFC3339))
	}
	return &t, mode, nil
}

// ownerName checks a kopia maintenance owner: user@host, each part a
// valid identity component.
func ownerName(path, v string) *apis.FieldError {
	user, host, ok := strings.Cut(v, "@")
	if !ok {
		return fieldErr(path, "%q is not user@host (kopia names a maintenance owner by its username and hostname, e.g. snapflow@cluster-a)", v)
	}
	for _, part := range []string{user, host} {
		if p := identity.ComponentProblem(part); p != "" {
			return fieldErr(path, "%q: %s", v, p)
		}
	}
	return nil
}

// SystemNamespacer is a Lookup that knows snapflow's own namespace.
type SystemNamespacer interface {
	SystemNamespace() string
}

// MaintenanceNamespace is where a ClusterRepository's maintenance runs:
// spec.maintenance.namespace, or snapflow's own namespace.
func MaintenanceNamespace(cr *snapv1.ClusterRepository, system string) string {
	if m := cr.Spec.Maintenance; m != nil && m.Namespace != "" {
		return m.Namespace
	}
	return system
}

// MaintenanceReferents checks what a Maintenance names: a ClusterRepository
// is maintained only from the namespace it names for that (maintenance
// sees and deletes every tenant's data, so no tenant may run it).
func MaintenanceReferents(ctx context.Context, lk Lookup, m *snapv1.Maintenance) Result {
	var r Result
	ref := m.Spec.Repository
	if ref.Kind != snapv1.KindClusterRepository || lk == nil {
		return r
	}
	cr, err := lk.ClusterRepository(ctx, ref.Name)
	switch {
	case errors.Is(err, ErrNotGiven):
		r.Warn("ClusterRepository %s was not among the given manifests: whether namespace %s may maintain it is checked when the Maintenance is applied", ref.Name, m.Namespace)
		return r
	case err != nil:
		// Fails closed, as tenancy does.
		r.Also(fieldErr("spec.repository", "ClusterRepository %s could not be read to check who may maintain it (%v); try again", ref.Name, err))
		return r
	case cr == nil:
		r.Warn("ClusterRepository %s does not exist yet: the Maintenance waits for it", ref.Name)
		return r
	}
	system := ""
	if s, ok := lk.(SystemNamespacer); ok {
		system = s.SystemNamespace()
	}
	want := MaintenanceNamespace(cr, system)
	if want == "" {
		r.Warn("ClusterRepository %s sets no spec.maintenance.namespace: only snapflow's own namespace may maintain it, which is checked when the Maintenance is applied", ref.Name)
		return r
	}
	if m.Namespace != want {
		r.Also(fieldErr("spec.repository", "ClusterRepository %s is maintained only from namespace %s (its spec.maintenance.namespace, or snapflow's namespace when unset), not from %s: maintenance deletes every tenant's unreferenced data; create the Maintenance in %s", ref.Name, want, m.Namespace, want))
	}
	return r
}
