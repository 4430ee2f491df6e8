package harness

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/snapflow/snapflow/internal/certs"
	"github.com/snapflow/snapflow/webhook"
)

// WebhookNamespace is where the webhook keeps its certificate Secret.
const WebhookNamespace = "snapflow-system"

// ClientAs is a client of the control plane acting as user
// (impersonated), as a test needs to act as one of snapflow's functions.
func (cp *ControlPlane) ClientAs(user string) (client.Client, error) {
	cfg := rest.CopyConfig(cp.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	return client.New(cfg, client.Options{Scheme: cp.Scheme})
}

// JobControllerUser is who the local node creates Jobs' pods as: the Job
// controller's ServiceAccount, one of the webhook's default job
// controllers.
const JobControllerUser = "system:serviceaccount:kube-system:job-controller"

// Webhook is snapflow's admission server running in-process against the
// control plane, registered through the real webhook configurations in
// config/webhook/webhooks.yaml (with their Service pointed at a loopback URL,
// since there is no cluster network here).
type Webhook struct {
	URL        string
	MetricsURL string
	HealthURL  string
	LogPath    string
	// Access records the webhook's API requests when it acts as Identity.
	Access AccessLog
	stop   context.CancelFunc
	done   chan error
}

// WebhookOptions tunes StartWebhook.
type WebhookOptions struct {
	// CertPolicy and CertCheckInterval let a test rotate certificates quickly.
	CertPolicy        certs.Policy
	CertCheckInterval time.Duration
	// GlobalVolumePolicies, when set, is stored in the ConfigMap
	// GlobalVolumePoliciesConfigMap and configured as the global baseline.
	GlobalVolumePolicies string
	// Velero also registers config/webhook/velero.yaml and merges the global
	// policies into velero.io Backups, sweeping merged ConfigMaps quickly.
	Velero bool
	// ControllerUsers may write controller-owned metadata (the functions'
	// identities); the webhook's own (the suite's admin) always may.
	ControllerUsers []string
	// Identity, when set, is the user the webhook acts as (its chart
	// ServiceAccount), after RBAC is applied; its requests are recorded in
	// Access. Otherwise it acts as the suite's admin.
	Identity string
	RBAC     []byte
}

// GlobalVolumePoliciesConfigMap is the harness's global baseline ConfigMap.
const GlobalVolumePoliciesConfigMap = "global-volume-policies"

// StartWebhook registers the webhook configurations, starts the webhook and
// waits until the API server calls it successfully.
func (cp *ControlPlane) StartWebhook(opts WebhookOptions) (*Webhook, error) {
	ctx := context.Background()
	ports, err := FreePorts(3)
	if err != nil {
		return nil, err
	}
	w := &Webhook{
		URL:        fmt.Sprintf("https://127.0.0.1:%d", ports[0]),
		MetricsURL: fmt.Sprintf("http://127.0.0.1:%d/metrics", ports[1]),
		HealthURL:  fmt.Sprintf("http://127.0.0.1:%d", ports[2]),
		LogPath:    filepath.Join(cp.WorkDir, "webhook.log"),
		done:       make(chan error, 1),
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: WebhookNamespace}}
	if err := cp.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create %s: %w", WebhookNamespace, err)
	}
	files := []string{"webhooks.yaml"}
	if opts.Velero {
		files = append(files, "velero.yaml")
	}
	for _, f := range files {
		if err := cp.installWebhookConfigs(ctx, f, w.URL); err != nil {
			return nil, err
		}
	}
	var globalName string
	if opts.GlobalVolumePolicies != "" {
		globalName = GlobalVolumePoliciesConfigMap
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: WebhookNamespace, Name: globalName},
			Data: map[string]string{"policies.yaml": opts.GlobalVolumePolicies}}
		if err := cp.Client.Create(ctx, cm); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("create the global volume policies: %w", err)
		}
	}
	logFile, err := os.Create(w.LogPath)
	if err != nil {
		return nil, err
	}
	log := logr.Logger(funcr.New(func(prefix, args string) { fmt.Fprintln(logFile, prefix, args) }, funcr.Options{Verbosity: 1}))
	ctrllog.SetLogger(log)

	cfg := cp.Config
	if len(opts.RBAC) > 0 {
		if err := cp.applyRBAC(ctx, opts.RBAC); err != nil {
			return nil, err
		}
	}
	if opts.Identity != "" {
		cfg = rest.CopyConfig(cp.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: opts.Identity}
		cfg.Wrap(w.Access.Wrap("webhook"))
	}
	runCtx, stop := context.WithCancel(ctx)
	w.stop = stop
	go func() {
		w.done <- webhook.Run(runCtx, cfg, webhook.Options{
			Host: "127.0.0.1", Port: ports[0], Namespace: WebhookNamespace,
			ExtraSANs:       []string{"127.0.0.1"},
			MutatingConfigs: []string{webhook.DefaultMutatingConfig}, ValidatingConfigs: []string{webhook.DefaultValidatingConfig},
			CertPolicy: opts.CertPolicy, CertCheckInterval: opts.CertCheckInterval,
			GlobalVolumePoliciesConfigMap: globalName, ControllerUsers: opts.ControllerUsers,
			VeleroBackups: opts.Velero, VeleroSweepInterval: 200 * time.Millisecond, VeleroGrace: 2 * time.Second,
			MetricsAddr: fmt.Sprintf("127.0.0.1:%d", ports[1]), HealthAddr: fmt.Sprintf("127.0.0.1:%d", ports[2]),
			Log: log,
		})
		logFile.Close()
	}()
	if err := cp.waitForWebhook(w); err != nil {
		w.Stop()
		return nil, err
	}
	return w, nil
}

