package validate

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
)

// The files win over the cluster; the cluster fills in what they lack.
func TestLayered(t *testing.T) {
	ctx := context.Background()
	cm := func(ns, name, data string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{"k": data}}
	}
	pol := func(ns, name, repo string) *snapv1.SnapshotPolicy {
		return &snapv1.SnapshotPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: snapv1.SnapshotPolicySpec{Repository: &snapv1.RepositoryRef{Name: repo}}}
	}
	given := NewObjects()
	given.Offline = true
	given.Add(cm("app", "recipe", "from the files"))
	given.Add(pol("app", "nightly", "new"))
	cluster := NewObjects()
	cluster.Add(cm("app", "recipe", "from the cluster"))
	cluster.Add(cm("app", "other", "only in the cluster"))
	cluster.Add(pol("app", "nightly", "old"))
	cluster.Add(pol("app", "weekly", "old"))
	l := Layered{Given: given, Cluster: cluster}

	for name, want := range map[string]string{"recipe": "from the files", "other": "only in the cluster"} {
		got, err := l.ConfigMap(ctx, "app", name)
		if err != nil || got == nil || got.Data["k"] != want {
			t.Errorf("ConfigMap %s = %+v, %v; want %q", name, got, err, want)
		}
	}
	if got, err := l.ConfigMap(ctx, "app", "missing"); err != nil || got != nil {
		t.Errorf("a ConfigMap in neither = %+v, %v; want absent", got, err)
	}
	ps, err := l.SnapshotPolicies(ctx)
	if err != nil || len(ps) != 2 {
		t.Fatalf("policies %+v, %v", ps, err)
	}
	for _, p := range ps {
		if p.Name == "nightly" && p.Spec.Repository.Name != "new" {
			t.Errorf("the cluster's nightly was not replaced by the file's: %+v", p.Spec.Repository)
		}
	}
}
