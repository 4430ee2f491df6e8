// Package prune is the pure decision kernel of the orphan-pruning tool for
// KubeBlocks backup data in S3 (kbbackup-prune). It classifies what a bucket
// listing holds against a Kubernetes inventory and decides what may be
// deleted. It performs no IO and reads no clock: adapters pass the inventory,
// the listing and the plan time in, and carry out the decisions.
package prune

import (
	"path"
	"strings"
)

// NormalizeKey trims whitespace, resolves ".", ".." and "//", and drops the
// leading and trailing "/". ok is false when ".." would climb above the bucket
// root: such a key cannot be placed, so callers must not trust it.
func NormalizeKey(s string) (key string, ok bool) {
	if k, clean := normalFast(s); clean {
		return k, true
	}
	s = strings.TrimSpace(s)
	if s == "" {
		return "", true
	}
	c := path.Clean("/" + s)
	// path.Clean on a rooted path silently drops a leading "..", so detect an
	// escape on the unrooted form instead.
	if rel := path.Clean(s); rel == ".." || strings.HasPrefix(rel, "../") {
		return "", false
	}
	return strings.Trim(c, "/"), true
}

// normalFast returns NormalizeKey(s) without allocating when s is already
// in normal form, save at most one trailing "/": listings are almost all
// such keys, and path.Clean allocates for every one.
func normalFast(s string) (string, bool) {
	if s == "" {
		return "", true
	}
	if c := s[0]; c == '/' || c <= ' ' || c >= 0x80 {
		return "", false
	}
	end := len(s)
	if s[end-1] == '/' {
		end--
	}
	if c := s[end-1]; c <= ' ' || c >= 0x80 || c == '/' {
		return "", false
	}
	start := 0
	for i := 0; i <= end; i++ {
		if i < end && s[i] != '/' {
			continue
		}
		switch s[start:i] {
		case "", ".", "..":
			return "", false
		}
		start = i + 1
	}
	return s[:end], true
}

// CleanKey is NormalizeKey for callers that treat an unplaceable key as empty.
func CleanKey(s string) string {
	k, _ := NormalizeKey(s)
	return k
}

// Contains reports whether prefix p contains key k by whole segments: p is
// empty, k equals p, or k starts with p followed by "/".
func Contains(p, k string) bool {
	return p == "" || k == p || (len(k) > len(p) && k[len(p)] == '/' && strings.HasPrefix(k, p))
}

// Overlaps reports whether either prefix contains the other.
func Overlaps(a, b string) bool { return Contains(a, b) || Contains(b, a) }

// StrictlyInside reports whether inner lies below outer and differs from it.
func StrictlyInside(outer, inner string) bool { return inner != outer && Contains(outer, inner) }

// JoinKey joins normalised key parts, skipping empty ones.
func JoinKey(parts ...string) string {
	var b strings.Builder
	for _, p := range parts {
		if p == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('/')
		}
		b.WriteString(p)
	}
	return b.String()
}

// firstSegment returns the first "/"-separated segment of a normalised key.
func firstSegment(k string) string {
	if i := strings.IndexByte(k, '/'); i >= 0 {
		return k[:i]
	}
	return k
}

// parentKey returns the key without its last segment ("" at the top).
func parentKey(k string) string {
	if i := strings.LastIndexByte(k, '/'); i >= 0 {
		return k[:i]
	}
	return ""
}

// baseName returns the last segment of a normalised key.
func baseName(k string) string { return k[strings.LastIndexByte(k, '/')+1:] }

// relSegments splits the part of k below prefix p into segments.
func relSegments(p, k string) []string {
	if !StrictlyInside(p, k) {
		return nil
	}
	rest := k
	if p != "" {
		rest = k[len(p)+1:]
	}
	return strings.Split(rest, "/")
}

// IsCanonicalUUID reports whether s is a 36-character lower-case hyphenated
// UUID, which is the only form that equals its own canonical rendering.
func IsCanonicalUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return false
			}
		}
	}
	return true
}

// IsCanonicalRoot reports whether seg is a canonical pvc root:
// "pvc-" followed by a canonical UUID and nothing else.
func IsCanonicalRoot(seg string) bool {
	return strings.HasPrefix(seg, "pvc-") && IsCanonicalUUID(seg[4:])
}

// IsDNSLabel reports whether s is a DNS-1123 label.
func IsDNSLabel(s string) bool { return len(s) <= 63 && labelChars(s) }

// labelChars checks the label alphabet and hyphen placement, without a length
// limit: subdomain parts follow the same pattern but only the whole subdomain
// is bounded (253).
func labelChars(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !alnum && (c != '-' || i == 0 || i == len(s)-1) {
			return false
		}
	}
	return true
}

// IsDNSSubdomain reports whether s is a DNS-1123 subdomain.
func IsDNSSubdomain(s string) bool {
	if len(s) == 0 || len(s) > 253 {
		return false
	}
	for _, l := range strings.Split(s, ".") {
		if !labelChars(l) {
			return false
		}
	}
	return true
}

// ParseClusterDir splits a Mount-mode cluster directory name
// "<clusterName>-<clusterUUID>". ok is false unless the name is longer
// than 37 characters, has "-" at len-37, ends in a canonical UUID and has a
// non-empty cluster name.
func ParseClusterDir(name string) (clusterName, uid string, ok bool) {
	n := len(name)
	if n <= 37 || name[n-37] != '-' || !IsCanonicalUUID(name[n-36:]) || strings.Contains(name, "/") {
		return "", "", false
	}
	return name[:n-37], name[n-36:], true
}
