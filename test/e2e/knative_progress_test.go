package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	authnv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/events"
	"github.com/snapflow/snapflow/test/harness"
)

// On Knative, an ApiServerSource sends a Job only when it changes, so a
// running backup's progress would refresh only on the minute tick. The
// chart's progress source runs beside it with exactly its rendered
// arguments and the Broker (K_SINK, as its SinkBinding sets it) as sink:
// it resends each running mover Job, with the SinkBinding's token, and
// sends nothing else.
func TestKnativeProgressSourceResendsRunningMovers(t *testing.T) {
	const ns = "knative-progress"
	ensureNamespace(t, ns, "")
	ctx := testContext(t)
	objs := renderChart(t, "snapflow", ns, map[string]any{"knative": map[string]any{"enabled": true}, "kubeSource": map[string]any{"progress": "1s"}})
	var args []string
	var admitted, widened bool
	var rbac []chartObject
	for _, o := range objs {
		switch {
		case o.kind() == "Deployment" && o.name() == "snapflow-progress-source":
			cs, _ := o.dig("spec", "template", "spec", "containers").([]any)
			for _, a := range cs[0].(map[string]any)["args"].([]any) {
				args = append(args, a.(string))
			}
		case o.kind() == "EventPolicy" && o.name() == "snapflow-progress-source":
			// Admitted, for update events of Jobs only.
			from, _ := json.Marshal(o.dig("spec", "from"))
			filters, _ := json.Marshal(o.dig("spec", "filters"))
			admitted = strings.Contains(string(from), `"snapflow-progress-source"`) &&
				string(filters) == `[{"exact":{"kind":"Job","type":"dev.knative.apiserver.resource.update"}}]`
		case o.kind() == "EventPolicy":
			from, _ := json.Marshal(o.dig("spec", "from"))
			widened = widened || strings.Contains(string(from), `"snapflow-progress-source"`)
		case o.name() == "snapflow-progress-source" && (o.kind() == "ServiceAccount" || o.kind() == "ClusterRole" || o.kind() == "ClusterRoleBinding"):
			rbac = append(rbac, o)
		}
	}
	if len(args) == 0 || !admitted || widened || len(rbac) != 3 {
		t.Fatalf("Knative mode: progress source args %v, admitted for Job updates only %v, admitted by an unfiltered policy %v, %d RBAC objects",
			args, admitted, widened, len(rbac))
	}

	// The Broker: records every event and the token it came with.
	var mu sync.Mutex
	type got struct{ id, typ, name, ns, auth string }
	var received []got
	broker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e, err := cloudevents.NewEventFromHTTPRequest(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		name, _ := e.Extensions()["name"].(string)
		evNS, _ := e.Extensions()["namespace"].(string)
		mu.Lock()
		received = append(received, got{e.ID(), e.Type(), name, evNS, r.Header.Get("Authorization")})
		mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	}))
	defer broker.Close()

	// The SinkBinding's OIDC token, at the path the chart names.
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("sinkbinding-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var run []string
	for _, a := range args {
		if a == "--token-file=/oidc/token" {
			a = "--token-file=" + tokenFile
		}
		run = append(run, a)
	}
	if strings.Join(run, " ") == strings.Join(args, " ") {
		t.Fatalf("the rendered source sends no token: %v", args)
	}

	// A running backup mover Job (suspended, so the local node leaves it
	// alone; its status says a pod is active), and a finished one.
	job := func(name string, active int32) *batchv1.Job {
		j := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{
				"app.kubernetes.io/managed-by": "snapflow", wellknown.LabelOp: "snapshot"}},
			Spec: batchv1.JobSpec{Suspend: ptr.To(true), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "mover", Image: "snapflow/snapflow"}}}}},
		}
		if err := asFunction(t, "snapshot").Create(ctx, j); err != nil {
			t.Fatal(err)
		}
		j.Status.Active = active
		if err := env.Client.Status().Update(ctx, j); err != nil {
			t.Fatal(err)
		}
		return j
	}
	job("running", 1)
	job("finished", 0)
	// Jobs that look active to every source: gone with the test.
	t.Cleanup(func() {
		_ = env.Client.DeleteAllOf(context.Background(), &batchv1.Job{}, client.InNamespace(ns), client.PropagationPolicy(metav1.DeletePropagationBackground))
	})

	bin, err := harness.Tool("snapflow")
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(sctx, bin, append([]string{"--kubeconfig", asServiceAccount(t, rbac, ns, "snapflow-progress-source")}, run...)...)
	cmd.Env = append(os.Environ(), "K_SINK="+broker.URL)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("progress source log:\n%s", out.String())
		}
	}()

	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, g := range received {
			if g.ns == ns && g.name == "running" {
				n++
			}
		}
		return n
	}
	resends := func(atLeast int) {
		eventually(t, func() error {
			if n := count(); n < atLeast {
				return fmt.Errorf("%d resends of the running Job so far, want %d", n, atLeast)
			}
			return nil
		})
	}
	resends(2)
	// A Job created now is an add event for the ApiServerSource, not for
	// it: two more resends later, none has come.
	job("later", 1)
	if err := env.Client.Delete(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "finished", Namespace: ns}}); err != nil {
		t.Fatal(err)
	}
	resends(count() + 2)
	mu.Lock()
	defer mu.Unlock()
	for _, g := range received {
		if !strings.Contains(g.id, "/progress-") || g.typ != events.APIServerUpdate {
			t.Errorf("the progress source sent a watch event (id %s, %s/%s): the ApiServerSource sends those", g.id, g.ns, g.name)
		}
		if g.ns == ns && g.name == "finished" {
			t.Errorf("a Job with no active pod was resent: %s", g.name)
		}
		if g.auth != "Bearer sinkbinding-token" {
			t.Errorf("event %s came with Authorization %q, not the SinkBinding's token", g.id, g.auth)
		}
	}
}

// asServiceAccount applies a rendered ServiceAccount and its roles and
// returns a kubeconfig holding a token of that ServiceAccount, so a
// process runs with exactly the rights the chart grants it.
func asServiceAccount(t *testing.T, rbac []chartObject, ns, sa string) string {
	t.Helper()
	var docs [][]byte
	for _, o := range rbac {
		b, err := yaml.Marshal(map[string]any(o))
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, b)
	}
	kubectl(t, bytes.Join(docs, []byte("---\n")), 0, "apply", "-f", "-")
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(testContext(t), sa, &authnv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["e2e"] = &clientcmdapi.Cluster{Server: env.Config.Host, CertificateAuthorityData: env.Config.CAData}
	cfg.AuthInfos[sa] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts[sa] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: sa, Namespace: ns}
	cfg.CurrentContext = sa
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}
