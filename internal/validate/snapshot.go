package validate

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"knative.dev/pkg/apis"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
)

// Tag limits: every tag is stored on the kopia manifest and read back by every catalog scan.
const (
	MaxSnapshotTags   = 10
	MaxTagKeyLen      = 63
	MaxTagValueLen    = 256
	MaxDescriptionLen = 1024
)

// Origin resolves where a Snapshot came from: status first, then the origin
// label, and manual when neither says. ok is false for a marker this build
// cannot parse; such a Snapshot is left alone.
func Origin(s *snapv1.Snapshot) (origin snapv1.Origin, ok bool) {
	if s.Status.Origin != "" {
		return s.Status.Origin, s.Status.Origin.IsKnown()
	}
	if v, has := s.Labels[wellknown.LabelOrigin]; has {
		o := snapv1.Origin(v)
		return o, o.IsKnown()
	}
	return snapv1.OriginManual, true
}

// Snapshot checks one invocation on its own.
func Snapshot(s *snapv1.Snapshot, opts Options) Result {
	var r Result
	origin, known := Origin(s)
	if !known {
		r.Warn("unrecognized %s marker %q on this Snapshot: snapflow cannot classify its origin, so it will be held inert (no backup, no deletion of kopia data) until the marker is fixed", wellknown.LabelOrigin, origin)
	} else {
		if origin == snapv1.OriginDiscovered && s.Spec.DeletionPolicy != "" && s.Spec.DeletionPolicy != snapv1.DeletionRetain {
			r.Also(fieldErr("spec.deletionPolicy", "origin: discovered snapshots must use deletionPolicy: Retain (got %q); snapflow never deletes snapshots it did not create", s.Spec.DeletionPolicy))
		}
		switch origin {
		case snapv1.OriginDiscovered, snapv1.OriginAdopted, snapv1.OriginReplicated:
			if s.Spec.OnScheduleDelete != "" {
				r.Also(fieldErr("spec.onScheduleDelete", "origin: %s snapshots must not set onScheduleDelete (got %q); a %s snapshot has no owning SnapshotSchedule for this field to apply to. Remove spec.onScheduleDelete", origin, s.Spec.OnScheduleDelete, origin))
			}
		}
	}
	if s.Spec.PolicyRef != nil && s.Spec.PolicyRef.Name == "" {
		r.Also(missing("spec.policyRef.name", "policyRef.name (the SnapshotPolicy to run)"))
	}
	if pr := s.Spec.PolicyRef; pr != nil && pr.Namespace != "" && s.Namespace != "" && pr.Namespace != s.Namespace {
		r.Also(fieldErr("spec.policyRef.namespace", "names namespace %q, but this Snapshot is in %q: a Snapshot runs only a SnapshotPolicy of its own namespace, so no namespace can start another's backups, hooks or retention. Create the Snapshot in namespace %q, or drop spec.policyRef.namespace", pr.Namespace, s.Namespace, pr.Namespace))
	}
	if known && s.Spec.PolicyRef == nil && (origin == snapv1.OriginManual || origin == snapv1.OriginScheduled) {
		r.Also(missing("spec.policyRef", "spec.policyRef (a manual or scheduled Snapshot runs a SnapshotPolicy; name it)"))
	}
	if src := s.Spec.Source; src != nil && src.Group != nil {
		if errs := validation.IsDNS1123Label(src.Group.VolumeGroupSnapshotName); len(errs) > 0 {
			r.Also(fieldErr("spec.source.group.volumeGroupSnapshotName", "%q is not a valid name for a VolumeGroupSnapshot, whose name is also its members' label key: %s", src.Group.VolumeGroupSnapshotName, strings.Join(errs, "; ")))
		}
	}
	if src := s.Spec.Source; src != nil && src.Group != nil && src.Group.Namespace != "" && s.Namespace != "" && src.Group.Namespace != s.Namespace {
		r.Also(fieldErr("spec.source.group.namespace", "names namespace %q, but this Snapshot is in %q: a VolumeGroupSnapshot covers PVCs of its own namespace, and a run stages only from its own. Drop spec.source.group.namespace or set it to %q", src.Group.Namespace, s.Namespace, s.Namespace))
	}
	r.Also(repositoryRef(s.Spec.Repository).ViaField("spec.repository"))
	r.Also(failurePolicy(s.Spec.FailurePolicy).ViaField("spec.failurePolicy"))
	if len(s.Spec.Description) > MaxDescriptionLen {
		r.Also(fieldErr("spec.description", "is %d characters long; at most %d are allowed", len(s.Spec.Description), MaxDescriptionLen))
	}
	r.Also(tags(s.Spec.Tags).ViaField("spec"))
	return r
}

