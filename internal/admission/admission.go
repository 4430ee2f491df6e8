// Package admission decides what happens to one object on admission: it
// decodes the object strictly, runs the validator with the cross-object
// rules, and computes the mutations. The webhook and `snapflow validate`
// both call it, so a manifest that passes the linter passes the cluster.
package admission

import (
	"context"
	"fmt"
	"strings"
	"time"

	jsonpatch "gomodules.xyz/jsonpatch/v2"
	"knative.dev/pkg/apis"
	sigsjson "sigs.k8s.io/json"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/mutate"
	"github.com/snapflow/snapflow/internal/validate"
	"github.com/snapflow/snapflow/internal/volumepolicy"
)

// Operation is the admission operation.
type Operation = mutate.Operation

const (
	Create = mutate.Create
	Update = mutate.Update
)

// Kinds are the kinds snapflow admits.
var Kinds = []string{"Repository", "ClusterRepository", "SnapshotPolicy", "Snapshot", "SnapshotSchedule", "Restore", "Maintenance"}

// Object is any of the admitted kinds.
type Object interface {
	GetName() string
	GetNamespace() string
}

// Decode decodes raw JSON of kind strictly: a field the type does not know is
// an error naming its path, never silently dropped.
func Decode(kind string, raw []byte) (Object, error) {
	var obj Object
	switch kind {
	case "Repository":
		obj = &snapv1.Repository{}
	case "ClusterRepository":
		obj = &snapv1.ClusterRepository{}
	case "SnapshotPolicy":
		obj = &snapv1.SnapshotPolicy{}
	case "Snapshot":
		obj = &snapv1.Snapshot{}
	case "SnapshotSchedule":
		obj = &snapv1.SnapshotSchedule{}
	case "Restore":
		obj = &snapv1.Restore{}
	case "Maintenance":
		obj = &snapv1.Maintenance{}
	default:
		return nil, fmt.Errorf("kind %q is not a snapflow kind (expected one of %s)", kind, strings.Join(Kinds, ", "))
	}
	strict, err := sigsjson.UnmarshalStrict(raw, obj)
	if err != nil {
		return nil, fmt.Errorf("cannot decode %s: %w", kind, err)
	}
	if len(strict) > 0 {
		msgs := make([]string, len(strict))
		for i, e := range strict {
			msgs[i] = e.Error()
		}
		return nil, fmt.Errorf("cannot decode %s: %s; remove or correct the field", kind, strings.Join(msgs, "; "))
	}
	return obj, nil
}

