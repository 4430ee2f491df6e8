package cli

import (
	"os"
	"path/filepath"
	"testing"
)

// A client built from the flags is not throttled on the client side, as
// controller-runtime's is not: the servers' request rate is left to the
// API server.
func TestKubeFlagsDoNotThrottle(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubeconfig")
	const cfg = `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u, namespace: apps}}]
current-context: x
`
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	k := newKubeFlags()
	*k.cf.KubeConfig = path
	rc, err := k.restConfig()
	if err != nil {
		t.Fatal(err)
	}
	if rc.QPS >= 0 {
		t.Fatalf("QPS %v: want client-side throttling off (-1)", rc.QPS)
	}
	if ns, err := k.namespace(""); err != nil || ns != "apps" {
		t.Fatalf("namespace %q %v: want the context's", ns, err)
	}
}
