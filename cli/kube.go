package cli

import (
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/snapflow/snapflow/internal/scheme"
)

// kubeconfig is the root --kubeconfig flag; empty uses KUBECONFIG, the
// in-cluster config or ~/.kube/config, in that order.
var kubeconfig string

func restConfig() (*rest.Config, error) {
	if kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("load kubeconfig %s: %w", kubeconfig, err)
		}
		return cfg, nil
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return nil, fmt.Errorf("find a cluster: %w (pass --kubeconfig)", err)
	}
	return cfg, nil
}

func kubeClient() (client.Client, error) {
	cfg, err := restConfig()
	if err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: scheme.New()})
}

// namespaceOr returns ns, or the kubeconfig context's namespace, or "default".
func namespaceOr(ns string) (string, error) {
	if ns != "" {
		return ns, nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules.ExplicitPath = kubeconfig
	}
	got, _, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).Namespace()
	if err != nil {
		return "", fmt.Errorf("read the namespace from the kubeconfig: %w (pass -n)", err)
	}
	return got, nil
}