// Validate runs every rule for obj. old is nil on CREATE; lk may be nil when
// nothing else can be read (then tenancy denies and referent checks warn).
func Validate(ctx context.Context, lk validate.Lookup, op Operation, obj, old Object) validate.Result {
	opts := validate.Options{Admission: true}
	var r validate.Result
	switch o := obj.(type) {
	case *snapv1.SnapshotPolicy:
		r = validate.SnapshotPolicy(o, opts)
		prev, _ := old.(*snapv1.SnapshotPolicy)
		r.Merge(validate.PolicyReferents(ctx, lk, o, prev))
		var was *snapv1.SnapshotPolicySpec
		if prev != nil {
			was = &prev.Spec
		}
		r.Merge(validate.PolicyUnsupported(was, &o.Spec))
		r.Merge(validate.ForeignRepositories("SnapshotPolicy", o.Namespace, validate.PolicyRepositoryRefs(was), validate.PolicyRepositoryRefs(&o.Spec)))
	case *snapv1.Snapshot:
		r = validate.Snapshot(o, opts)
		if op == Create {
			r.Merge(validate.SnapshotReferents(ctx, lk, o))
		}
		// A policy's Snapshot is checked at its policy: one stored before
		// the rule keeps minting, and its run is refused as before.
		if o.Spec.PolicyRef == nil {
			var was validate.RepositoryRefs
			if prev, ok := old.(*snapv1.Snapshot); ok && prev != nil {
				was = validate.SingleRepositoryRef(prev.Spec.Repository)
			}
			r.Merge(validate.ForeignRepositories("Snapshot", o.Namespace, was, validate.SingleRepositoryRef(o.Spec.Repository)))
		}
	case *snapv1.SnapshotSchedule:
		r = validate.SnapshotSchedule(o, opts)
	case *snapv1.Restore:
		r = validate.Restore(o, opts)
		if op == Create {
			r.Merge(validate.RestoreReferents(ctx, lk, o))
			r.Merge(validate.RestoreUnsupported(&o.Spec))
		}
		var was validate.RepositoryRefs
		if prev, ok := old.(*snapv1.Restore); ok && prev != nil {
			was = validate.SingleRepositoryRef(prev.Spec.Repository)
		}
		r.Merge(validate.ForeignRepositories("Restore", o.Namespace, was, validate.SingleRepositoryRef(o.Spec.Repository)))
	case *snapv1.Maintenance:
		r = validate.Maintenance(o, opts)
		prev, _ := old.(*snapv1.Maintenance)
		if prev == nil || prev.Spec.Repository != o.Spec.Repository {
			r.Merge(validate.MaintenanceReferents(ctx, lk, o))
		}
		var was *snapv1.MaintenanceSpec
		if prev != nil {
			was = &prev.Spec
		}
		r.Merge(validate.MaintenanceUnsupported(was, &o.Spec))
	case *snapv1.Repository:
		r = validate.Repository(o, opts)
		r.Merge(validate.RepositoryPrivilege(ctx, lk, o))
		var was *snapv1.RepositorySpec
		if prev, ok := old.(*snapv1.Repository); ok && prev != nil {
			was = &prev.Spec
		}
		r.Merge(validate.RepositoryUnsupported(was, &o.Spec, false))
		r.Merge(validate.RepositoryOwnNamespace(was, &o.Spec, o.Namespace))
		if sd := o.Spec.Seed; sd != nil {
			r.Merge(validate.Tenancy(ctx, lk, o.Namespace, sd.From.Repository).Via("spec.seed.from.repository"))
		}
		if prev, ok := old.(*snapv1.Repository); ok && prev != nil {
			r.Merge(validate.RepositoryUpdate(&prev.Spec, &o.Spec, prev.Status.UniqueID != ""))
			r.Merge(validate.RepositoryReferents(ctx, lk, validate.RepoKey(snapv1.RepositoryRef{Name: o.Name}, o.Namespace), o.Annotations, &prev.Spec, &o.Spec))
		}
	case *snapv1.ClusterRepository:
		r = validate.ClusterRepository(o, opts)
		var was *snapv1.RepositorySpec
		if prev, ok := old.(*snapv1.ClusterRepository); ok && prev != nil {
			was = &prev.Spec.RepositorySpec
		}
		r.Merge(validate.RepositoryUnsupported(was, &o.Spec.RepositorySpec, true))
		if prev, ok := old.(*snapv1.ClusterRepository); ok && prev != nil {
			r.Merge(validate.RepositoryUpdate(&prev.Spec.RepositorySpec, &o.Spec.RepositorySpec, prev.Status.UniqueID != ""))
			r.Merge(validate.RepositoryReferents(ctx, lk, validate.RepoKey(snapv1.RepositoryRef{Kind: snapv1.KindClusterRepository, Name: o.Name}, ""), o.Annotations, &prev.Spec.RepositorySpec, &o.Spec.RepositorySpec))
		}
	default:
		r.Also(apis.ErrGeneric(fmt.Sprintf("%T is not a snapflow kind", obj)))
	}
	return r
}

// deleteWarningTimeout bounds the listings behind a deletion's warnings.
const deleteWarningTimeout = 3 * time.Second

// WarnDelete has the warnings for deleting old: only a repository's
// deletion has any (the runs and data that still use it). A deletion is
// never refused.
func WarnDelete(ctx context.Context, lk validate.Lookup, old Object) []string {
	// Inside the entry's 5 s timeout, so a slow listing loses the
	// warnings, never the deletion's latency.
	ctx, cancel := context.WithTimeout(ctx, deleteWarningTimeout)
	defer cancel()
	var r validate.Result
	switch o := old.(type) {
	case *snapv1.Repository:
		r = validate.RepositoryDeletion(ctx, lk, snapv1.RepositoryRef{Kind: snapv1.KindRepository, Namespace: o.Namespace, Name: o.Name})
	case *snapv1.ClusterRepository:
		r = validate.RepositoryDeletion(ctx, lk, snapv1.RepositoryRef{Kind: snapv1.KindClusterRepository, Name: o.Name})
	}
	return r.Warnings
}

