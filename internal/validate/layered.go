package validate

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
)

// Layered reads referents from the given manifests first and from a
// cluster for the rest (`snapflow validate --cluster`): what the files
// define is what the cluster will hold once they are applied, and the
// cluster supplies what they leave out. Lists are the cluster's, with
// the given objects in place of their namesakes.
type Layered struct {
	Given   *Objects // Offline: a referent it lacks is ErrNotGiven
	Cluster Lookup
}

var _ Lookup = Layered{}

func layer[T any](given func() (*T, error), cluster func() (*T, error)) (*T, error) {
	v, err := given()
	if errors.Is(err, ErrNotGiven) {
		return cluster()
	}
	return v, err
}

func (l Layered) Namespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	return layer(func() (*corev1.Namespace, error) { return l.Given.Namespace(ctx, name) },
		func() (*corev1.Namespace, error) { return l.Cluster.Namespace(ctx, name) })
}

func (l Layered) Repository(ctx context.Context, ns, name string) (*snapv1.Repository, error) {
	return layer(func() (*snapv1.Repository, error) { return l.Given.Repository(ctx, ns, name) },
		func() (*snapv1.Repository, error) { return l.Cluster.Repository(ctx, ns, name) })
}

func (l Layered) ClusterRepository(ctx context.Context, name string) (*snapv1.ClusterRepository, error) {
	return layer(func() (*snapv1.ClusterRepository, error) { return l.Given.ClusterRepository(ctx, name) },
		func() (*snapv1.ClusterRepository, error) { return l.Cluster.ClusterRepository(ctx, name) })
}

func (l Layered) SnapshotPolicy(ctx context.Context, ns, name string) (*snapv1.SnapshotPolicy, error) {
	return layer(func() (*snapv1.SnapshotPolicy, error) { return l.Given.SnapshotPolicy(ctx, ns, name) },
		func() (*snapv1.SnapshotPolicy, error) { return l.Cluster.SnapshotPolicy(ctx, ns, name) })
}

func (l Layered) ConfigMap(ctx context.Context, ns, name string) (*corev1.ConfigMap, error) {
	return layer(func() (*corev1.ConfigMap, error) { return l.Given.ConfigMap(ctx, ns, name) },
		func() (*corev1.ConfigMap, error) { return l.Cluster.ConfigMap(ctx, ns, name) })
}

func (l Layered) PVCs(ctx context.Context, ns string) ([]metav1.ObjectMeta, error) {
	return layerList(func() ([]metav1.ObjectMeta, error) { return l.Cluster.PVCs(ctx, ns) },
		func() ([]metav1.ObjectMeta, error) { return l.Given.PVCs(ctx, ns) },
		func(m *metav1.ObjectMeta) string { return m.Namespace + "/" + m.Name })
}

func (l Layered) SnapshotPolicies(ctx context.Context) ([]snapv1.SnapshotPolicy, error) {
	return layerList(func() ([]snapv1.SnapshotPolicy, error) { return l.Cluster.SnapshotPolicies(ctx) },
		func() ([]snapv1.SnapshotPolicy, error) { return l.Given.SnapshotPolicies(ctx) },
		func(p *snapv1.SnapshotPolicy) string { return p.Namespace + "/" + p.Name })
}

func (l Layered) Snapshots(ctx context.Context, ns string) ([]snapv1.Snapshot, error) {
	return layerList(func() ([]snapv1.Snapshot, error) { return l.Cluster.Snapshots(ctx, ns) },
		func() ([]snapv1.Snapshot, error) { return l.Given.Snapshots(ctx, ns) },
		func(s *snapv1.Snapshot) string { return s.Namespace + "/" + s.Name })
}

func (l Layered) Restores(ctx context.Context, ns string) ([]snapv1.Restore, error) {
	return layerList(func() ([]snapv1.Restore, error) { return l.Cluster.Restores(ctx, ns) },
		func() ([]snapv1.Restore, error) { return l.Given.Restores(ctx, ns) },
		func(r *snapv1.Restore) string { return r.Namespace + "/" + r.Name })
}

// layerList is the cluster's list with the given items in place of their
// namesakes; none given (ErrNotGiven) leaves the cluster's as it is.
func layerList[T any](cluster, given func() ([]T, error), key func(*T) string) ([]T, error) {
	in, err := cluster()
	if err != nil {
		return nil, err
	}
	g, err := given()
	if errors.Is(err, ErrNotGiven) {
		return in, nil
	}
	return overlay(in, g, key), err
}

// overlay is base with the given items in place of their namesakes.
func overlay[T any](base, given []T, key func(*T) string) []T {
	replaced := map[string]bool{}
	for i := range given {
		replaced[key(&given[i])] = true
	}
	out := make([]T, 0, len(base)+len(given))
	for i := range base {
		if !replaced[key(&base[i])] {
			out = append(out, base[i])
		}
	}
	return append(out, given...)
}
