package privilege

import (
	corev1 "k8s.io/api/core/v1"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
)

// DefaultUID is the mover's identity unless its settings say otherwise.
const DefaultUID = int64(65532)

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
	if src.SELinuxChangePolicy != nil {
		dst.SELinuxChangePolicy = src.SELinuxChangePolicy
	}
	if src.SupplementalGroupsPolicy != nil {
		dst.SupplementalGroupsPolicy = src.SupplementalGroupsPolicy
	}
	if src.AppArmorProfile != nil {
		dst.AppArmorProfile = src.AppArmorProfile
	}
	if src.Sysctls != nil {
		dst.Sysctls = src.Sysctls
	}
	if src.WindowsOptions != nil {
		dst.WindowsOptions = src.WindowsOptions
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
		// Adding a capability keeps the rest dropped: only a layer that
		// sets drop itself (even to []) replaces the hardened drop list.
		caps := &corev1.Capabilities{Add: src.Capabilities.Add, Drop: src.Capabilities.Drop}
		if caps.Drop == nil && dst.Capabilities != nil {
			caps.Drop = dst.Capabilities.Drop
		}
		dst.Capabilities = caps
	}
	if src.SeccompProfile != nil {
		dst.SeccompProfile = src.SeccompProfile
	}
	if src.SELinuxOptions != nil {
		dst.SELinuxOptions = src.SELinuxOptions
	}
	if src.AppArmorProfile != nil {
		dst.AppArmorProfile = src.AppArmorProfile
	}
	if src.ProcMount != nil {
		dst.ProcMount = src.ProcMount
	}
	if src.WindowsOptions != nil {
		dst.WindowsOptions = src.WindowsOptions
	}
}

func ptr[T any](v T) *T { return &v }
