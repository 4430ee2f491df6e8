package localnode

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	corev1 "k8s.io/api/core/v1"
)

// Runtime runs the containers of the images it holds a root filesystem for
// under runc, as a node's container runtime would: the image's files as
// the root (read-only when the container asks), each volume bind-mounted
// at its container path, the process as the security context's user with
// its groups, capabilities and no_new_privs, in its own PID, mount, IPC and
// UTS namespaces. It shares the node's network, as a hostNetwork pod does,
// so a container reaches the local API server and storage on loopback.
type Runtime struct {
	// Runc is the runc binary.
	Runc string
	// Images maps an image reference to its unpacked root filesystem.
	Images map[string]string
	// User is the image's user (uid, gid): a container whose security
	// context names none runs as it, as the image config would say.
	User [2]uint32
	// Env is the image config's environment (PATH, HOME).
	Env []string
}

// rootfs is the root filesystem of image under the runtime, if it has one.
func (n *Node) rootfs(image string) (string, bool) {
	if n.o.Runtime == nil {
		return "", false
	}
	dir, ok := n.o.Runtime.Images[image]
	return dir, ok
}

// runcContainer runs c under runc from rootfs and returns its exit code and
// termination message, as runContainer does for a host process.
func (n *Node) runcContainer(ctx context.Context, pod *corev1.Pod, c corev1.Container, mounts []mount, rootfs, work string, env []string, cred *syscall.Credential, out io.Writer) (int32, error) {
	rt := n.o.Runtime
	argv := append(append([]string{}, c.Command...), c.Args...)
	bundle := filepath.Join(work, "bundle-"+c.Name)
	if err := ensureDir(bundle); err != nil {
		return 1, err
	}
	spec := n.ociSpec(pod, c, mounts, rootfs, argv, env, cred)
	raw, err := json.Marshal(spec)
	if err != nil {
		return 1, err
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), raw, 0o600); err != nil {
		return 1, err
	}
	state := filepath.Join(n.o.Root, "runc")
	id := containerID(pod, c)
	run := exec.Command(rt.Runc, "--root", state, "run", "--bundle", bundle, id)
	run.Stdout, run.Stderr = out, out
	run.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// The container's processes hold its output open after runc is gone;
	// Wait must not wait for them.
	run.WaitDelay = 5 * time.Second
	if err := run.Start(); err != nil {
		return 127, fmt.Errorf("start runc: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- run.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		// As a kubelet stops a container: the runtime kills its processes.
		// A container not created yet cannot be killed: try until runc
		// ends, then remove whatever it left.
		for stopped := false; !stopped; {
			_ = exec.Command(rt.Runc, "--root", state, "kill", id, "KILL").Run()
			select {
			case err = <-done:
				stopped = true
			case <-time.After(2 * time.Second):
				_ = exec.Command(rt.Runc, "--root", state, "delete", "--force", id).Run()
				_ = syscall.Kill(-run.Process.Pid, syscall.SIGKILL)
			}
		}
	}
	// A container that ended leaves runc state behind only when runc itself
	// died; remove it so the id can be used again.
	_ = exec.Command(rt.Runc, "--root", state, "delete", "--force", id).Run()
	if code, ended := exitCode(err); ended {
		return code, nil
	}
	return 127, err
}

// containerID is a runc container id unique to a pod's container.
func containerID(pod *corev1.Pod, c corev1.Container) string {
	h := sha256.Sum256([]byte(string(pod.UID) + "/" + c.Name))
	return "sf-" + hex.EncodeToString(h[:8])
}

// defaultCapabilities are what a container runtime grants a container that
// neither adds nor drops any (containerd's and CRI-O's list).
var defaultCapabilities = []string{"CHOWN", "DAC_OVERRIDE", "FSETID", "FOWNER", "MKNOD", "NET_RAW", "SETGID", "SETUID",
	"SETFCAP", "SETPCAP", "NET_BIND_SERVICE", "SYS_CHROOT", "KILL", "AUDIT_WRITE"}

