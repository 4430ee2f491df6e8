package validate

import (
	"time"

	"knative.dev/pkg/apis"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
)

// Restore checks a restore on its own.
func Restore(rs *snapv1.Restore, opts Options) Result {
	var r Result
	sp := &rs.Spec
	r.Also(repositoryRef(sp.Repository).ViaField("spec.repository"))

	src := sp.Source
	n := 0
	if src.SnapshotRef != nil {
		n++
		if src.SnapshotRef.Name == "" {
			r.Also(missing("spec.source.snapshotRef.name", "snapshotRef.name (the Snapshot to restore)"))
		}
	}
	if fp := src.FromPolicy; fp != nil {
		n++
		r.Also(asOf("spec.source.fromPolicy.asOf", fp.AsOf))
		if fp.Offset != nil && *fp.Offset < 0 {
			r.Also(fieldErr("spec.source.fromPolicy.offset", "must be at least 0 (got %d); 0 restores the newest snapshot", *fp.Offset))
		}
	}
	if id := src.Identity; id != nil {
		n++
		if sp.Repository == nil {
			r.Also(fieldErr("spec.repository", "restore source.identity requires spec.repository to be set (no Snapshot or SnapshotPolicy to derive it from); name the repository that holds the identity"))
		}
		r.Also(asOf("spec.source.identity.asOf", id.AsOf))
		if id.SnapshotID != "" && (id.AsOf != "" || (id.Offset != nil && *id.Offset != 0)) {
			r.Also(&apis.FieldError{Message: "fields snapshotID and asOf/offset are mutually exclusive but both were set (restore source.identity): a snapshotID names one snapshot exactly; drop asOf and offset, or drop snapshotID", Paths: []string{"spec.source.identity.snapshotID", "spec.source.identity.asOf", "spec.source.identity.offset"}})
		}
	}
	if n != 1 {
		r.Also(&apis.FieldError{Message: "exactly one of spec.source.snapshotRef, spec.source.fromPolicy or spec.source.identity must be set", Paths: []string{"spec.source"}})
	}

	t := sp.Target
	targets := 0
	if t.PVC != nil {
		targets++
		if t.PVC.Name == "" {
			r.Also(missing("spec.target.pvc.name", "target.pvc.name (the PVC to create)"))
		}
		if t.PVC.Capacity == nil || t.PVC.Capacity.Sign() <= 0 {
			r.Also(missing("spec.target.pvc.capacity", "target.pvc.capacity (the size of the PVC to create, e.g. 20Gi)"))
		}
		for i, m := range t.PVC.AccessModes {
			if !accessModes[m] {
				r.Also(fieldErr("spec.target.pvc.accessModes", "%q (index %d) is not an access mode (use ReadWriteOnce, ReadOnlyMany, ReadWriteMany or ReadWriteOncePod)", m, i))
			}
		}
	}
	if t.PVCRef != nil {
		targets++
		if t.PVCRef.Name == "" {
			r.Also(missing("spec.target.pvcRef.name", "target.pvcRef.name (the existing PVC to restore into)"))
		}
	}
	if t.Populator != nil {
		targets++
		if sp.Mover != nil && sp.Mover.InheritSecurityContextFrom != nil {
			r.Also(fieldErr("spec.mover.inheritSecurityContextFrom", "is not allowed with target.populator: no workload pod exists at provision time to inherit from; set mover.securityContext and podSecurityContext explicitly"))
		}
	}
	if t.StreamExec != nil {
		targets++
		if selectorEmpty(t.StreamExec.PodSelector) {
			r.Also(fieldErr("spec.target.streamExec.podSelector", "the podSelector is empty, which matches EVERY pod in the namespace; select the one workload to pipe the stream into"))
		}
		if _, err := duration("spec.target.streamExec.timeout", t.StreamExec.Timeout); err != nil {
			r.Also(err)
		}
	}
	if targets != 1 {
		r.Also(&apis.FieldError{Message: "exactly one of spec.target.pvc, spec.target.pvcRef, spec.target.populator or spec.target.streamExec must be set", Paths: []string{"spec.target"}})
	}

	if o := sp.Options; o != nil {
		r.Also(minCount("spec.options.parallel", o.Parallel))
	}
	r.Also(mover(sp.Mover, true).ViaField("spec.mover"))
	r.Also(failurePolicy(sp.FailurePolicy).ViaField("spec.failurePolicy"))
	if p := sp.Policy; p != nil {
		if m := p.OnMissingSnapshot; m != "" && m != "Fail" && m != "Continue" {
			r.Also(fieldErr("spec.policy.onMissingSnapshot", "%q is not a choice: use Fail (the restore fails when there is no snapshot) or Continue (it completes with nothing restored)", m))
		}
		wait, err := duration("spec.policy.waitTimeout", p.WaitTimeout)
		r.Also(err)
		if err == nil && wait > 0 && sp.FailurePolicy != nil && sp.FailurePolicy.ActiveDeadlineSeconds != nil {
			if deadline := time.Duration(*sp.FailurePolicy.ActiveDeadlineSeconds) * time.Second; wait >= deadline {
				r.Also(fieldErr("spec.policy.waitTimeout", "%s must be shorter than failurePolicy.activeDeadlineSeconds (%s): the wait for the source snapshot is polled inside the restore Job, which the deadline would kill first. Shorten the wait or raise the deadline", p.WaitTimeout, deadline))
			}
		}
	}
	return r
}

func asOf(path, v string) *apis.FieldError {
	if v == "" {
		return nil
	}
	if _, err := time.Parse(time.RFC3339, v); err != nil {
		return fieldErr(path, "%q is not an RFC3339 timestamp; use e.g. 2026-05-01T00:00:00Z (the newest snapshot at or before this instant is restored)", v)
	}
	return nil
}
