package snapshot

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/internal/repository"
)

// A PVC source's kopia path is /pvc/NAME by default, /pvc/NAMESPACE/NAME
// with sourcePathStrategy PvcNamespacedName, and sourcePathOverride as
// written: the path a run's work spec hands the mover.
func TestResolveIdentityPath(t *testing.T) {
	override := "/srv/legacy-data"
	p := &snapv1.SnapshotPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "db"}}
	r := repository.FromRepository(&snapv1.Repository{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "primary"}})
	for _, tc := range []struct {
		name string
		src  snapv1.Source
		want string
	}{
		{"the default", snapv1.Source{PVC: &snapv1.LocalObjectRef{Name: "data"}}, "/pvc/data"},
		{"namespaced", snapv1.Source{PVC: &snapv1.LocalObjectRef{Name: "data"}, SourcePathStrategy: snapv1.SourcePathPvcNamespacedName}, "/pvc/app/data"},
		{"an override wins", snapv1.Source{PVC: &snapv1.LocalObjectRef{Name: "data"}, SourcePathStrategy: snapv1.SourcePathPvcNamespacedName, SourcePathOverride: &override}, override},
	} {
		got, err := resolveIdentity(p, r, tc.src, "data")
		if err != nil {
			t.Fatal(err)
		}
		if got.Path != tc.want || got.Hostname == "" || got.Username == "" {
			t.Errorf("%s: source %+v, want path %s with the policy's identity", tc.name, got, tc.want)
		}
	}
}
