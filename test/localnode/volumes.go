package localnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// volumes maps each pod volume to a host directory.
func (n *Node) volumes(ctx context.Context, pod *corev1.Pod, work string) (map[string]string, error) {
	out := map[string]string{}
	ns := pod.Namespace
	var fsGroup *int64
	var fsPolicy *corev1.PodFSGroupChangePolicy
	if sc := pod.Spec.SecurityContext; sc != nil && n.o.RunAsPodUser {
		fsGroup, fsPolicy = sc.FSGroup, sc.FSGroupChangePolicy
	}
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.PersistentVolumeClaim != nil:
			var pvc corev1.PersistentVolumeClaim
			if err := n.o.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: v.PersistentVolumeClaim.ClaimName}, &pvc); err != nil {
				return nil, fmt.Errorf("volume %s: PVC %s: %w", v.Name, v.PersistentVolumeClaim.ClaimName, err)
			}
			dir, err := n.VolumeDir(ctx, ns, pvc.Name)
			if err != nil {
				return nil, fmt.Errorf("volume %s: %w", v.Name, err)
			}
			if err := ensureDir(dir); err != nil {
				return nil, err
			}
			// A kubelet gives no group to a volume mounted read-only.
			if fsGroup != nil && !v.PersistentVolumeClaim.ReadOnly {
				if err := applyFSGroup(dir, *fsGroup, fsPolicy); err != nil {
					return nil, fmt.Errorf("volume %s: fsGroup %d: %w", v.Name, *fsGroup, err)
				}
			}
			out[v.Name] = dir
		case v.EmptyDir != nil, v.Ephemeral != nil:
			// A generic ephemeral volume lives and dies with the pod, as an
			// emptyDir does; a kubelet would mount the PVC the ephemeral
			// volume controller created. Both are open to every user.
			dir := filepath.Join(work, "empty-"+v.Name)
			if err := ensureDir(dir); err != nil {
				return nil, err
			}
			if err := os.Chmod(dir, 0o777); err != nil {
				return nil, err
			}
			out[v.Name] = dir
		case v.HostPath != nil:
			out[v.Name] = v.HostPath.Path
		case v.NFS != nil:
			// As a kubelet's mount fails for an export the server does
			// not have, the pod does not start.
			dir := n.NFSDir(v.NFS.Server, v.NFS.Path)
			if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
				return nil, fmt.Errorf("volume %s: mount.nfs: %s:%s: no such export (the local node serves exports from %s)", v.Name, v.NFS.Server, v.NFS.Path, filepath.Join(n.o.Root, "nfs"))
			}
			out[v.Name] = dir
		case v.ConfigMap != nil:
			var cm corev1.ConfigMap
			if err := n.o.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: v.ConfigMap.Name}, &cm); err != nil {
				return nil, fmt.Errorf("volume %s: ConfigMap %s: %w", v.Name, v.ConfigMap.Name, err)
			}
			data := map[string][]byte{}
			for k, val := range cm.Data {
				data[k] = []byte(val)
			}
			for k, val := range cm.BinaryData {
				data[k] = val
			}
			dir, err := writeFiles(filepath.Join(work, "cm-"+v.Name), data, v.ConfigMap.Items, v.ConfigMap.DefaultMode)
			if err != nil {
				return nil, err
			}
			out[v.Name] = dir
		case v.Secret != nil:
			var s corev1.Secret
			if err := n.o.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: v.Secret.SecretName}, &s); err != nil {
				return nil, fmt.Errorf("volume %s: Secret %s: %w", v.Name, v.Secret.SecretName, err)
			}
			dir, err := writeFiles(filepath.Join(work, "secret-"+v.Name), s.Data, v.Secret.Items, v.Secret.DefaultMode)
			if err != nil {
				return nil, err
			}
			out[v.Name] = dir
		default:
			return nil, fmt.Errorf("volume %s: this local node supports persistentVolumeClaim, emptyDir, ephemeral, hostPath, nfs, configMap and secret volumes", v.Name)
		}
	}
	return out, nil
}

