package webhook

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/internal/kubemeta"
	"github.com/snapflow/snapflow/internal/validate"
)

// clusterLookup reads referents through the manager's cache, and asks the
// API server directly when the cache has not seen an object yet: a policy
// and its first Snapshot are often applied in one go.
type clusterLookup struct {
	r    client.Reader
	live client.Reader
	// system is snapflow's own namespace.
	system string
}

var (
	_ validate.Lookup           = clusterLookup{}
	_ validate.SystemNamespacer = clusterLookup{}
)

func (l clusterLookup) SystemNamespace() string { return l.system }

// NewClusterLookup reads referents with r (the CLI's `validate --cluster`);
// system is snapflow's own namespace.
func NewClusterLookup(r client.Reader, system string) validate.Lookup {
	return clusterLookup{r: r, system: system}
}

func (l clusterLookup) get(ctx context.Context, key client.ObjectKey, obj client.Object) (bool, error) {
	err := l.r.Get(ctx, key, obj)
	if apierrors.IsNotFound(err) && l.live != nil {
		err = l.live.Get(ctx, key, obj)
	}
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

func get[T client.Object](ctx context.Context, l clusterLookup, key client.ObjectKey, obj T) (T, error) {
	var zero T
	if ok, err := l.get(ctx, key, obj); !ok {
		return zero, err
	}
	return obj, nil
}

func (l clusterLookup) Namespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	return get(ctx, l, client.ObjectKey{Name: name}, &corev1.Namespace{})
}

func (l clusterLookup) Repository(ctx context.Context, ns, name string) (*snapv1.Repository, error) {
	return get(ctx, l, client.ObjectKey{Namespace: ns, Name: name}, &snapv1.Repository{})
}

func (l clusterLookup) ClusterRepository(ctx context.Context, name string) (*snapv1.ClusterRepository, error) {
	return get(ctx, l, client.ObjectKey{Name: name}, &snapv1.ClusterRepository{})
}

func (l clusterLookup) SnapshotPolicy(ctx context.Context, ns, name string) (*snapv1.SnapshotPolicy, error) {
	return get(ctx, l, client.ObjectKey{Namespace: ns, Name: name}, &snapv1.SnapshotPolicy{})
}

func (l clusterLookup) SnapshotPolicies(ctx context.Context) ([]snapv1.SnapshotPolicy, error) {
	var list snapv1.SnapshotPolicyList
	if err := l.r.List(ctx, &list); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// PVCs lists claim metadata straight from the API server (live when it is
// set): caching every claim of the cluster for a rare check is not worth
// the memory, and a claim labelled a moment ago must count.
func (l clusterLookup) PVCs(ctx context.Context, ns string) ([]metav1.ObjectMeta, error) {
	return kubemeta.PVCs(ctx, l.reader(), ns)
}

// Snapshots and Restores are listed live too: only a repository's deletion
// asks, and caching every run of the cluster for it is not worth it.
func (l clusterLookup) Snapshots(ctx context.Context, ns string) ([]snapv1.Snapshot, error) {
	var list snapv1.SnapshotList
	err := l.reader().List(ctx, &list, client.InNamespace(ns))
	return list.Items, err
}

func (l clusterLookup) Restores(ctx context.Context, ns string) ([]snapv1.Restore, error) {
	var list snapv1.RestoreList
	err := l.reader().List(ctx, &list, client.InNamespace(ns))
	return list.Items, err
}

// reader is the live reader when there is one.
func (l clusterLookup) reader() client.Reader {
	if l.live != nil {
		return l.live
	}
	return l.r
}

// ConfigMap reads a recipe's volume policies live: caching every
// ConfigMap of the cluster for them is not worth the memory.
func (l clusterLookup) ConfigMap(ctx context.Context, ns, name string) (*corev1.ConfigMap, error) {
	var cm corev1.ConfigMap
	err := l.reader().Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &cm)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &cm, nil
}
