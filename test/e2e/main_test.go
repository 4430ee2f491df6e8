// Package e2e drives snapflow the way users do, against a real
// kube-apiserver with the real kubectl.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/snapflow/snapflow/functions/host"
	prunefn "github.com/snapflow/snapflow/functions/prune"
	"github.com/snapflow/snapflow/internal/prune/execute"
	"github.com/snapflow/snapflow/internal/prune/ledger"
	"github.com/snapflow/snapflow/test/harness"
)

var env *harness.Env

func TestMain(m *testing.M) {
	harness.Main(m, harness.MainOptions{
		Options: harness.Options{ExternalCRDs: harness.AllExternalCRDs},
		S3:      &harness.S3Options{Versioning: true},
		// The suite's cluster has a global volume policy baseline, as a
		// platform team would configure it.
		// The webhook acts as its chart ServiceAccount too, and the chart's
		// RBAC for every component is applied before it starts.
		Webhook: &harness.WebhookOptions{GlobalVolumePolicies: globalPolicies, Velero: true, ControllerUsers: functionIdentities(),
			RBAC: chartRBAC(), Identity: chartIdentity("webhook")},
		// Backups run for real: local node, functions and the kube source.
		// The functions act under the chart's RBAC, so every test also
		// proves the rules suffice.
		Functions: &harness.FunctionsOptions{RepositoryRetry: 2 * time.Second, RepositoryRetryMax: 8 * time.Second, GlobalVolumePoliciesConfigMap: harness.GlobalVolumePoliciesConfigMap,
			Clock: clock.Now, Extra: pruneFunction, Identity: chartIdentity,
			PodsAsServiceAccounts: true, MoverServiceAccount: chartRelease + "-mover", TenantRBAC: tenantRBAC,
			// Senders are checked as the chart configures it: the kube
			// source and the suite's "pipeline" (standing in for Argo
			// Events or Tekton) are trusted.
			SenderAudience: senderAudience, SourceServiceAccount: chartRelease + "-kube-source",
			EmitterServiceAccount: chartRelease + "-snapshot",
			TrustedSenders:        []string{chartIdentity("kube-source"), chartIdentity("snapshot"), "system:serviceaccount:" + harness.WebhookNamespace + ":" + pipelineSA}},
		AfterAll: checkRBACDrift,
	}, func(e *harness.Env) { env = e })
}

const globalPolicies = `version: v1
volumePolicies:
  - conditions: {storageClass: [scratch]}
    action: {type: skip}
  - conditions: {}
    action: {type: fs-backup}
`

// chartRelease is the release the functions' RBAC is rendered for; its
// name makes the chart's fullname plain "snapflow".
const chartRelease = "snapflow"

// chartRBAC renders the chart with its defaults (plus the opt-ins the suite
// drives: credential projection, the prune function, workloadExec hooks and
// Velero Backups) and keeps the
// ServiceAccounts, roles and bindings of the release namespace; mover pods
// run as their ServiceAccount, which the chart grants nothing.
func chartRBAC() []byte {
	rbac, tenant := renderRBAC()
	tenantDocs, releaseDocs = tenant, rbac
	// The pipeline may create Snapshots and Restores, as a Tekton or Argo
	// Events ServiceAccount would to send request events.
	return append(rbac, fmt.Sprintf(`---
apiVersion: v1
kind: ServiceAccount
metadata: {name: %[1]s, namespace: %[2]s}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: e2e-%[1]s}
rules: [{apiGroups: [kopiur.home-operations.com], resources: [snapshots, restores], verbs: [create]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: e2e-%[1]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: e2e-%[1]s}
subjects: [{kind: ServiceAccount, name: %[1]s, namespace: %[2]s}]
`, pipelineSA, harness.WebhookNamespace)...)
}

// senderAudience is the audience of the functions' sender tokens (the
// chart's default).
const senderAudience = "snapflow-functions"

// pipelineSA is the ServiceAccount the suite's own events come from.
const pipelineSA = "e2e-pipeline"

var (
	pipelineOnce  sync.Once
	pipelineToken string
)

