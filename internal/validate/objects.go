package validate

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
)

// Objects is a Lookup over a fixed set of objects: the manifests handed to
// `snapflow validate`, where there is no cluster to ask.
type Objects struct {
	Namespaces          map[string]*corev1.Namespace
	Repositories        map[string]*snapv1.Repository // namespace/name
	ClusterRepositories map[string]*snapv1.ClusterRepository
	Policies            map[string]*snapv1.SnapshotPolicy // namespace/name
	PVCList             map[string][]metav1.ObjectMeta    // by namespace
	SnapshotList        []snapv1.Snapshot
	RestoreList         []snapv1.Restore
	ConfigMaps          map[string]*corev1.ConfigMap // namespace/name
	// Offline reports an object that is not in the set as ErrNotGiven rather
	// than as absent: the manifests are not the whole cluster.
	Offline bool
}

// NewObjects returns an empty lookup.
func NewObjects() *Objects {
	return &Objects{
		Namespaces:          map[string]*corev1.Namespace{},
		Repositories:        map[string]*snapv1.Repository{},
		ClusterRepositories: map[string]*snapv1.ClusterRepository{},
		Policies:            map[string]*snapv1.SnapshotPolicy{},
		PVCList:             map[string][]metav1.ObjectMeta{},
		ConfigMaps:          map[string]*corev1.ConfigMap{},
	}
}

// Add records an object of a kind the cross-object rules read; others are ignored.
func (o *Objects) Add(obj any) {
	switch v := obj.(type) {
	case *corev1.Namespace:
		o.Namespaces[v.Name] = v
	case *snapv1.Repository:
		o.Repositories[v.Namespace+"/"+v.Name] = v
	case *snapv1.ClusterRepository:
		o.ClusterRepositories[v.Name] = v
	case *snapv1.SnapshotPolicy:
		o.Policies[v.Namespace+"/"+v.Name] = v
	case *snapv1.Snapshot:
		o.SnapshotList = append(o.SnapshotList, *v)
	case *snapv1.Restore:
		o.RestoreList = append(o.RestoreList, *v)
	case *corev1.PersistentVolumeClaim:
		o.PVCList[v.Namespace] = append(o.PVCList[v.Namespace], v.ObjectMeta)
	case *corev1.ConfigMap:
		o.ConfigMaps[v.Namespace+"/"+v.Name] = v
	}
}

func find[T any](o *Objects, m map[string]*T, key string) (*T, error) {
	v, ok := m[key]
	if !ok && o.Offline {
		return nil, ErrNotGiven
	}
	return v, nil
}

func (o *Objects) Namespace(_ context.Context, name string) (*corev1.Namespace, error) {
	return find(o, o.Namespaces, name)
}

func (o *Objects) Repository(_ context.Context, ns, name string) (*snapv1.Repository, error) {
	return find(o, o.Repositories, ns+"/"+name)
}

func (o *Objects) ClusterRepository(_ context.Context, name string) (*snapv1.ClusterRepository, error) {
	return find(o, o.ClusterRepositories, name)
}

func (o *Objects) SnapshotPolicy(_ context.Context, ns, name string) (*snapv1.SnapshotPolicy, error) {
	return find(o, o.Policies, ns+"/"+name)
}

func (o *Objects) SnapshotPolicies(context.Context) ([]snapv1.SnapshotPolicy, error) {
	out := make([]snapv1.SnapshotPolicy, 0, len(o.Policies))
	for _, p := range o.Policies {
		out = append(out, *p)
	}
	return out, nil
}

// PVCs are the claims given for namespace; offline, a namespace none was
// given for is ErrNotGiven (the claims may exist in the cluster).
func (o *Objects) PVCs(_ context.Context, ns string) ([]metav1.ObjectMeta, error) {
	v, ok := o.PVCList[ns]
	if !ok && o.Offline {
		return nil, ErrNotGiven
	}
	return v, nil
}

// Snapshots are the given Snapshots of namespace ("": all).
func (o *Objects) Snapshots(_ context.Context, ns string) ([]snapv1.Snapshot, error) {
	return inNamespace(o.SnapshotList, ns, func(s *snapv1.Snapshot) string { return s.Namespace }), nil
}

// Restores are the given Restores of namespace ("": all).
func (o *Objects) Restores(_ context.Context, ns string) ([]snapv1.Restore, error) {
	return inNamespace(o.RestoreList, ns, func(r *snapv1.Restore) string { return r.Namespace }), nil
}

func inNamespace[T any](items []T, ns string, of func(*T) string) []T {
	var out []T
	for i := range items {
		if ns == "" || of(&items[i]) == ns {
			out = append(out, items[i])
		}
	}
	return out
}

// ConfigMap is a given ConfigMap. One given without a namespace (applied
// with kubectl -n, or by kustomize) is taken for any namespace's.
func (o *Objects) ConfigMap(_ context.Context, ns, name string) (*corev1.ConfigMap, error) {
	if cm, ok := o.ConfigMaps["/"+name]; ok && o.ConfigMaps[ns+"/"+name] == nil {
		return cm, nil
	}
	return find(o, o.ConfigMaps, ns+"/"+name)
}
