package privilege

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
)

func TestMover(t *testing.T) {
	uid := int64(1000)
	cases := []struct {
		name     string
		defaults *snapv1.MoverDefaults
		mover    *snapv1.MoverSpec
		repo     *snapv1.FilesystemBackend
		want     []string // substrings, one per reason; nil means none
	}{
		{"hardened default", nil, nil, nil, nil},
		{"another uid", nil, &snapv1.MoverSpec{PodSecurityContext: &corev1.PodSecurityContext{RunAsUser: &uid}}, nil, nil},
		{"NET_BIND_SERVICE is baseline", nil, &snapv1.MoverSpec{SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_BIND_SERVICE"}}}}, nil, nil},
		{"localhost seccomp is fine", nil, &snapv1.MoverSpec{PodSecurityContext: &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr("p.json")}}}, nil, nil},
		{"container_t is baseline", nil, &snapv1.MoverSpec{SecurityContext: &corev1.SecurityContext{SELinuxOptions: &corev1.SELinuxOptions{Type: "container_t", Level: "s0:c1,c2"}}}, nil, nil},
		{"safe sysctl", nil, &snapv1.MoverSpec{PodSecurityContext: &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{{Name: "net.ipv4.tcp_syncookies", Value: "1"}}}}, nil, nil},

		{"root from repository defaults", &snapv1.MoverDefaults{PodSecurityContext: &corev1.PodSecurityContext{RunAsUser: ptr(int64(0))}}, nil, nil, []string{"pod runs as root", "runAsNonRoot: false"}},
		{"root container", nil, &snapv1.MoverSpec{SecurityContext: &corev1.SecurityContext{RunAsUser: ptr(int64(0))}}, nil, []string{"container mover runs as root"}},
		{"runAsNonRoot false alone", nil, &snapv1.MoverSpec{SecurityContext: &corev1.SecurityContext{RunAsNonRoot: ptr(false)}}, nil, []string{"runAsNonRoot: false"}},
		{"privilegedMode", nil, &snapv1.MoverSpec{PrivilegedMode: true}, nil, []string{"runs as root", "runAsNonRoot", "is privileged", "escalation"}},
		{"escalation", nil, &snapv1.MoverSpec{SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr(true)}}, nil, []string{"allows privilege escalation"}},
		{"added capabilities", nil, &snapv1.MoverSpec{SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_BIND_SERVICE", "DAC_READ_SEARCH", "SYS_ADMIN"}}}}, nil, []string{"adds the capabilities DAC_READ_SEARCH, SYS_ADMIN"}},
		{"unconfined seccomp on the container", nil, &snapv1.MoverSpec{SecurityContext: &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}}}, nil, []string{"container mover runs without seccomp"}},
		{"unconfined apparmor", &snapv1.MoverDefaults{PodSecurityContext: &corev1.PodSecurityContext{AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}}}, nil, nil, []string{"pod runs without AppArmor"}},
		{"selinux spc_t", nil, &snapv1.MoverSpec{PodSecurityContext: &corev1.PodSecurityContext{SELinuxOptions: &corev1.SELinuxOptions{Type: "spc_t"}}}, nil, []string{"pod sets SELinux"}},
		{"selinux user", nil, &snapv1.MoverSpec{SecurityContext: &corev1.SecurityContext{SELinuxOptions: &corev1.SELinuxOptions{User: "system_u"}}}, nil, []string{"container mover sets SELinux"}},
		{"unmasked proc", nil, &snapv1.MoverSpec{SecurityContext: &corev1.SecurityContext{ProcMount: ptr(corev1.UnmaskedProcMount)}}, nil, []string{"unmasks /proc"}},
		{"unsafe sysctl", &snapv1.MoverDefaults{PodSecurityContext: &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{{Name: "kernel.msgmax", Value: "1"}}}}, nil, nil, []string{"unsafe sysctl kernel.msgmax"}},
		{"node path", nil, nil, &snapv1.FilesystemBackend{Path: "/"}, []string{"node path /"}},
		{"inline NFS", nil, nil, &snapv1.FilesystemBackend{Path: "/kopia", Volume: &snapv1.FilesystemVolume{NFS: &snapv1.NFSExport{Server: "nas", Path: "/export"}}},
			[]string{"mounts the NFS export nas:/export directly"}},
		{"a PVC is the tenant's own", nil, nil, &snapv1.FilesystemBackend{Path: "/kopia", Volume: &snapv1.FilesystemVolume{PVC: &snapv1.LocalObjectRef{Name: "repo"}}}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Mover(c.defaults, c.mover, RepositoryVolume(c.repo))
			if len(got) != len(c.want) {
				t.Fatalf("reasons %q, want %d matching %q", got, len(c.want), c.want)
			}
			for i, w := range c.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("reason %d = %q, want it to contain %q", i, got[i], w)
				}
			}
		})
	}
}