func tags(t map[string]string) *apis.FieldError {
	var errs *apis.FieldError
	if len(t) > MaxSnapshotTags {
		errs = errs.Also(fieldErr("tags", "%d tags; at most %d user tags are allowed per Snapshot: every tag is stored on the kopia manifest and read back by every catalog scan", len(t), MaxSnapshotTags))
	}
	keys := make([]string, 0, len(t))
	for k := range t {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		path := fmt.Sprintf("tags[%s]", k)
		switch {
		case k == "":
			errs = errs.Also(fieldErr(path, "tag keys must not be empty"))
		case strings.Contains(k, ":"):
			errs = errs.Also(fieldErr(path, "tag key %q contains a colon: kopia splits each tag on the first colon, so the key would be stored mangled and can collide with the reserved kopiur:config tag. Use a key without ':'", k))
		case strings.HasPrefix(k, wellknown.ReservedTagPrefix):
			errs = errs.Also(fieldErr(path, "tag key %q uses the reserved %q prefix, which snapflow writes on every produced snapshot; choose another key", k, wellknown.ReservedTagPrefix))
		case len(k) > MaxTagKeyLen:
			errs = errs.Also(fieldErr(path, "tag key is %d bytes; at most %d are allowed", len(k), MaxTagKeyLen))
		}
		if len(t[k]) > MaxTagValueLen {
			errs = errs.Also(fieldErr(path, "tag value is %d bytes; at most %d are allowed", len(t[k]), MaxTagValueLen))
		}
	}
	return errs
}

// SnapshotSchedule checks a schedule.
func SnapshotSchedule(s *snapv1.SnapshotSchedule, opts Options) Result {
	var r Result
	sp := &s.Spec
	switch {
	case sp.PolicyRef != nil && sp.PolicySelector != nil:
		r.Also(&apis.FieldError{Message: "fields policyRef and policySelector are mutually exclusive but both were set (SnapshotSchedule); keep policyRef for one recipe or policySelector for every recipe matching a label", Paths: []string{"spec.policyRef", "spec.policySelector"}})
	case sp.PolicyRef == nil && sp.PolicySelector == nil:
		r.Also(&apis.FieldError{Message: "missing required field: exactly one of spec.policyRef or spec.policySelector", Paths: []string{"spec.policyRef", "spec.policySelector"}})
	}
	if sp.PolicyRef != nil && sp.PolicyRef.Name == "" {
		r.Also(missing("spec.policyRef.name", "policyRef.name (the SnapshotPolicy to run)"))
	}
	r.Also(labelSelector(sp.PolicySelector).ViaField("spec.policySelector"))
	sch := sp.Schedule
	if sch.Cron == "" {
		r.Also(missing("spec.schedule.cron", "schedule.cron (a 5-field expression such as \"H 2 * * *\")"))
	} else if c, err := cronExpr("spec.schedule.cron", sch.Cron); err != nil {
		r.Also(err)
	} else if n := c.FiringsPerHour(); n > 1 {
		r.Warn("schedule fires ~%d×/hour: each fire creates one Snapshot CR per source, and they accumulate up to the SnapshotPolicy retention window; consider an hourly or slower cron", n)
	}
	r.Also(jitter("spec.schedule.jitter", sch.Jitter, opts), timezone("spec.schedule.timezone", sch.Timezone))
	if opts.Admission && sch.StartingDeadlineSeconds != nil && *sch.StartingDeadlineSeconds < 0 {
		r.Also(fieldErr("spec.schedule.startingDeadlineSeconds", "%d must be >= 0: a negative deadline marks every slot expired the instant it fires, so the schedule never runs. Remove it to never skip a late slot", *sch.StartingDeadlineSeconds))
	}
	if sp.FailedJobsHistoryLimit != nil && *sp.FailedJobsHistoryLimit < 0 {
		r.Also(fieldErr("spec.failedJobsHistoryLimit", "must be at least 0 (got %d); 0 keeps no failed Snapshots", *sp.FailedJobsHistoryLimit))
	}
	return r
}
