package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/snapflow/snapflow/test/harness"
)

// On Knative the functions take Knative Eventing's OIDC tokens: the Broker
// delivers a Trigger's events with a token of the ServiceAccount Knative
// made for that Trigger, minted (TokenRequest) for the audience the
// Trigger's subscriber names. The cleanup function is started with exactly
// the arguments the chart gives its Knative Service; its own Triggers'
// identities are served, another function's Trigger may not send it
// internal events, and a token for another function's audience is refused.
func TestKnativeSenderIdentity(t *testing.T) {
	const ns = "knative-oidc"
	ensureNamespace(t, ns, "")
	ctx := testContext(t)
	objs := renderChart(t, "snapflow", ns, map[string]any{"knative": map[string]any{"enabled": true}})
	var args []string
	audience := map[string]string{} // function Service -> its Triggers' audience
	var cleanupTriggers []string
	for _, o := range objs {
		switch {
		case o.kind() == "Service" && o.name() == "snapflow-cleanup" && o.dig("apiVersion") == "serving.knative.dev/v1":
			cs, _ := o.dig("spec", "template", "spec", "containers").([]any)
			for _, a := range cs[0].(map[string]any)["args"].([]any) {
				args = append(args, a.(string))
			}
		case o.kind() == "Trigger":
			svc, _ := o.dig("spec", "subscriber", "ref", "name").(string)
			aud, _ := o.dig("spec", "subscriber", "audience").(string)
			if prev, seen := audience[svc]; seen && prev != aud || aud == "" {
				t.Fatalf("Trigger %s names audience %q for %s (other Triggers: %q)", o.name(), aud, svc, prev)
			}
			audience[svc] = aud
			if svc == "snapflow-cleanup" {
				cleanupTriggers = append(cleanupTriggers, o.name())
			}
		}
	}
	if len(args) == 0 || len(cleanupTriggers) != 4 || audience["snapflow-cleanup"] == audience["snapflow-schedule"] {
		t.Fatalf("rendered args %v, cleanup Triggers %v, audiences %v", args, cleanupTriggers, audience)
	}
	if !slices.Contains(args, "--sender-audience="+audience["snapflow-cleanup"]) {
		t.Fatalf("the cleanup Service requires another audience than its Triggers send: %v", args)
	}

	// The ServiceAccounts Knative Eventing creates: <trigger>-oidc-<group>-<kind>.
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	oidcSA := func(trigger string) string { return trigger + "-oidc-eventing.knative.dev-trigger" }
	for _, trig := range append(cleanupTriggers, "snapflow-schedule-ping") {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: oidcSA(trig), Namespace: ns}}
		if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !strings.Contains(err.Error(), "already exists") {
			t.Fatal(err)
		}
	}
	token := func(trigger, aud string) string {
		tok, err := env.Functions.TokenFor(ctx, ns, oidcSA(trigger), aud)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}

	base := startFunction(t, args)
	update := func() []byte {
		e := cloudevents.NewEvent()
		e.SetID(fmt.Sprintf("oidc-%d", time.Now().UnixNano()))
		e.SetSource("https://kubernetes.default.svc")
		e.SetType("dev.knative.apiserver.resource.update")
		pvc := map[string]any{"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": map[string]any{"name": "unrelated", "namespace": ns}}
		if err := e.SetData(cloudevents.ApplicationJSON, pvc); err != nil {
			t.Fatal(err)
		}
		b, _ := e.MarshalJSON()
		return b
	}
	const ce = "application/cloudevents+json"
	for _, tc := range []struct {
		name, token string
		ok          bool
		want        int
	}{
		{"its own Trigger", token("snapflow-cleanup-update", audience["snapflow-cleanup"]), true, 0},
		{"another of its Triggers", token("snapflow-cleanup-ping", audience["snapflow-cleanup"]), true, 0},
		{"another function's Trigger", token("snapflow-schedule-ping", audience["snapflow-cleanup"]), false, http.StatusForbidden},
		{"its Trigger, token for another function", token("snapflow-cleanup-update", audience["snapflow-schedule"]), false, http.StatusUnauthorized},
		{"its Trigger, token for the Broker", token("snapflow-cleanup-update", "eventing.knative.dev/broker/"+ns+"/snapflow"), false, http.StatusUnauthorized},
		{"no token", "", false, http.StatusUnauthorized},
	} {
		code := postEventAs(t, tc.token, base, ce, update())
		if tc.ok && (code < 200 || code > 299) || !tc.ok && code != tc.want {
			t.Errorf("%s: answered %d (want 2xx: %v, else %d)", tc.name, code, tc.ok, tc.want)
		}
	}
}

// startFunction runs bin/snapflow with a rendered Knative Service's
// arguments (the listener moved to loopback) and returns its URL.
func startFunction(t *testing.T, args []string) string {
	t.Helper()
	bin, err := harness.Tool("snapflow")
	if err != nil {
		t.Fatal(err)
	}
	port, err := harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	var run []string
	for _, a := range args {
		if strings.HasPrefix(a, "--addr=") {
			a = "--addr=" + addr
		}
		run = append(run, a)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, append([]string{"--kubeconfig", env.Kubeconfig}, run...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cancel()
			<-done
		}
		cancel()
		if t.Failed() {
			b, _ := yaml.Marshal(run)
			t.Logf("function %s log:\n%s", b, out.String())
		}
	})
	base := "http://" + addr
	eventually(t, func() error {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return fmt.Errorf("function not up: %w", err)
		}
		resp.Body.Close()
		return nil
	})
	return base + "/"
}