// Stop stops the webhook and waits for it to exit.
func (w *Webhook) Stop() {
	w.stop()
	select {
	case <-w.done:
	case <-time.After(10 * time.Second):
	}
}

// Log returns what the webhook logged so far.
func (w *Webhook) Log() string {
	b, _ := os.ReadFile(w.LogPath)
	return string(b)
}

// installWebhookConfigs creates the configurations from config/webhook with
// each Service reference replaced by the loopback URL of the same path.
func (cp *ControlPlane) installWebhookConfigs(ctx context.Context, file, base string) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	raw, err := os.ReadFile(filepath.Join(root, "config", "webhook", file))
	if err != nil {
		return err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		var probe struct {
			Kind string `json:"kind"`
		}
		var b json.RawMessage
		if err := dec.Decode(&b); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("%s: %w", file, err)
		}
		if err := json.Unmarshal(b, &probe); err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		var obj client.Object
		switch probe.Kind {
		case "MutatingWebhookConfiguration":
			var cfg admissionregv1.MutatingWebhookConfiguration
			if err := json.Unmarshal(b, &cfg); err != nil {
				return err
			}
			for i := range cfg.Webhooks {
				toURL(&cfg.Webhooks[i].ClientConfig, base)
			}
			obj = &cfg
		case "ValidatingWebhookConfiguration":
			var cfg admissionregv1.ValidatingWebhookConfiguration
			if err := json.Unmarshal(b, &cfg); err != nil {
				return err
			}
			for i := range cfg.Webhooks {
				toURL(&cfg.Webhooks[i].ClientConfig, base)
			}
			obj = &cfg
		default:
			continue
		}
		if err := cp.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create %s %s: %w", probe.Kind, obj.GetName(), err)
		}
	}
}

func toURL(cc *admissionregv1.WebhookClientConfig, base string) {
	path := ""
	if cc.Service != nil && cc.Service.Path != nil {
		path = *cc.Service.Path
	}
	u := base + path
	cc.Service, cc.URL = nil, &u
}

// waitForWebhook waits until the webhook is ready and the API server routes
// admission to it: a dry-run of an invalid Snapshot is denied by the webhook.
func (cp *ControlPlane) waitForWebhook(w *Webhook) error {
	deadline := time.Now().Add(Timeout(60 * time.Second))
	probe := []byte(`{"apiVersion":"kopiur.home-operations.com/v1alpha1","kind":"Snapshot","metadata":{"name":"webhook-probe","namespace":"default"},"spec":{"policyRef":{"name":"p"},"tags":{"kopiur-probe":"x"}}}`)
	var last string
	for time.Now().Before(deadline) {
		select {
		case err := <-w.done:
			return fmt.Errorf("webhook exited: %v\n%s", err, w.Log())
		default:
		}
		if resp, err := http.Get(w.HealthURL + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				res, err := cp.Kubectl(context.Background(), probe, "create", "--dry-run=server", "-f", "-")
				if err != nil {
					return err
				}
				if res.ExitCode != 0 && strings.Contains(res.Stderr, "reserved") {
					return nil
				}
				last = res.Stdout + res.Stderr
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("the API server did not route admission to the webhook within 60s (last: %s)\n%s", last, w.Log())
}

// InsecureClient talks to the webhook without verifying its certificate, to
// inspect what it serves.
func InsecureClient() *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // test inspection of the served certificate
}