func TestPodChecksEveryContainerAndTheHost(t *testing.T) {
	spec := &corev1.PodSpec{
		HostPID:        true,
		InitContainers: []corev1.Container{{Name: "init", SecurityContext: &corev1.SecurityContext{Privileged: ptr(true)}}},
		Containers:     []corev1.Container{{Name: "mover"}},
		Volumes:        []corev1.Volume{{Name: "r", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/srv"}}}},
	}
	got := Pod(spec, Trusted{})
	for _, w := range []string{"node's network, PID or IPC", "container init is privileged", "node path /srv"} {
		if !slices.ContainsFunc(got, func(r string) bool { return strings.Contains(r, w) }) {
			t.Errorf("reasons %q miss %q", got, w)
		}
	}
	if got := Pod(&corev1.PodSpec{Volumes: spec.Volumes}, Trusted{HostPaths: []string{"/srv"}}); len(got) != 0 {
		t.Errorf("a trusted node path: %q", got)
	}
	others := &corev1.PodSpec{
		SecurityContext: &corev1.PodSecurityContext{WindowsOptions: &corev1.WindowsSecurityContextOptions{HostProcess: ptr(true)}},
		Containers:      []corev1.Container{{Name: "mover"}},
		Volumes: []corev1.Volume{
			{Name: "lun", VolumeSource: corev1.VolumeSource{ISCSI: &corev1.ISCSIVolumeSource{TargetPortal: "10.0.0.1", IQN: "iqn.x", Lun: 0}}},
			{Name: "code", VolumeSource: corev1.VolumeSource{GitRepo: &corev1.GitRepoVolumeSource{Repository: "https://example.com/x.git"}}},
			{Name: "ok", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "d"}}},
		},
	}
	got = Pod(others, Trusted{})
	for _, w := range []string{"Windows host process", "volume lun of a kind", "volume code of a kind"} {
		if !slices.ContainsFunc(got, func(r string) bool { return strings.Contains(r, w) }) {
			t.Errorf("reasons %q miss %q", got, w)
		}
	}
	if len(got) != 3 {
		t.Errorf("restricted volume kinds refused too: %q", got)
	}
	nfs := []corev1.Volume{{Name: "r", VolumeSource: corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{Server: "nas", Path: "/export"}}}}
	if got := Pod(&corev1.PodSpec{Volumes: nfs}, Trusted{NFS: []string{"nas:/export"}}); len(got) != 0 {
		t.Errorf("a trusted NFS export: %q", got)
	}
	if got := Pod(&corev1.PodSpec{Volumes: nfs}, Trusted{NFS: []string{"nas:/other"}}); len(got) != 1 {
		t.Errorf("another NFS export than the trusted one: %q", got)
	}
}