// capabilities applies a container's drop and add lists to the defaults.
func capabilities(sc *corev1.SecurityContext) []string {
	caps := slices.Clone(defaultCapabilities)
	if sc != nil && sc.Capabilities != nil {
		for _, d := range sc.Capabilities.Drop {
			if strings.EqualFold(string(d), "ALL") {
				caps = nil
				break
			}
			caps = slices.DeleteFunc(caps, func(c string) bool { return strings.EqualFold(c, strings.TrimPrefix(string(d), "CAP_")) })
		}
		for _, a := range sc.Capabilities.Add {
			name := strings.ToUpper(strings.TrimPrefix(string(a), "CAP_"))
			if !slices.Contains(caps, name) {
				caps = append(caps, name)
			}
		}
	}
	if sc != nil && sc.Privileged != nil && *sc.Privileged {
		caps = append(caps, "SYS_ADMIN")
	}
	out := make([]string, 0, len(caps))
	for _, c := range caps {
		out = append(out, "CAP_"+c)
	}
	return out
}

// ociSpec is the runtime configuration of one container.
func (n *Node) ociSpec(pod *corev1.Pod, c corev1.Container, mounts []mount, rootfs string, argv, env []string, cred *syscall.Credential) *specs.Spec {
	rt := n.o.Runtime
	user := specs.User{UID: rt.User[0], GID: rt.User[1]}
	if cred != nil {
		user = specs.User{UID: cred.Uid, GID: cred.Gid, AdditionalGids: cred.Groups}
	}
	caps := capabilities(c.SecurityContext)
	if user.UID != 0 {
		// A non-root process keeps no effective capabilities, as under a
		// runtime: they stay in its bounding set only.
		caps = nil
	}
	sc := c.SecurityContext
	// Kubernetes allows escalation unless the container says otherwise.
	noNewPrivs := sc != nil && sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation
	readOnlyRoot := sc != nil && sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem
	cwd := c.WorkingDir
	if cwd == "" {
		cwd = "/"
	}
	s := &specs.Spec{
		Version:  specs.Version,
		Root:     &specs.Root{Path: rootfs, Readonly: readOnlyRoot},
		Hostname: hostname(pod.Name),
		Process: &specs.Process{
			User: user, Args: argv, Cwd: cwd,
			Env:             mergeEnv(rt.Env, append([]string{"HOSTNAME=" + hostname(pod.Name)}, env...)),
			NoNewPrivileges: noNewPrivs,
			Capabilities: &specs.LinuxCapabilities{Bounding: capabilities(c.SecurityContext), Effective: caps,
				Permitted: caps},
		},
		Mounts: []specs.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc"},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
			{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}},
			{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
			{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: []string{"nosuid", "noexec", "nodev"}},
			{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
			// Name resolution as on the node, as a hostNetwork pod has it.
			{Destination: "/etc/hosts", Type: "bind", Source: "/etc/hosts", Options: []string{"rbind", "ro"}},
			{Destination: "/etc/resolv.conf", Type: "bind", Source: "/etc/resolv.conf", Options: []string{"rbind", "ro"}},
		},
		Linux: &specs.Linux{
			Namespaces: []specs.LinuxNamespace{{Type: specs.PIDNamespace}, {Type: specs.IPCNamespace}, {Type: specs.UTSNamespace}, {Type: specs.MountNamespace}},
			MaskedPaths: []string{"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list",
				"/proc/timer_stats", "/proc/sched_debug", "/sys/firmware", "/proc/scsi"},
			ReadonlyPaths: []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"},
		},
	}
	// Parents before children, so /data/sub lands inside /data.
	sorted := slices.Clone(mounts)
	slices.SortStableFunc(sorted, func(a, b mount) int { return len(a.container) - len(b.container) })
	for _, m := range sorted {
		opts := []string{"rbind", "rprivate"}
		if m.readOnly {
			opts = append(opts, "ro")
		}
		s.Mounts = append(s.Mounts, specs.Mount{Destination: m.container, Type: "bind", Source: m.host, Options: opts})
	}
	return s
}

// hostname is a pod's hostname as a kubelet sets it: its name cut to 63
// characters, without a trailing '-' or '.' (Linux allows 64).
func hostname(pod string) string {
	if len(pod) > 63 {
		pod = strings.TrimRight(pod[:63], "-.")
	}
	return pod
}

// mergeEnv is the image's environment with the container's over it: a
// container's variable replaces the image's of the same name.
func mergeEnv(image, container []string) []string {
	out := slices.Clone(container)
	for _, kv := range image {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.ContainsFunc(container, func(c string) bool { return strings.HasPrefix(c, name+"=") }) {
			out = append(out, kv)
		}
	}
	return out
}

