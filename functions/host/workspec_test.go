package host

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestCreateWorkSpecReplacesAStaleOne(t *testing.T) {
	ctx := context.Background()
	spec := func(owner, data string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "run-1",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "X", Name: "x", UID: types.UID("u-" + owner)}}},
			Data: map[string]string{"work.json": data}}
	}
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(spec("a", "old")).Build()
	for _, tc := range []struct {
		cm      *corev1.ConfigMap
		want    string
		problem string
	}{
		{spec("a", "old"), "old", ""},                    // a redelivery: nothing to do
		{spec("a", "new"), "new", ""},                    // an earlier attempt's: replaced
		{spec("b", "other"), "new", "is not this run's"}, // someone else's: left alone
	} {
		err := CreateWorkSpec(ctx, c, tc.cm)
		if (tc.problem == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.problem)) {
			t.Fatalf("%s: %v, want %q", tc.cm.Data["work.json"], err, tc.problem)
		}
		var got corev1.ConfigMap
		if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "run-1"}, &got); err != nil || got.Data["work.json"] != tc.want {
			t.Fatalf("after %s: %v %v, want %s", tc.cm.Data["work.json"], got.Data, err, tc.want)
		}
	}
}
