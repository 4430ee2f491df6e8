package localnode

import (
	"context"
	"fmt"
	"path/filepath"
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
