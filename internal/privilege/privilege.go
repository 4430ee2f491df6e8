// Package privilege is snapflow's one privilege gate: it reads the pod a
// mover run would create and lists everything in it that goes beyond an
// ordinary restricted pod. Admission warns with the same list and every
// mover Job is refused with it unless its namespace has opted in, so what
// the webhook says and what a run does cannot drift apart.
package privilege

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
)

// ErrNotPermitted is wrapped by every NotPermitted error.
var ErrNotPermitted = errors.New("mover not permitted")

// NotPermitted refuses a pod that needs the namespace's opt-in.
type NotPermitted struct {
	Namespace string
	Reasons   []string
}

func (e *NotPermitted) Error() string {
	return fmt.Sprintf("the mover would run with elevated privileges (%s); annotate namespace %s with %s=\"true\" to allow it, or remove those settings",
		strings.Join(e.Reasons, "; "), e.Namespace, wellknown.AnnotationPrivilegedMovers)
}

func (e *NotPermitted) Unwrap() error { return ErrNotPermitted }

// Trusted names what a pod may use without the opt-in because the cluster
// administrator, not a tenant, chose it.
type Trusted struct {
	// HostPaths are node paths the pod may mount: the bare-path
	// filesystem backend of a ClusterRepository.
	HostPaths []string
	// NFS are the exports ("server:path") the pod may mount directly: the
	// NFS filesystem backend of a ClusterRepository.
	NFS []string
}

// Pod lists, in a stable order, each setting of spec that needs the
// namespace's privileged-movers opt-in; empty means the pod is an ordinary
// one. It reads the pod as the kubelet will run it, so a later layer of
// settings cannot hide an earlier one.
func Pod(spec *corev1.PodSpec, trusted Trusted) []string {
	var r reasons
	if spec.HostNetwork || spec.HostPID || spec.HostIPC {
		r.add("shares the node's network, PID or IPC namespace")
	}
	if psc := spec.SecurityContext; psc != nil {
		if w := psc.WindowsOptions; w != nil && w.HostProcess != nil && *w.HostProcess {
			r.add("pod runs as a Windows host process")
		}
		r.uid("pod", psc.RunAsUser, psc.RunAsNonRoot)
		r.seLinux("pod", psc.SELinuxOptions)
		r.seccomp("pod", psc.SeccompProfile)
		r.appArmor("pod", psc.AppArmorProfile)
		for _, s := range psc.Sysctls {
			if !slices.Contains(safeSysctls, s.Name) {
				r.add(fmt.Sprintf("sets the unsafe sysctl %s", s.Name))
			}
		}
	}
	for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
		for _, p := range c.Ports {
			if p.HostPort != 0 {
				r.add(fmt.Sprintf("container %s binds the node's port %d", c.Name, p.HostPort))
			}
		}
		sc := c.SecurityContext
		if sc == nil {
			continue
		}
		where := "container " + c.Name
		r.uid(where, sc.RunAsUser, sc.RunAsNonRoot)
		if sc.Privileged != nil && *sc.Privileged {
			r.add(where + " is privileged")
		}
		if sc.AllowPrivilegeEscalation != nil && *sc.AllowPrivilegeEscalation {
			r.add(where + " allows privilege escalation")
		}
		if caps := sc.Capabilities; caps != nil {
			var added []string
			for _, c := range caps.Add {
				if c != "NET_BIND_SERVICE" {
					added = append(added, string(c))
				}
			}
			if len(added) > 0 {
				r.add(fmt.Sprintf("%s adds the capabilities %s", where, strings.Join(added, ", ")))
			}
		}
		if w := sc.WindowsOptions; w != nil && w.HostProcess != nil && *w.HostProcess {
			r.add(where + " runs as a Windows host process")
		}
		if sc.ProcMount != nil && *sc.ProcMount == corev1.UnmaskedProcMount {
			r.add(where + " unmasks /proc")
		}
		r.seLinux(where, sc.SELinuxOptions)
		r.seccomp(where, sc.SeccompProfile)
		r.appArmor(where, sc.AppArmorProfile)
	}
	for _, v := range spec.Volumes {
		switch {
		case v.HostPath != nil:
			if !slices.Contains(trusted.HostPaths, v.HostPath.Path) {
				r.add(fmt.Sprintf("mounts the node path %s (a bare-path filesystem backend on a namespaced Repository)", v.HostPath.Path))
			}
		case v.NFS != nil:
			// The node mounts the export with its own identity, so any
			// export the nodes can reach would be open to a tenant.
			if nfs := v.NFS; !slices.Contains(trusted.NFS, nfs.Server+":"+nfs.Path) {
				r.add(fmt.Sprintf("mounts the NFS export %s:%s directly, with the node's identity (an nfs source, or an NFS filesystem backend on a namespaced Repository)", nfs.Server, nfs.Path))
			}
		case !restrictedVolume(v.VolumeSource):
			// Pod Security's restricted level allows only these; the rest
			// (iSCSI, RBD, CephFS, gitRepo, flexVolume...) reach storage or
			// run code with the node's identity.
			r.add(fmt.Sprintf("mounts volume %s of a kind Pod Security's restricted level forbids (allowed: configMap, csi, downwardAPI, emptyDir, ephemeral, persistentVolumeClaim, projected, secret)", v.Name))
		}
	}
	return r
}

