package maintenance

import (
	"context"
	"fmt"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/functions/host"
	kernel "github.com/snapflow/snapflow/internal/maintenance"
	"github.com/snapflow/snapflow/internal/repository"
	"github.com/snapflow/snapflow/internal/validate"
)

// ensureDefault keeps a repository's default Maintenance in line with its
// spec.maintenance: created unless a Maintenance of the repository exists,
// its schedule following the repository's, removed when the repository
// disables maintenance or becomes read-only. A Maintenance someone wrote
// is never touched, and on the default one only the schedule is kept in
// line: its ownership, mover and failurePolicy may be edited.
func (f *Function) ensureDefault(ctx context.Context, ref snapv1.RepositoryRef) error {
	var obj client.Object
	switch ref.Kind {
	case snapv1.KindClusterRepository:
		obj = &snapv1.ClusterRepository{}
	default:
		obj = &snapv1.Repository{}
	}
	if err := f.Client.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, obj); err != nil {
		return client.IgnoreNotFound(err)
	}
	return f.keepDefault(ctx, obj, nil)
}

// keepDefault does ensureDefault's work for a repository that was read
// already; existing, when not nil, holds every Maintenance of the cluster
// (a resync lists them once for all repositories).
func (f *Function) keepDefault(ctx context.Context, obj client.Object, existing []snapv1.Maintenance) error {
	var (
		ref  snapv1.RepositoryRef
		spec *snapv1.RepositorySpec
		ns   string
	)
	switch o := obj.(type) {
	case *snapv1.ClusterRepository:
		ref, spec, ns = snapv1.RepositoryRef{Kind: snapv1.KindClusterRepository, Name: o.Name}, &o.Spec.RepositorySpec, validate.MaintenanceNamespace(o, f.Namespace)
	case *snapv1.Repository:
		ref, spec, ns = snapv1.RepositoryRef{Kind: snapv1.KindRepository, Name: o.Name, Namespace: o.Namespace}, &o.Spec, o.Namespace
	default:
		return fmt.Errorf("%T is not a repository", obj)
	}
	if obj.GetDeletionTimestamp() != nil {
		return nil // its Maintenance goes with it (owner reference)
	}
	if existing == nil {
		var list snapv1.MaintenanceList
		if err := f.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return fmt.Errorf("list the maintenances of namespace %s: %w", ns, err)
		}
		existing = list.Items
	}
	key := validate.RepoKey(ref, ref.Namespace)
	var def *snapv1.Maintenance
	custom := false
	for i := range existing {
		m := &existing[i]
		isDefault := m.Labels[wellknown.LabelMaintenanceDefault] == "true"
		if isDefault && ownedBy(m, obj) && m.Namespace != ns {
			// A ClusterRepository's maintenance namespace changed: its
			// default moves with it.
			f.remove(ctx, m)
			continue
		}
		// Only a Maintenance of the namespace that may maintain the
		// repository counts: a tenant's Maintenance of a ClusterRepository
		// never makes its default step aside.
		if m.Namespace != ns || validate.RepoKey(m.Spec.Repository, m.Namespace) != key {
			continue
		}
		switch {
		case isDefault && ownedBy(m, obj):
			def = m
		case isDefault && len(m.OwnerReferences) > 0:
			// The default of an earlier repository of this name, which
			// the garbage collector has not removed yet.
			f.remove(ctx, m)
		default:
			custom = true
		}
	}
	want := kernel.DefaultSpec(ref, spec, f.defaults())
	switch {
	case custom && def == nil:
		return nil // the repository's maintenance is someone's own
	case !kernel.Wanted(spec) || custom:
		// Disabled, or someone wrote a Maintenance of the repository: the
		// default steps aside, so two never run for one repository.
		if def == nil {
			return nil
		}
		err := f.Client.Delete(ctx, def, client.Preconditions{UID: &def.UID, ResourceVersion: &def.ResourceVersion})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil
		}
		return err
	case def == nil:
		gvk := snapv1.GroupVersion.WithKind(string(ref.Kind))
		m := &snapv1.Maintenance{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: kernel.DefaultName(ref),
				Labels: map[string]string{wellknown.LabelMaintenanceDefault: "true", wellknown.LabelManagedBy: wellknown.ManagedByValue},
				// Not blocking the owner's deletion: a repository never
				// waits for its maintenance object.
				OwnerReferences: []metav1.OwnerReference{{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Name: obj.GetName(), UID: obj.GetUID()}}},
			Spec: want,
		}
		err := f.Client.Create(ctx, m)
		if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			return nil // the repository goes with its namespace
		}
		if apierrors.IsAlreadyExists(err) {
			// A Maintenance of that name maintains something else: leave
			// it, and say so on the repository's events.
			if f.Recorder != nil {
				f.Recorder.Eventf(obj, "Warning", "DefaultMaintenanceNameTaken",
					"the default Maintenance %s/%s could not be created: a Maintenance of that name exists for another repository; create a Maintenance for this repository yourself", ns, m.Name)
			}
			return nil
		}
		return err
	case !reflect.DeepEqual(def.Spec.Schedule, want.Schedule) || def.Spec.Repository != want.Repository:
		// Only what spec.maintenance decides follows the repository;
		// ownership, mover and failurePolicy stay as the user set them.
		def.Spec.Schedule, def.Spec.Repository = want.Schedule, want.Repository
		err := f.Client.Update(ctx, def)
		if apierrors.IsConflict(err) {
			return nil // a newer version: the next event looks again
		}
		return err
	}
	return nil
}

