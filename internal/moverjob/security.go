package moverjob

import (
	corev1 "k8s.io/api/core/v1"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
)

// SecurityContexts merges the mover's pod and container security contexts:
// hardened defaults, then the repository's moverDefaults, then the policy's
// explicit mover settings; a later layer's set fields win.
func SecurityContexts(d *snapv1.MoverDefaults, m *snapv1.MoverSpec) (*corev1.PodSecurityContext, *corev1.SecurityContext) {
	uid := DefaultUID
	pod := &corev1.PodSecurityContext{
		RunAsUser: &uid, RunAsGroup: &uid, FSGroup: &uid, RunAsNonRoot: ptr(true),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	c := &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr(false),
		ReadOnlyRootFilesystem:   ptr(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
	if d != nil {
		mergePod(pod, d.PodSecurityContext)
		mergeContainer(c, d.SecurityContext)
	}
	if m != nil {
		mergePod(pod, m.PodSecurityContext)
		mergeContainer(c, m.SecurityContext)
		if m.PrivilegedMode {
			root := int64(0)
			pod.RunAsUser, pod.RunAsGroup, pod.RunAsNonRoot = &root, &root, ptr(false)
			c.Privileged, c.AllowPrivilegeEscalation = ptr(true), ptr(true)
			c.Capabilities = nil
		}
	}
	return pod, c
}

// Privileged says whether the effective contexts need the namespace opt-in:
// running as root, privileged, or with privilege escalation.
func Privileged(pod *corev1.PodSecurityContext, c *corev1.SecurityContext) bool {
	isRoot := func(u *int64) bool { return u != nil && *u == 0 }
	return isRoot(pod.RunAsUser) || isRoot(c.RunAsUser) ||
		(c.Privileged != nil && *c.Privileged) ||
		(c.AllowPrivilegeEscalation != nil && *c.AllowPrivilegeEscalation)
}

func mergePod(dst, src *corev1.PodSecurityContext) {
	if src == nil {
		return
	}
	if src.RunAsUser != nil {
		dst.RunAsUser = src.RunAsUser
		if *src.RunAsUser == 0 && src.RunAsNonRoot == nil {
			dst.RunAsNonRoot = ptr(false)
		}
	}
	if src.RunAsGroup != nil {
		dst.RunAsGroup = src.RunAsGroup
	}
	if src.FSGroup != nil {
		dst.FSGroup = src.FSGroup
	}
	if src.RunAsNonRoot != nil {
		dst.RunAsNonRoot = src.RunAsNonRoot
	}
	if src.SeccompProfile != nil {
		dst.SeccompProfile = src.SeccompProfile
	}
	if src.SupplementalGroups != nil {
		dst.SupplementalGroups = src.SupplementalGroups
	}
	if src.FSGroupChangePolicy != nil {
		dst.FSGroupChangePolicy = src.FSGroupChangePolicy
	}
	if src.SELinuxOptions != nil {
		dst.SELinuxOptions = src.SELinuxOptions
	}
}

func mergeContainer(dst, src *corev1.SecurityContext) {
	if src == nil {
		return
	}
	if src.RunAsUser != nil {
		dst.RunAsUser = src.RunAsUser
	}
	if src.RunAsGroup != nil {
		dst.RunAsGroup = src.RunAsGroup
	}
	if src.RunAsNonRoot != nil {
		dst.RunAsNonRoot = src.RunAsNonRoot
	}
	if src.Privileged != nil {
		dst.Privileged = src.Privileged
	}
	if src.AllowPrivilegeEscalation != nil {
		dst.AllowPrivilegeEscalation = src.AllowPrivilegeEscalation
	}
	if src.ReadOnlyRootFilesystem != nil {
		dst.ReadOnlyRootFilesystem = src.ReadOnlyRootFilesystem
	}
	if src.Capabilities != nil {
		dst.Capabilities = src.Capabilities
	}
	if src.SeccompProfile != nil {
		dst.SeccompProfile = src.SeccompProfile
	}
}

func ptr[T any](v T) *T { return &v }