// VolumePolicies resolves the effective volume policies of a new Snapshot.
type VolumePolicies interface {
	Resolve(ctx context.Context, policy *snapv1.SnapshotPolicy) (*volumepolicy.Stamp, error)
}

// Mutate returns the patches for obj. lk (may be nil) supplies the recipe;
// vp (may be nil) the volume policies stamped on a new Snapshot. An error
// means the object must be denied.
// Requester is who writes the object and what it was before (nil on
// CREATE): admission records some of it on the object. Nil offline, where
// nobody is writing.
type Requester struct {
	User validate.HooksAuthor
	// Controller is set for snapflow's own functions.
	Controller bool
	Old        Object
}

// The warnings are for the requester (a global volume-policy document
// with sections that never apply, say).
func Mutate(ctx context.Context, lk validate.Lookup, vp VolumePolicies, op Operation, obj Object, req *Requester) ([]jsonpatch.Operation, []string, error) {
	var warnings []string
	ops, err := mutateObject(ctx, lk, vp, op, obj, req, &warnings)
	return ops, warnings, err
}

func mutateObject(ctx context.Context, lk validate.Lookup, vp VolumePolicies, op Operation, obj Object, req *Requester, warnings *[]string) ([]jsonpatch.Operation, error) {
	switch o := obj.(type) {
	case *snapv1.Snapshot:
		var policy *snapv1.SnapshotPolicy
		// Only its own namespace's policy: another namespace's is refused,
		// and reading it here would tell the requester about it.
		if ref := o.Spec.PolicyRef; lk != nil && ref != nil && (ref.Namespace == "" || ref.Namespace == o.Namespace) {
			if p, err := lk.SnapshotPolicy(ctx, o.Namespace, ref.Name); err == nil {
				policy = p
			}
		}
		var def snapv1.DeletionPolicy
		if policy != nil {
			def = policy.Spec.DefaultDeletionPolicy
		}
		ops := mutate.Snapshot(o, op, def)
		if op == Create && vp != nil {
			stamp, err := vp.Resolve(ctx, policy)
			if err != nil {
				return nil, fmt.Errorf("cannot resolve the volume policies for this Snapshot: %w", err)
			}
			if stamp != nil && len(stamp.Ignored) > 0 {
				*warnings = append(*warnings, volumepolicy.IgnoredWarning(stamp.Global, stamp.Ignored))
			}
			switch _, forged := o.Annotations[wellknown.AnnotationVolumePolicies]; {
			case stamp != nil:
				op, err := mutate.Annotate(o.Annotations, wellknown.AnnotationVolumePolicies, stamp)
				if err != nil {
					return nil, err
				}
				ops = append(ops, op)
			case forged:
				// No policies apply: a stamp the user brought is not one.
				ops = append(ops, jsonpatch.NewOperation("remove", "/metadata/annotations/"+mutate.EscapeKey(wellknown.AnnotationVolumePolicies), nil))
			}
		}
		return ops, nil
	case *snapv1.SnapshotPolicy:
		ops := mutate.SnapshotPolicy(o)
		if req != nil {
			was, _ := req.Old.(*snapv1.SnapshotPolicy)
			author, err := validate.ExpectedHooksAuthor(was, o, req.User, req.Controller)
			if err != nil {
				return nil, err
			}
			ops = append(ops, mutate.EnsureAnnotation(o.Annotations, wellknown.AnnotationHooksAuthor, author)...)
		}
		return ops, nil
	case *snapv1.Restore:
		var ops []jsonpatch.JsonPatchOperation
		if req != nil {
			was, _ := req.Old.(*snapv1.Restore)
			author, err := validate.ExpectedRestoreAuthor(was, o, req.User, req.Controller)
			if err != nil {
				return nil, err
			}
			ops = mutate.EnsureAnnotation(o.Annotations, wellknown.AnnotationExecAuthor, author)
		}
		return ops, nil
	}
	return nil, nil
}
