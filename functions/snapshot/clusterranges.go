package snapshot

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/snapflow/snapflow/internal/egress"
)

// clusterRangesTTL bounds how stale the discovered networks may be: a new
// node's pod range is refused within it.
const clusterRangesTTL = time.Minute

// clusterRanges caches the cluster's own networks for hook egress.
type clusterRanges struct {
	mu       sync.Mutex
	at       time.Time
	prefixes []netip.Prefix
}

// clusterDeny discovers the networks an httpRequest hook may not reach
// without the operator listing them: every ServiceCIDR (the cluster's
// Service ranges, the API server's address among them), each node's pod
// ranges and each node's own addresses (the kubelet listens there). A
// cluster without the ServiceCIDR API (before Kubernetes 1.33) has only the
// operator's list for its Service range.
func (f *Function) clusterDeny(ctx context.Context) ([]netip.Prefix, error) {
	f.ranges.mu.Lock()
	defer f.ranges.mu.Unlock()
	if now := f.now(); !f.ranges.at.IsZero() && now.Sub(f.ranges.at) < clusterRangesTTL {
		return f.ranges.prefixes, nil
	}
	// The watch cache answers: a minute's staleness is already accepted.
	cached := &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: "0"}}
	var cidrs []string
	var svc networkingv1.ServiceCIDRList
	switch err := f.Client.List(ctx, &svc, cached); {
	case meta.IsNoMatchError(err):
	case err != nil:
		return nil, fmt.Errorf("list the cluster's ServiceCIDRs: %w", err)
	default:
		for _, s := range svc.Items {
			cidrs = append(cidrs, s.Spec.CIDRs...)
		}
	}
	var nodes corev1.NodeList
	if err := f.Client.List(ctx, &nodes, cached); err != nil {
		return nil, fmt.Errorf("list the cluster's nodes: %w", err)
	}
	for _, n := range nodes.Items {
		cidrs = append(cidrs, n.Spec.PodCIDRs...)
		if n.Spec.PodCIDR != "" {
			cidrs = append(cidrs, n.Spec.PodCIDR)
		}
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP || a.Type == corev1.NodeExternalIP {
				cidrs = append(cidrs, a.Address)
			}
		}
	}
	var prefixes []netip.Prefix
	for _, c := range cidrs {
		// One malformed entry must not hide the others.
		if p, err := egress.ParsePrefixes("", []string{c}); err == nil {
			prefixes = append(prefixes, p...)
		}
	}
	f.ranges.at, f.ranges.prefixes = f.now(), prefixes
	return prefixes, nil
}
