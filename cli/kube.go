package cli

import (
	"fmt"

	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/snapflow/snapflow/internal/scheme"
)

// kubeFlags are the root's flags for reaching a cluster, kubectl's own
// (k8s.io/cli-runtime): --kubeconfig, --context, --cluster, --user, --as
// and --as-group. Every subcommand that talks to a cluster reads them
// here, so all of them resolve the cluster and the namespace as kubectl
// does: an explicit -n, else the context's namespace, else "default";
// without a kubeconfig, the in-cluster ServiceAccount.
type kubeFlags struct {
	cf *genericclioptions.ConfigFlags
}

func newKubeFlags() *kubeFlags {
	str := func() *string { return new(string) }
	return &kubeFlags{cf: &genericclioptions.ConfigFlags{
		KubeConfig: str(), Context: str(), ClusterName: str(), AuthInfoName: str(),
		Impersonate: str(), ImpersonateGroup: new([]string),
	}}
}

func (k *kubeFlags) addFlags(fs *pflag.FlagSet) { k.cf.AddFlags(fs) }

// kubeconfig is the --kubeconfig flag ("" when not given).
func (k *kubeFlags) kubeconfig() string { return *k.cf.KubeConfig }

// loader is the kubeconfig as the flags select it.
func (k *kubeFlags) loader() clientcmd.ClientConfig { return k.cf.ToRawKubeConfigLoader() }

func (k *kubeFlags) restConfig() (*rest.Config, error) {
	cfg, err := k.loader().ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("find a cluster: %w (pass --kubeconfig or --context)", err)
	}
	if cfg.QPS == 0 {
		// client-go would throttle an unset rate to 5 requests a second;
		// like controller-runtime, leave the pacing to the API server's
		// priority and fairness (the functions and the webhook are servers).
		cfg.QPS = -1
	}
	return cfg, nil
}

func (k *kubeFlags) client() (client.Client, error) {
	cfg, err := k.restConfig()
	if err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: scheme.New()})
}

// namespace returns ns (an explicit -n), or the selected context's
// namespace, or "default".
func (k *kubeFlags) namespace(ns string) (string, error) {
	if ns != "" {
		return ns, nil
	}
	got, _, err := k.loader().Namespace()
	if err != nil {
		return "", fmt.Errorf("read the namespace from the kubeconfig: %w (pass -n)", err)
	}
	return got, nil
}

// lister checks a listing command's -o, -n and -A, and gives the client
// and the namespace to read ("" for all).
func (k *kubeFlags) lister(output, ns string, all bool) (client.Client, string, error) {
	if err := checkOutput(output); err != nil {
		return nil, "", err
	}
	ns, err := k.scope(ns, all)
	if err != nil {
		return nil, "", err
	}
	c, err := k.client()
	return c, ns, err
}

// scope is the namespace a listing command reads: "" for every namespace
// with -A, else -n or the context's.
func (k *kubeFlags) scope(ns string, all bool) (string, error) {
	if all && ns != "" {
		return "", fmt.Errorf("-n %s and -A (all namespaces) ask for different things: pass one", ns)
	}
	if all {
		return "", nil
	}
	return k.namespace(ns)
}