// remove deletes a default Maintenance that is no longer any repository's,
// exactly the version read; a failure waits for the next resync.
func (f *Function) remove(ctx context.Context, m *snapv1.Maintenance) {
	if err := f.Client.Delete(ctx, m, client.Preconditions{UID: &m.UID, ResourceVersion: &m.ResourceVersion}); err != nil && !apierrors.IsNotFound(err) {
		host.Log(ctx).Info("could not remove a stale default Maintenance", "maintenance", m.Namespace+"/"+m.Name, "error", err.Error())
	}
}

// ownedBy says whether m's owner reference names obj (by UID).
func ownedBy(m *snapv1.Maintenance, obj client.Object) bool {
	for _, o := range m.OwnerReferences {
		if o.UID == obj.GetUID() {
			return true
		}
	}
	return false
}

// repositories indexes the repositories a resync listed by kind,
// namespace and name.
type repositories struct {
	byKey map[string]client.Object
}

func (r *repositories) add(obj client.Object) {
	kind := snapv1.KindRepository
	if _, ok := obj.(*snapv1.ClusterRepository); ok {
		kind = snapv1.KindClusterRepository
	}
	r.byKey[string(kind)+"/"+obj.GetNamespace()+"/"+obj.GetName()] = obj
}

// find returns ref as snapshot.GetRepository would read it (nil when it
// was not listed); installNS is where a ClusterRepository's references
// live, ns the Maintenance's namespace.
func (r *repositories) find(ref snapv1.RepositoryRef, ns, installNS string) *repository.Object {
	if ref.Kind == snapv1.KindClusterRepository {
		cr, ok := r.byKey[string(ref.Kind)+"//"+ref.Name].(*snapv1.ClusterRepository)
		if !ok {
			return nil
		}
		return &repository.Object{Ref: ref, Namespace: installNS, Obj: cr, Spec: &cr.Spec.RepositorySpec, Status: &cr.Status, Allowed: cr.Spec.AllowedNamespaces}
	}
	repo, ok := r.byKey[string(snapv1.KindRepository)+"/"+ns+"/"+ref.Name].(*snapv1.Repository)
	if !ok {
		return nil
	}
	ref.Kind, ref.Namespace = snapv1.KindRepository, ""
	return &repository.Object{Ref: ref, Namespace: ns, Obj: repo, Spec: &repo.Spec, Status: &repo.Status}
}
