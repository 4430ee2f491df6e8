package repository

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

// Lookup is the validator's port onto the cluster: the one adapter the
// webhook, the CLI and the functions re-running the validator share.
type Lookup struct {
	// Reader answers first: the webhook's informer cache, or a live client.
	Reader client.Reader
	// Live, when set, answers what Reader has not seen yet (a policy and
	// its first Snapshot are often applied in one go), and the lists not
	// worth caching cluster-wide: claims, runs, restores, ConfigMaps.
	Live client.Reader
	// System is snapflow's own namespace, when known.
	System string
}

var (
	_ validate.Lookup           = Lookup{}
	_ validate.SystemNamespacer = Lookup{}
)

func (l Lookup) SystemNamespace() string { return l.System }

// live is the reader for what is read live: Live when set.
func (l Lookup) live() client.Reader {
	if l.Live != nil {
		return l.Live
	}
	return l.Reader
}

// get reads key into obj; nil and no error when it does not exist.
func get[T client.Object](ctx context.Context, l Lookup, key client.ObjectKey, obj T) (T, error) {
	var zero T
	err := l.Reader.Get(ctx, key, obj)
	if apierrors.IsNotFound(err) && l.Live != nil {
		err = l.Live.Get(ctx, key, obj)
	}
	if apierrors.IsNotFound(err) {
		return zero, nil
	}
	if err != nil {
		return zero, err
	}
	return obj, nil
}

func (l Lookup) Namespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	return get(ctx, l, client.ObjectKey{Name: name}, &corev1.Namespace{})
}

func (l Lookup) Repository(ctx context.Context, ns, name string) (*snapv1.Repository, error) {
	return get(ctx, l, client.ObjectKey{Namespace: ns, Name: name}, &snapv1.Repository{})
}

func (l Lookup) ClusterRepository(ctx context.Context, name string) (*snapv1.ClusterRepository, error) {
	return get(ctx, l, client.ObjectKey{Name: name}, &snapv1.ClusterRepository{})
}

func (l Lookup) SnapshotPolicy(ctx context.Context, ns, name string) (*snapv1.SnapshotPolicy, error) {
	return get(ctx, l, client.ObjectKey{Namespace: ns, Name: name}, &snapv1.SnapshotPolicy{})
}

func (l Lookup) SnapshotPolicies(ctx context.Context) ([]snapv1.SnapshotPolicy, error) {
	var list snapv1.SnapshotPolicyList
	if err := l.Reader.List(ctx, &list); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// PVCs lists claim metadata only, live: selectors and overlaps need no
// more, and a claim labelled a moment ago must count.
func (l Lookup) PVCs(ctx context.Context, ns string) ([]metav1.ObjectMeta, error) {
	return kubemeta.PVCs(ctx, l.live(), ns)
}

// Snapshots and Restores are listed live: only a repository's deletion
// asks, and caching every run of the cluster for it is not worth it.
func (l Lookup) Snapshots(ctx context.Context, ns string) ([]snapv1.Snapshot, error) {
	var list snapv1.SnapshotList
	err := l.live().List(ctx, &list, client.InNamespace(ns))
	return list.Items, err
}

func (l Lookup) Restores(ctx context.Context, ns string) ([]snapv1.Restore, error) {
	var list snapv1.RestoreList
	err := l.live().List(ctx, &list, client.InNamespace(ns))
	return list.Items, err
}

// ConfigMap reads a recipe's volume policies live: a cache would hold
// every ConfigMap of the cluster for them.
func (l Lookup) ConfigMap(ctx context.Context, ns, name string) (*corev1.ConfigMap, error) {
	return get(ctx, Lookup{Reader: l.live()}, client.ObjectKey{Namespace: ns, Name: name}, &corev1.ConfigMap{})
}