// volumeReadOnly says whether a kubelet mounts volume name read-only
// whatever the container's mount says: a read-only claim or export, and
// the projected kinds.
func volumeReadOnly(pod *corev1.Pod, name string) bool {
	for _, v := range pod.Spec.Volumes {
		if v.Name != name {
			continue
		}
		switch {
		case v.PersistentVolumeClaim != nil:
			return v.PersistentVolumeClaim.ReadOnly
		case v.NFS != nil:
			return v.NFS.ReadOnly
		case v.HostPath != nil, v.EmptyDir != nil, v.Ephemeral != nil:
			return false
		default:
			return true // configMap, secret, projected, downwardAPI
		}
	}
	return false
}

// runContained runs c under the runtime: the same environment, identity,
// log and termination message as a host process gets, with no path
// rewritten, since its volumes are mounted where the spec says.
func (n *Node) runContained(ctx context.Context, pod *corev1.Pod, c corev1.Container, mounts []mount, rootfs, work, termHost string) (int32, string) {
	cred := n.credential(pod, c)
	uid, gid := n.o.Runtime.User[0], n.o.Runtime.User[1]
	if cred != nil {
		uid, gid = cred.Uid, cred.Gid
	}
	// As a runtime makes the termination log its container's user's.
	if err := os.WriteFile(termHost, nil, 0o644); err != nil {
		return 1, err.Error()
	}
	if err := os.Chown(termHost, int(uid), int(gid)); err != nil {
		return 1, err.Error()
	}
	vars, err := n.env(ctx, pod, c)
	if err != nil {
		return 1, err.Error()
	}
	var env []string
	for _, e := range vars {
		env = append(env, e.Name+"="+e.Value)
	}
	n.mu.Lock()
	for k, v := range n.runtimeEnv {
		env = append(env, k+"="+v)
	}
	n.mu.Unlock()
	kubeconfig, err := n.kubeconfigFor(ctx, pod, work)
	if err != nil {
		return 1, err.Error()
	}
	if kubeconfig != "" {
		// The node hands a kubeconfig acting as the pod's ServiceAccount
		// where a kubelet would project its token: a copy of the
		// container's own, as its user must read it.
		raw, err := os.ReadFile(kubeconfig)
		if err != nil {
			return 1, err.Error()
		}
		kubeconfig = filepath.Join(work, c.Name+".kubeconfig")
		if err := os.WriteFile(kubeconfig, raw, 0o600); err != nil {
			return 1, err.Error()
		}
		if err := os.Chown(kubeconfig, int(uid), int(gid)); err != nil {
			return 1, err.Error()
		}
		const at = "/var/run/secrets/kubernetes.io/serviceaccount/kubeconfig"
		mounts = append(mounts, mount{container: at, host: kubeconfig, readOnly: true})
		env = append(env, "KUBECONFIG="+at)
	}
	var out bytes.Buffer
	logf, err := n.openLog(pod.Namespace, pod.Name, c.Name)
	if err != nil {
		return 1, "container log: " + err.Error()
	}
	defer n.closeLog(logf)
	code, err := n.runcContainer(ctx, pod, c, mounts, rootfs, work, env, cred, io.MultiWriter(&out, bestEffort{logf}))
	if err != nil {
		return code, fmt.Sprintf("runc: %v", err)
	}
	return code, terminationMessage(termHost, c, out.String(), code != 0)
}

// Probe runs argv once in a throwaway container of image, as the image's
// user under a read-only root, and returns what went wrong: a root that
// cannot run containers (no namespaces, a read-only cgroupfs) fails here
// instead of in every mover.
func (rt *Runtime) Probe(ctx context.Context, image, work string, argv []string) error {
	rootfs, ok := rt.Images[image]
	if !ok {
		return fmt.Errorf("no root filesystem for image %s", image)
	}
	n := &Node{o: Options{Root: work, Runtime: rt}}
	pod := &corev1.Pod{}
	pod.Name, pod.UID = "runc-probe", "runc-probe"
	ro := true
	c := corev1.Container{Name: "probe", Image: image, SecurityContext: &corev1.SecurityContext{ReadOnlyRootFilesystem: &ro}}
	var out bytes.Buffer
	if err := ensureDir(work); err != nil {
		return err
	}
	c.Command = argv
	code, err := n.runcContainer(ctx, pod, c, nil, rootfs, work, nil, nil, &out)
	if err != nil || code != 0 {
		return fmt.Errorf("runc could not run a container here (exit %d, %v): %s", code, err, strings.TrimSpace(out.String()))
	}
	return nil
}
