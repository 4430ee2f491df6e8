// Package egress decides where an httpRequest hook may connect. The
// snapshot function makes the call from snapflow's own namespace, which
// network policies may trust, so a tenant's URL must not reach the node's
// loopback, the cloud metadata endpoints, snapflow's own services or the
// ranges the operator lists (the cluster's service and pod networks). The
// check runs on the address actually dialled, after DNS, so a name that
// resolves into a refused range is refused too. It is pure: no resolver,
// no clock.
package egress

import (
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// MaxTimeout caps an httpRequest hook: the snapshot run waits on it.
const MaxTimeout = 10 * time.Minute

// builtin are refused whatever the operator lists: loopback, link-local
// (the metadata endpoints of most clouds live there), unspecified,
// multicast, and the metadata addresses outside link-local.
var builtin = []struct {
	prefix netip.Prefix
	why    string
}{
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local (cloud metadata)"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("0.0.0.0/8"), "unspecified"},
	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
	{netip.MustParsePrefix("fd00:ec2::254/128"), "cloud metadata"},
	{netip.MustParsePrefix("100.100.100.200/32"), "cloud metadata"},
}

// nat64 is the well-known NAT64 prefix (RFC 6052).
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// Policy is where hooks may not connect.
type Policy struct {
	// Deny are the operator's refused ranges: the cluster's service and pod
	// networks, anything else snapflow must not be used to reach.
	Deny []netip.Prefix
	// Allow are exceptions that win over every denial (a hook receiver the
	// operator runs on the node, or a test server).
	Allow []netip.Prefix
	// Namespace is snapflow's own: names of its Services are refused.
	Namespace string
}

// ParsePrefixes reads CIDRs (or single addresses) as a flag gives them.
func ParsePrefixes(flag string, vals []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, v := range vals {
		v = strings.TrimSpace(v)
		if v == "" {
			continue
		}
		p, err := netip.ParsePrefix(v)
		if err != nil {
			a, aerr := netip.ParseAddr(v)
			if aerr != nil {
				return nil, fmt.Errorf("%s %q: want a CIDR such as 10.96.0.0/12 or an address: %w", flag, v, err)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// CheckAddr refuses an address in a refused range, saying which.
func (p Policy) CheckAddr(a netip.Addr) error {
	// A zone (fe80::1%eth0) would make every prefix miss.
	a = a.Unmap().WithZone("")
	if nat64.Contains(a) {
		// NAT64 reaches the IPv4 address it embeds: judge that one.
		b := a.As16()
		if err := p.CheckAddr(netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})); err != nil {
			return fmt.Errorf("%s (through NAT64 %s)", err, a)
		}
	}
	for _, al := range p.Allow {
		if al.Contains(a) {
			return nil
		}
	}
	for _, b := range builtin {
		if b.prefix.Contains(a) {
			return fmt.Errorf("hooks may not connect to %s: it is %s", a, b.why)
		}
	}
	for _, d := range p.Deny {
		if d.Contains(a) {
			return fmt.Errorf("hooks may not connect to %s: it is in %s, a range the operator refuses (the cluster's own networks)", a, d)
		}
	}
	return nil
}

// CheckHost refuses, by name, hosts that are the node itself, the API
// server, or a Service of snapflow's namespace. A literal address is
// checked as an address. Names that pass are checked again once resolved.
func (p Policy) CheckHost(host string) error {
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return p.CheckAddr(a)
	}
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return fmt.Errorf("hooks may not connect to %s: it is the node itself", host)
	}
	labels := strings.Split(h, ".")
	if len(labels) == 1 {
		// A bare name resolves through the caller's search path, that is
		// into snapflow's own namespace first.
		return fmt.Errorf("hooks may not connect to %s: a single-label name resolves in snapflow's own namespace; use a fully qualified name such as <service>.<namespace>.svc", host)
	}
	// Cluster DNS names of a namespace: <svc>.<ns>, <svc>.<ns>.svc…,
	// <pod>.<svc>.<ns>.svc… (headless) and <ip>.<ns>.pod….
	inNamespace := func(ns string) bool {
		for i := 1; i < len(labels); i++ {
			if labels[i] == ns && (i == len(labels)-1 || labels[i+1] == "svc" || labels[i+1] == "pod") {
				return true
			}
		}
		return false
	}
	if labels[0] == "kubernetes" && inNamespace("default") {
		return fmt.Errorf("hooks may not connect to %s: it is the Kubernetes API server", host)
	}
	if p.Namespace != "" && inNamespace(p.Namespace) {
		return fmt.Errorf("hooks may not connect to %s: it is in snapflow's own namespace %s", host, p.Namespace)
	}
	return nil
}