// restrictedVolume says whether Pod Security's restricted level allows v.
func restrictedVolume(v corev1.VolumeSource) bool {
	return v.ConfigMap != nil || v.CSI != nil || v.DownwardAPI != nil || v.EmptyDir != nil || v.Ephemeral != nil ||
		v.PersistentVolumeClaim != nil || v.Projected != nil || v.Secret != nil
}

// RunJob lists what a runJob hook's pod needs the opt-in for.
func RunJob(t *corev1.PodTemplateSpec) []string {
	return append(Pod(&t.Spec, Trusted{}), Annotations(t.Annotations)...)
}

// Annotations lists the pod annotations that switch a confinement off:
// the legacy AppArmor and seccomp keys, which the API server still turns
// into the pod's fields.
func Annotations(ann map[string]string) []string {
	var r reasons
	keys := slices.Sorted(maps.Keys(ann))
	for _, k := range keys {
		v := strings.ToLower(ann[k])
		switch {
		case strings.HasPrefix(k, "container.apparmor.security.beta.kubernetes.io/") && v == "unconfined":
			r.add("annotation " + k + " runs without AppArmor")
		case (k == "seccomp.security.alpha.kubernetes.io/pod" || strings.HasPrefix(k, "container.seccomp.security.alpha.kubernetes.io/")) && v == "unconfined":
			r.add("annotation " + k + " runs without seccomp")
		}
	}
	return r
}

// Mover lists what the mover settings of a policy or restore (m) or of a
// repository (d, with repo the volume of a namespaced Repository's
// filesystem backend, see RepositoryVolume) need the opt-in for, on the pod
// those settings give. Admission warns with it; runs are gated on the whole
// pod.
func Mover(d *snapv1.MoverDefaults, m *snapv1.MoverSpec, repo *corev1.VolumeSource) []string {
	podSC, sc := SecurityContexts(d, m)
	spec := &corev1.PodSpec{SecurityContext: podSC, Containers: []corev1.Container{{Name: "mover", SecurityContext: sc}}}
	if repo != nil {
		spec.Volumes = []corev1.Volume{{Name: "repository", VolumeSource: *repo}}
	}
	out := Pod(spec, Trusted{})
	if d != nil {
		out = append(out, Annotations(d.PodAnnotations)...)
	}
	return out
}

// Export lists what mounting an nfs source's export needs the opt-in
// for. A tenant names the export, so it is never trusted: the node would
// mount it with its own identity.
func Export(nfs *snapv1.NFSExport) []string {
	if nfs == nil {
		return nil
	}
	v := corev1.Volume{Name: "source", VolumeSource: corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{Server: nfs.Server, Path: nfs.Path, ReadOnly: true}}}
	return Pod(&corev1.PodSpec{Volumes: []corev1.Volume{v}}, Trusted{})
}

// RepositoryVolume is the volume a mover mounts for a filesystem backend
// that the gate reads: a bare node path or an NFS export (nil for a PVC or
// another backend).
func RepositoryVolume(fs *snapv1.FilesystemBackend) *corev1.VolumeSource {
	switch {
	case fs == nil:
		return nil
	case fs.Volume == nil:
		return &corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: fs.Path}}
	case fs.Volume.NFS != nil:
		return &corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{Server: fs.Volume.NFS.Server, Path: fs.Volume.NFS.Path}}
	}
	return nil
}

// safeSysctls are the namespaced sysctls Pod Security's baseline allows.
var safeSysctls = []string{
	"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
	"net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
	"net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
	"net.ipv4.tcp_keepalive_probes",
}

// seLinuxTypes are the container types Pod Security's baseline allows.
var seLinuxTypes = []string{"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}

type reasons []string

func (r *reasons) add(s string) {
	if !slices.Contains(*r, s) {
		*r = append(*r, s)
	}
}

func (r *reasons) uid(where string, uid *int64, nonRoot *bool) {
	if uid != nil && *uid == 0 {
		r.add(where + " runs as root (runAsUser 0)")
	}
	if nonRoot != nil && !*nonRoot {
		r.add(where + " sets runAsNonRoot: false")
	}
}

func (r *reasons) seLinux(where string, o *corev1.SELinuxOptions) {
	if o == nil {
		return
	}
	if o.User != "" || o.Role != "" || !slices.Contains(seLinuxTypes, o.Type) {
		r.add(where + " sets SELinux user, role or a non-container type")
	}
}

func (r *reasons) seccomp(where string, p *corev1.SeccompProfile) {
	if p != nil && p.Type == corev1.SeccompProfileTypeUnconfined {
		r.add(where + " runs without seccomp (Unconfined)")
	}
}

func (r *reasons) appArmor(where string, p *corev1.AppArmorProfile) {
	if p != nil && p.Type == corev1.AppArmorProfileTypeUnconfined {
		r.add(where + " runs without AppArmor (Unconfined)")
	}
}