// senderToken is the pipeline's token for the functions.
func senderToken(t *testing.T) string {
	t.Helper()
	pipelineOnce.Do(func() {
		tok, err := env.Functions.Token(context.Background(), harness.WebhookNamespace, pipelineSA)
		if err != nil {
			t.Fatal(err)
		}
		pipelineToken = tok
	})
	if pipelineToken == "" {
		t.Fatal("no pipeline token")
	}
	return pipelineToken
}

// tenantPlaceholder is the namespace the chart is rendered with in
// mover.namespaces; tenantRBAC swaps in each test namespace.
const tenantPlaceholder = "e2e-tenant-placeholder"

// tenantDocs are the chart's documents for tenantPlaceholder, and
// releaseDocs those of the release, set by chartRBAC.
var tenantDocs, releaseDocs []byte

// tenantRBAC is what the chart gives a namespace listed in mover.namespaces
// (its mover ServiceAccount, with no rights and no token):
// tests make namespaces as they go, and the harness provisions each one.
func tenantRBAC(ns string) []byte {
	return bytes.ReplaceAll(tenantDocs, []byte(tenantPlaceholder), []byte(ns))
}

// renderRBAC renders the chart once and returns its RBAC documents (and the
// prune function's record, which the chart creates): those
// of the release (cluster-scoped and release namespace) and those of the
// placeholder tenant namespace.
func renderRBAC() (release, tenant []byte) {
	helm, err := harness.Tool("helm")
	if err != nil {
		panic(err)
	}
	_, file, _, _ := goruntime.Caller(0)
	chart := filepath.Join(filepath.Dir(file), "..", "..", "charts", "snapflow")
	out, err := exec.Command(helm, "template", chartRelease, chart, "--namespace", harness.WebhookNamespace,
		"--set", "credentialProjection.enabled=true", "--set", "prune.function.enabled=true", "--set", "functions.snapshot.workloadExecHooks=true", "--set", "webhook.velero.enabled=true", "--set", "globalVolumePolicies.name="+harness.GlobalVolumePoliciesConfigMap, "--set", "mover.namespaces={"+tenantPlaceholder+"}").Output()
	if err != nil {
		panic(fmt.Sprintf("helm template: %v", err))
	}
	keep := map[string]bool{"ServiceAccount": true, "ClusterRole": true, "ClusterRoleBinding": true, "Role": true, "RoleBinding": true}
	var rel, ten bytes.Buffer
	for _, doc := range strings.Split(string(out), "\n---") {
		var head struct {
			Kind     string
			Metadata struct{ Namespace, Name string }
		}
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			continue
		}
		// The prune function's record is the chart's to create.
		if !keep[head.Kind] && (head.Kind != "ConfigMap" || head.Metadata.Name != ledger.ConfigMap) {
			continue
		}
		b := &rel
		if head.Metadata.Namespace == tenantPlaceholder {
			b = &ten
		}
		b.WriteString("---\n" + strings.TrimPrefix(doc, "\n") + "\n")
	}
	return rel.Bytes(), ten.Bytes()
}

// chartIdentity is the ServiceAccount the chart runs a component as.
func chartIdentity(component string) string {
	return "system:serviceaccount:" + harness.WebhookNamespace + ":" + chartRelease + "-" + component
}

// functionIdentities are the functions' ServiceAccounts, as the chart lists
// them to the webhook.
func functionIdentities() []string {
	var out []string
	for _, fn := range []string{"snapshot", "cleanup", "retention", "schedule", "restore", "verify", "prune", "maintenance"} {
		out = append(out, chartIdentity(fn))
	}
	return out
}

// asFunction is a client acting as snapflow's function fn, the only
// identities that may create Jobs labelled as snapflow's.
func asFunction(t *testing.T, fn string) client.Client {
	t.Helper()
	c, err := env.ClientAs(chartIdentity(fn))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// clock is the functions' clock: real time until a test sets it.
var clock = &harness.Clock{}

// pruneFunction serves the prune function with no default BackupRepo (each
// test's prune requested event names its own); versitygw needs path-style.
func pruneFunction(d harness.Deps) []host.Function {
	c := d.As("prune")
	fn := &prunefn.Function{Client: c, Settings: prunefn.Settings{Settings: execute.Settings{PathStyle: true}}, Emitter: d.Emitter, Recorder: d.Recorder("snapflow-prune"),
		Writer: c, Namespace: harness.WebhookNamespace}
	return []host.Function{{Name: "prune", Handle: fn.Handle}}
}
