package egress

import (
	"net/netip"
	"strings"
	"testing"
)

func TestPolicy(t *testing.T) {
	deny, err := ParsePrefixes("--hook-deny-cidr", []string{"10.96.0.0/12", "10.244.0.0/16", " ", "fd12::1"})
	if err != nil {
		t.Fatal(err)
	}
	allow, _ := ParsePrefixes("--hook-allow-cidr", []string{"10.96.0.10"})
	p := Policy{Deny: deny, Allow: allow, Namespace: "snapflow-system"}
	tests := []struct {
		host string
		why  string // "" allowed
	}{
		{"hooks.example.com", ""},
		{"203.0.113.7", ""},
		{"127.0.0.1", "loopback"},
		{"127.8.9.10", "loopback"},
		{"[::1]", "loopback"},
		{"::ffff:127.0.0.1", "loopback"},
		{"169.254.169.254", "cloud metadata"},
		{"fd00:ec2::254", "cloud metadata"},
		{"100.100.100.200", "cloud metadata"},
		{"0.0.0.0", "unspecified"},
		{"224.0.0.1", "multicast"},
		{"10.100.3.4", "10.96.0.0/12"},
		{"10.244.1.1", "10.244.0.0/16"},
		{"fd12::1", "fd12::1/128"},
		{"10.96.0.10", ""}, // the operator's exception
		{"10.20.0.1", ""},  // a private address the operator did not list
		{"localhost", "the node itself"},
		{"LOCALHOST.", "the node itself"},
		{"api.localhost", "the node itself"},
		{"kubernetes", "single-label"},
		{"snapflow-functions", "single-label"},
		{"fe80::1%eth0", "link-local"},
		{"::1%lo", "loopback"},
		{"64:ff9b::7f00:1", "through NAT64"},
		{"64:ff9b::a9fe:a9fe", "cloud metadata"},
		{"64:ff9b::cb00:7107", ""},
		{"10-1-2-3.snapflow-system.pod.cluster.local", "snapflow's own namespace"},
		{"pod-0.functions.snapflow-system.svc.cluster.local", "snapflow's own namespace"},
		{"kubernetes.default", "API server"},
		{"kubernetes.default.svc.cluster.local", "API server"},
		{"snapflow-functions.snapflow-system", "snapflow's own namespace"},
		{"snapflow-functions.snapflow-system.svc", "snapflow's own namespace"},
		{"snapflow-functions.snapflow-system.svc.cluster.local.", "snapflow's own namespace"},
		{"snapflow-system.example.com", ""},
		{"app.snapflow-system.example.com", ""},
		{"hook.tenant-a.svc.cluster.local", ""},
	}
	for _, tt := range tests {
		err := p.CheckHost(tt.host)
		if tt.why == "" {
			if err != nil {
				t.Errorf("%s: refused (%v), want allowed", tt.host, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.why) {
			t.Errorf("%s: err %v, want one naming %q", tt.host, err, tt.why)
		}
	}
	if err := (Policy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}).CheckAddr(netip.MustParseAddr("127.0.0.1")); err != nil {
		t.Errorf("an allowed loopback address was refused: %v", err)
	}
	if _, err := ParsePrefixes("--hook-deny-cidr", []string{"10.96.0.0/33"}); err == nil || !strings.Contains(err.Error(), "--hook-deny-cidr") {
		t.Errorf("a bad CIDR: err %v, want one naming the flag", err)
	}
}
