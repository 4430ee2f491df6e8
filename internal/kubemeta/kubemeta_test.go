package kubemeta

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/snapflow/snapflow/internal/scheme"
)

func TestPVCsListsOneNamespacesMetadata(t *testing.T) {
	pvc := func(ns, name string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": name}}}
	}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(pvc("a", "db"), pvc("a", "wal"), pvc("b", "other")).Build()
	got, err := PVCs(context.Background(), c, "a")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Labels["app"] == "" || got[0].Namespace != "a" || got[1].Namespace != "a" {
		t.Fatalf("PVCs(a) = %+v, want db and wal with their labels", got)
	}
}

// An annotation patch carries any value intact, quotes included, and
// nothing but the annotations.
func TestAnnotationsPatch(t *testing.T) {
	p, err := AnnotationsPatch(map[string]string{"snapflow.dev/why": `said "stop"`})
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.Data(nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), `{"metadata":{"annotations":{"snapflow.dev/why":"said \"stop\""}}}`; got != want || p.Type() != types.MergePatchType {
		t.Fatalf("patch %s (%s), want %s as a merge patch", got, p.Type(), want)
	}
}
