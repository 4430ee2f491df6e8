package localnode

import (
	"fmt"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
)

// kubeconfigFor is the kubeconfig a container of pod gets: the node's own,
// or with AsServiceAccount a copy that impersonates the pod's
// ServiceAccount, so a container is refused what its RBAC does not grant.
func (n *Node) kubeconfigFor(pod *corev1.Pod, work string) (string, error) {
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