// A runJob hook's pod is judged like a mover's, legacy annotations included.
func TestRunJobAndAnnotations(t *testing.T) {
	tpl := &corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
			"container.apparmor.security.beta.kubernetes.io/hook": "unconfined",
			"seccomp.security.alpha.kubernetes.io/pod":            "Unconfined",
			"example.com/harmless":                                "unconfined",
		}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "hook", Ports: []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080}}}}},
	}
	got := RunJob(tpl)
	for _, w := range []string{"node's port 8080", "apparmor.security.beta.kubernetes.io/hook runs without AppArmor", "seccomp.security.alpha.kubernetes.io/pod runs without seccomp"} {
		if !slices.ContainsFunc(got, func(r string) bool { return strings.Contains(r, w) }) {
			t.Errorf("reasons %q miss %q", got, w)
		}
	}
	if len(got) != 3 {
		t.Errorf("reasons %q: want exactly three", got)
	}
	if got := RunJob(&corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "hook", Ports: []corev1.ContainerPort{{ContainerPort: 80}}}}}}); len(got) != 0 {
		t.Errorf("an ordinary hook pod: %q", got)
	}
	d := &snapv1.MoverDefaults{PodAnnotations: map[string]string{"container.apparmor.security.beta.kubernetes.io/mover": "unconfined"}}
	if got := Mover(d, nil, nil); len(got) != 1 {
		t.Errorf("moverDefaults.podAnnotations: %q", got)
	}
}

func TestSecurityContextLayers(t *testing.T) {
	uid := int64(1000)
	cases := []struct {
		name     string
		defaults *snapv1.MoverDefaults
		mover    *snapv1.MoverSpec
		wantUID  int64
		wantDrop []corev1.Capability
		wantAdd  []corev1.Capability
	}{
		{"hardened default", nil, nil, DefaultUID, []corev1.Capability{"ALL"}, nil},
		{"repository default wins over hardened", &snapv1.MoverDefaults{PodSecurityContext: &corev1.PodSecurityContext{RunAsUser: &uid}}, nil, 1000, []corev1.Capability{"ALL"}, nil},
		{"policy wins over repository", &snapv1.MoverDefaults{PodSecurityContext: &corev1.PodSecurityContext{RunAsUser: &uid}}, &snapv1.MoverSpec{PodSecurityContext: &corev1.PodSecurityContext{RunAsUser: ptr(int64(2000))}}, 2000, []corev1.Capability{"ALL"}, nil},
		{"adding a capability keeps drop ALL", nil, &snapv1.MoverSpec{SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"DAC_READ_SEARCH"}}}}, DefaultUID, []corev1.Capability{"ALL"}, []corev1.Capability{"DAC_READ_SEARCH"}},
		{"an explicit drop replaces it", nil, &snapv1.MoverSpec{SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"NET_RAW"}}}}, DefaultUID, []corev1.Capability{"NET_RAW"}, nil},
		{"drop: [] drops nothing", nil, &snapv1.MoverSpec{SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{}}}}, DefaultUID, []corev1.Capability{}, nil},
		{"root", nil, &snapv1.MoverSpec{PodSecurityContext: &corev1.PodSecurityContext{RunAsUser: ptr(int64(0))}}, 0, []corev1.Capability{"ALL"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pod, ctr := SecurityContexts(c.defaults, c.mover)
			if *pod.RunAsUser != c.wantUID {
				t.Errorf("runAsUser %d, want %d", *pod.RunAsUser, c.wantUID)
			}
			if c.wantUID == 0 && *pod.RunAsNonRoot {
				t.Error("runAsNonRoot must be off for a root mover")
			}
			if !slices.Equal(ctr.Capabilities.Drop, c.wantDrop) || !slices.Equal(ctr.Capabilities.Add, c.wantAdd) {
				t.Errorf("capabilities %+v, want drop %v add %v", ctr.Capabilities, c.wantDrop, c.wantAdd)
			}
		})
	}
	// Fields the layering used to drop reach the pod, so the gate sees them.
	pod, ctr := SecurityContexts(nil, &snapv1.MoverSpec{
		PodSecurityContext: &corev1.PodSecurityContext{AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault}},
		SecurityContext:    &corev1.SecurityContext{SELinuxOptions: &corev1.SELinuxOptions{Level: "s0:c1"}, ProcMount: ptr(corev1.DefaultProcMount)},
	})
	if pod.AppArmorProfile == nil || ctr.SELinuxOptions == nil || ctr.ProcMount == nil {
		t.Errorf("settings lost in the layering: %+v %+v", pod, ctr)
	}
}
