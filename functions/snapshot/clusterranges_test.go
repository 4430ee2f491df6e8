package snapshot

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/internal/scheme"
)

// Hooks are kept off the Service ranges, node pod ranges and node
// addresses the API server lists, refreshed once a minute; while those
// cannot be read, hooks are refused rather than let through unchecked.
func TestClusterRangesDenyHooks(t *testing.T) {
	ctx := context.Background()
	cidr := &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes"}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.96.0.0/12", "fd00:10:96::/112"}}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: corev1.NodeSpec{PodCIDRs: []string{"10.244.1.0/24"}},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.168.1.10"}, {Type: corev1.NodeHostName, Address: "n1"}}}}
	var fail error
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(cidr, node).WithInterceptorFuncs(interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if fail != nil {
				return fail
			}
			return c.List(ctx, list, opts...)
		}}).Build()
	now := time.Date(2026, 12, 4, 3, 0, 0, 0, time.UTC)
	f := &Function{Client: c, Namespace: "snapflow", Now: func() time.Time { return now }}

	pol, err := f.hookEgress(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"10.96.0.1", "fd00:10:96::1", "10.244.1.7", "192.168.1.10"} {
		if pol.CheckAddr(netip.MustParseAddr(a)) == nil {
			t.Errorf("%s should be refused: %v", a, pol.Deny)
		}
	}
	if err := pol.CheckAddr(netip.MustParseAddr("203.0.113.5")); err != nil {
		t.Errorf("an outside address: %v", err)
	}

	// Within the minute the cached ranges answer, even if the API fails.
	fail = apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "", errors.New("no"))
	if _, err := f.hookEgress(ctx); err != nil {
		t.Fatalf("cached ranges: %v", err)
	}
	now = now.Add(2 * clusterRangesTTL)
	if _, err := f.hookEgress(ctx); err == nil || !apierrors.IsForbidden(err) {
		t.Fatalf("unreadable ranges must refuse hooks, got %v", err)
	}
	ok, msg := f.httpHook(ctx, &snapv1.HTTPRequestHook{URL: "https://hooks.example.com/freeze"})
	if ok || !strings.Contains(msg, "cluster's networks") {
		t.Fatalf("a hook ran while the ranges were unreadable: %v %q", ok, msg)
	}
}
