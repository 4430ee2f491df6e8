// Package identity resolves the kopia identity (username@hostname:path) a
// SnapshotPolicy writes under, and checks that its parts survive kopia's
// parser, which splits on the first '@' and the first ':' with no escaping.
package identity

import (
	"fmt"
	"strings"
	"unicode"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/expr"
)

// MaxComponentLen bounds a username or hostname in bytes.
const MaxComponentLen = 253

// ComponentProblem says why v cannot be a kopia username or hostname, or "" when it can.
func ComponentProblem(v string) string {
	switch {
	case v == "":
		return "must not be empty"
	case len(v) > MaxComponentLen:
		return fmt.Sprintf("must be at most %d bytes (got %d)", MaxComponentLen, len(v))
	case strings.Contains(v, "@"):
		return "must not contain '@' (kopia's username/hostname delimiter)"
	case strings.Contains(v, ":"):
		return "must not contain ':' (kopia's hostname/path delimiter)"
	}
	for _, r := range v {
		if r < 0x80 && unicode.IsSpace(r) {
			return "must not contain whitespace"
		}
		if r < 0x20 || r == 0x7f {
			return "must not contain control characters"
		}
	}
	return ""
}

// SourcePathProblem says why v cannot be a kopia source path, or "".
// Spaces and ':' are fine in a path; control characters and emptiness are not.
func SourcePathProblem(v string) string {
	if v == "" {
		return "must not be empty"
	}
	for _, r := range v {
		if r < 0x20 || r == 0x7f {
			return "must not contain control characters"
		}
	}
	return ""
}

// Identity is a resolved username and hostname.
type Identity struct {
	Username string
	Hostname string
}

// String is kopia's username@hostname form.
func (i Identity) String() string { return i.Username + "@" + i.Hostname }

// Resolve computes a policy's identity under a repository's identityDefaults
// (nil when the repository sets none). An explicit spec.identity part always wins.
func Resolve(p *snapv1.SnapshotPolicy, defaults *snapv1.IdentityDefaults) (Identity, error) {
	var id Identity
	if p.Spec.Identity != nil {
		id.Username, id.Hostname = p.Spec.Identity.Username, p.Spec.Identity.Hostname
	}
	var cluster string
	if defaults != nil {
		cluster = defaults.Cluster
	}
	vars := map[string]any{
		"namespace":   p.Namespace,
		"policyName":  p.Name,
		"labels":      nonNil(p.Labels),
		"annotations": nonNil(p.Annotations),
		"cluster":     cluster,
	}
	eval := func(src, what string) (string, error) {
		prg, err := expr.Identity.Compile(src)
		if err != nil {
			return "", fmt.Errorf("identityDefaults.%s %w", what, err)
		}
		v, err := prg.EvalString(vars)
		if err != nil {
			return "", fmt.Errorf("identityDefaults.%s: %w", what, err)
		}
		return v, nil
	}
	var err error
	if id.Username == "" {
		id.Username = p.Name
		if defaults != nil && defaults.UsernameExpr != "" {
			if id.Username, err = eval(defaults.UsernameExpr, "usernameExpr"); err != nil {
				return Identity{}, err
			}
		}
	}
	if id.Hostname == "" {
		id.Hostname = p.Namespace
		if cluster != "" {
			id.Hostname += "." + cluster
		}
		if defaults != nil && defaults.HostnameExpr != "" {
			if id.Hostname, err = eval(defaults.HostnameExpr, "hostnameExpr"); err != nil {
				return Identity{}, err
			}
		}
	}
	if pr := ComponentProblem(id.Username); pr != "" {
		return Identity{}, fmt.Errorf("resolved username %q is not a valid kopia identity component: %s", id.Username, pr)
	}
	if pr := ComponentProblem(id.Hostname); pr != "" {
		return Identity{}, fmt.Errorf("resolved hostname %q is not a valid kopia identity component: %s", id.Hostname, pr)
	}
	return id, nil
}

// NFSSourcePath is the kopia path of an nfs source: the export path, as
// the guide says, unless sourcePathOverride replaces it.
func NFSSourcePath(src snapv1.Source) string {
	if src.SourcePathOverride != nil {
		return *src.SourcePathOverride
	}
	if src.NFS == nil {
		return ""
	}
	return src.NFS.Path
}

// StreamSourcePath is the kopia path of a stream source: /stream/<fileName>,
// unless sourcePathOverride replaces it. The snapshot's one file is
// fileName, inside that path.
func StreamSourcePath(src snapv1.Source) string {
	if src.SourcePathOverride != nil {
		return *src.SourcePathOverride
	}
	if src.Stream == nil {
		return ""
	}
	return "/stream/" + src.Stream.FileName
}

// PVCSourcePath is the kopia path of a PVC source.
func PVCSourcePath(src snapv1.Source, namespace, pvc string) string {
	if src.SourcePathOverride != nil {
		return *src.SourcePathOverride
	}
	if src.SourcePathStrategy == snapv1.SourcePathPvcNamespacedName {
		return "/pvc/" + namespace + "/" + pvc
	}
	return "/pvc/" + pvc
}

func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// HostNamespace is the namespace a kopia hostname belongs to: the part
// before its first '.', as a default hostname is <namespace> or
// <namespace>.<cluster>.
func HostNamespace(hostname string) string {
	ns, _, _ := strings.Cut(hostname, ".")
	return ns
}

// NamespaceBound says whether consumers of a repository may touch only
// their own namespace's snapshots in it: a ClusterRepository is shared by
// namespaces and is bound unless annotated as Shared; a Repository belongs
// to one namespace and is not.
func NamespaceBound(kind snapv1.RepositoryKind, annotations map[string]string) bool {
	return kind == snapv1.KindClusterRepository && strings.TrimSpace(annotations[wellknown.AnnotationIdentityScope]) != wellknown.IdentityScopeShared
}

// OwnerProblem says why a snapshot under hostname is not namespace ns's
// to write, read or delete in a namespace-bound repository, or "".
func OwnerProblem(hostname, ns string) string {
	if HostNamespace(hostname) == ns {
		return ""
	}
	return fmt.Sprintf("kopia hostname %q belongs to namespace %q, not %q: in a ClusterRepository shared by namespaces each namespace may touch only snapshots under its own hostname (%q, or %q followed by '.' and a suffix); annotate the ClusterRepository %s=%s only if all its namespaces may read and delete one another's backups",
		hostname, HostNamespace(hostname), ns, ns, ns, wellknown.AnnotationIdentityScope, wellknown.IdentityScopeShared)
}