// writeFiles projects a ConfigMap's or Secret's keys as files with the
// kubelet's default mode, 0644, unless the volume or item sets one.
func writeFiles(dir string, data map[string][]byte, items []corev1.KeyToPath, defaultMode *int32) (string, error) {
	if err := ensureDir(dir); err != nil {
		return "", err
	}
	mode := os.FileMode(0o644)
	if defaultMode != nil {
		mode = os.FileMode(*defaultMode) & os.ModePerm
	}
	write := func(name string, b []byte, m os.FileMode) error {
		p := filepath.Join(dir, name)
		if err := ensureDir(filepath.Dir(p)); err != nil {
			return err
		}
		if err := os.WriteFile(p, b, m); err != nil {
			return err
		}
		return os.Chmod(p, m) // past the umask
	}
	if len(items) > 0 {
		for _, it := range items {
			m := mode
			if it.Mode != nil {
				m = os.FileMode(*it.Mode) & os.ModePerm
			}
			if err := write(it.Path, data[it.Key], m); err != nil {
				return "", err
			}
		}
		return dir, nil
	}
	for k, b := range data {
		if err := write(k, b, mode); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// env resolves a container's environment as the kubelet would.
func (n *Node) env(ctx context.Context, pod *corev1.Pod, c corev1.Container) ([]corev1.EnvVar, error) {
	var out []corev1.EnvVar
	for _, from := range c.EnvFrom {
		var data map[string]string
		switch {
		case from.SecretRef != nil:
			var s corev1.Secret
			if err := n.o.Client.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: from.SecretRef.Name}, &s); err != nil {
				if from.SecretRef.Optional != nil && *from.SecretRef.Optional {
					continue
				}
				return nil, fmt.Errorf("envFrom Secret %s: %w", from.SecretRef.Name, err)
			}
			data = map[string]string{}
			for k, v := range s.Data {
				data[k] = string(v)
			}
		case from.ConfigMapRef != nil:
			var cm corev1.ConfigMap
			if err := n.o.Client.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: from.ConfigMapRef.Name}, &cm); err != nil {
				if from.ConfigMapRef.Optional != nil && *from.ConfigMapRef.Optional {
					continue
				}
				return nil, fmt.Errorf("envFrom ConfigMap %s: %w", from.ConfigMapRef.Name, err)
			}
			data = cm.Data
		}
		for k, v := range data {
			out = append(out, corev1.EnvVar{Name: from.Prefix + k, Value: v})
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			out = append(out, e)
			continue
		}
		v, err := n.valueFrom(ctx, pod, e)
		if err != nil {
			return nil, err
		}
		out = append(out, corev1.EnvVar{Name: e.Name, Value: v})
	}
	return out, nil
}

func (n *Node) valueFrom(ctx context.Context, pod *corev1.Pod, e corev1.EnvVar) (string, error) {
	f := e.ValueFrom
	switch {
	case f.SecretKeyRef != nil:
		optional := f.SecretKeyRef.Optional != nil && *f.SecretKeyRef.Optional
		var s corev1.Secret
		if err := n.o.Client.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: f.SecretKeyRef.Name}, &s); err != nil {
			if optional && apierrors.IsNotFound(err) {
				return "", nil
			}
			return "", fmt.Errorf("env %s: Secret %s: %w", e.Name, f.SecretKeyRef.Name, err)
		}
		v, ok := s.Data[f.SecretKeyRef.Key]
		if !ok && !optional {
			return "", &missingKey{fmt.Sprintf("couldn't find key %s in Secret %s/%s (env %s)", f.SecretKeyRef.Key, pod.Namespace, f.SecretKeyRef.Name, e.Name)}
		}
		return string(v), nil
	case f.ConfigMapKeyRef != nil:
		optional := f.ConfigMapKeyRef.Optional != nil && *f.ConfigMapKeyRef.Optional
		var cm corev1.ConfigMap
		if err := n.o.Client.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: f.ConfigMapKeyRef.Name}, &cm); err != nil {
			if optional && apierrors.IsNotFound(err) {
				return "", nil
			}
			return "", fmt.Errorf("env %s: ConfigMap %s: %w", e.Name, f.ConfigMapKeyRef.Name, err)
		}
		v, ok := cm.Data[f.ConfigMapKeyRef.Key]
		if !ok && !optional {
			return "", &missingKey{fmt.Sprintf("couldn't find key %s in ConfigMap %s/%s (env %s)", f.ConfigMapKeyRef.Key, pod.Namespace, f.ConfigMapKeyRef.Name, e.Name)}
		}
		return v, nil
	case f.FieldRef != nil:
		switch strings.TrimSpace(f.FieldRef.FieldPath) {
		case "metadata.namespace":
			return pod.Namespace, nil
		case "metadata.name":
			return pod.Name, nil
		case "spec.nodeName":
			return pod.Spec.NodeName, nil
		case "spec.serviceAccountName":
			return pod.Spec.ServiceAccountName, nil
		}
		if k, ok := strings.CutPrefix(f.FieldRef.FieldPath, "metadata.labels['"); ok {
			return pod.Labels[strings.TrimSuffix(k, "']")], nil
		}
		return "", fmt.Errorf("env %s: fieldRef %s is not supported by the local node", e.Name, f.FieldRef.FieldPath)
	}
	return "", fmt.Errorf("env %s: unsupported valueFrom", e.Name)
}

// missingKey is a Secret or ConfigMap that lacks a key a container's
// environment names: the kubelet waits for it, as for a missing object.
type missingKey struct{ msg string }

func (m *missingKey) Error() string { return m.msg }
