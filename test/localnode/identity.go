package localnode

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// awaitServiceAccount holds a Job until its pod's ServiceAccount exists, as
// a cluster does: the ServiceAccount admission plugin refuses the pod and
// the Job controller retries. It reports false when ctx ends first.
func (n *Node) awaitServiceAccount(ctx context.Context, j *batchv1.Job, log interface{ Info(string, ...any) }) bool {
	if !n.o.AsServiceAccount {
		return true
	}
	name := j.Spec.Template.Spec.ServiceAccountName
	if name == "" {
		return true // "default" is every namespace's; the node does not require it
	}
	logged := false
	for {
		var sa corev1.ServiceAccount
		err := n.o.Client.Get(ctx, client.ObjectKey{Namespace: j.Namespace, Name: name}, &sa)
		if err == nil {
			return true
		}
		if !apierrors.IsNotFound(err) && ctx.Err() != nil {
			return false
		}
		if !logged {
			log.Info("pod waits for its ServiceAccount", "serviceAccount", name, "error", err.Error())
			logged = true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// kubeconfigFor is the kubeconfig a container of pod gets: the node's own,
// or with AsServiceAccount a copy that impersonates the pod's
// ServiceAccount, so a container is refused what its RBAC does not grant.
// A pod that mounts no ServiceAccount token gets none ("").
func (n *Node) kubeconfigFor(ctx context.Context, pod *corev1.Pod, work string) (string, error) {
	if automount, err := n.automountsToken(ctx, pod); err != nil || !automount {
		return "", err
	}
	if !n.o.AsServiceAccount {
		return n.o.Kubeconfig, nil
	}
	cfg, err := clientcmd.LoadFromFile(n.o.Kubeconfig)
	if err != nil {
		return "", fmt.Errorf("read the node kubeconfig: %w", err)
	}
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	for _, u := range cfg.AuthInfos {
		u.Impersonate = "system:serviceaccount:" + pod.Namespace + ":" + sa
	}
	path := filepath.Join(work, "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return "", fmt.Errorf("write the pod kubeconfig: %w", err)
	}
	return path, nil
}

// automountsToken says whether pod gets its ServiceAccount's token, as a
// kubelet decides: the pod's automountServiceAccountToken, else its
// ServiceAccount's, else yes.
func (n *Node) automountsToken(ctx context.Context, pod *corev1.Pod) (bool, error) {
	if a := pod.Spec.AutomountServiceAccountToken; a != nil {
		return *a, nil
	}
	name := pod.Spec.ServiceAccountName
	if name == "" {
		name = "default"
	}
	var sa corev1.ServiceAccount
	switch err := n.o.Client.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: name}, &sa); {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("read ServiceAccount %s/%s: %w", pod.Namespace, name, err)
	}
	return sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken, nil
}

// credential is who a container's process runs as, as a container runtime
// decides it: the container's runAsUser and runAsGroup over its pod's, and
// the pod's supplemental groups and fsGroup as extra groups. nil when the
// node does not run containers as their users, or when neither context sets
// a user: the image would decide, and the local node has no image.
func (n *Node) credential(pod *corev1.Pod, c corev1.Container) *syscall.Credential {
	if !n.o.RunAsPodUser {
		return nil
	}
	var uid, gid *int64
	var groups []uint32
	if p := pod.Spec.SecurityContext; p != nil {
		uid, gid = p.RunAsUser, p.RunAsGroup
		for _, g := range p.SupplementalGroups {
			groups = append(groups, uint32(g))
		}
		if p.FSGroup != nil {
			groups = append(groups, uint32(*p.FSGroup))
		}
	}
	if sc := c.SecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			uid = sc.RunAsUser
		}
		if sc.RunAsGroup != nil {
			gid = sc.RunAsGroup
		}
	}
	if uid == nil {
		return nil
	}
	cred := &syscall.Credential{Uid: uint32(*uid), Groups: groups}
	if gid != nil {
		cred.Gid = uint32(*gid)
	}
	return cred
}

// applyFSGroup gives a volume to a pod's fsGroup as a kubelet does for a
// read-write volume whose driver lets it (fsGroupPolicy File): every file
// and directory joins the group and becomes group-readable and -writable,
// directories also setgid, so new files join it too. OnRootMismatch skips
// the walk when the volume's root already has that group and those modes.
func applyFSGroup(dir string, gid int64, policy *corev1.PodFSGroupChangePolicy) error {
	const rw, exec = fs.FileMode(0o660), fs.FileMode(0o110)
	if policy != nil && *policy == corev1.FSGroupChangeOnRootMismatch {
		if info, err := os.Stat(dir); err == nil {
			if st, ok := info.Sys().(*syscall.Stat_t); ok && int64(st.Gid) == gid &&
				info.Mode()&os.ModeSetgid != 0 && info.Mode().Perm()&(rw|exec) == rw|exec {
				return nil
			}
		}
	}
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return os.Lchown(p, -1, int(gid))
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if err := os.Lchown(p, -1, int(gid)); err != nil {
			return err
		}
		mode := info.Mode().Perm() | rw
		if d.IsDir() {
			mode |= exec | os.ModeSetgid
		}
		return os.Chmod(p, mode|info.Mode()&(os.ModeSticky|os.ModeSetuid))
	})
}
