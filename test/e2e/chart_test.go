package e2e

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/snapflow/snapflow/test/harness"
)

// The Helm chart (charts/snapflow) and the plain manifests next to it
// (config/knative, config/examples): linted, rendered over a matrix of
// values, and every rendered object applied with a server-side dry run to
// the suite's control plane, which has snapflow's CRDs and Knative Serving
// and Eventing's installed.

// notInstalled are the API groups whose CRDs the control plane does not
// have, so their objects cannot be dry-run applied. They are filtered
// explicitly, by group, and only checked to render as objects with
// apiVersion, kind and metadata.name:
//   - cert-manager.io: the Issuer and Certificate of webhook.tls.mode cert-manager;
//   - monitoring.coreos.com: ServiceMonitor, PodMonitor and PrometheusRule (Prometheus Operator);
//   - argoproj.io, triggers.tekton.dev: config/examples only.
var notInstalled = map[string]bool{
	"cert-manager.io":       true,
	"monitoring.coreos.com": true,
	"argoproj.io":           true,
	"triggers.tekton.dev":   true,
}

// chartObject is one rendered manifest, decoded loosely.
type chartObject map[string]any

func (o chartObject) kind() string       { s, _ := o["kind"].(string); return s }
func (o chartObject) apiVersion() string { s, _ := o["apiVersion"].(string); return s }
func (o chartObject) group() string {
	if g, _, ok := strings.Cut(o.apiVersion(), "/"); ok {
		return g
	}
	return ""
}
func (o chartObject) meta(field string) string {
	m, _ := o["metadata"].(map[string]any)
	s, _ := m[field].(string)
	return s
}
func (o chartObject) name() string { return o.meta("name") }
func (o chartObject) key() string  { return o.kind() + " " + o.meta("namespace") + "/" + o.name() }

// dig walks maps by key.
func (o chartObject) dig(path ...string) any {
	var cur any = map[string]any(o)
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[p]
	}
	return cur
}

func helmTool(t *testing.T) string {
	t.Helper()
	p, err := harness.Tool("helm")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// runHelm runs helm with its config, cache and data directories in a temp
// dir, so the test neither reads nor writes the user's.
func runHelm(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), harness.Timeout(2*time.Minute))
	defer cancel()
	home := t.TempDir()
	cmd := exec.CommandContext(ctx, helmTool(t), args...)
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"), "HELM_DATA_HOME="+filepath.Join(home, "data"))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	return out.String(), errb.String(), err
}

// writeValues writes a values file for helm's -f.
func writeValues(t *testing.T, values map[string]any) string {
	t.Helper()
	b, err := yaml.Marshal(values)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// decodeManifests splits a multi-document YAML stream into objects and
// checks each has an apiVersion, a kind and a name.
func decodeManifests(t *testing.T, what string, raw []byte) []chartObject {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	var out []chartObject
	for {
		var o chartObject
		if err := dec.Decode(&o); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatalf("%s does not parse as YAML: %v", what, err)
		}
		if len(o) == 0 {
			continue // an empty document (a disabled template)
		}
		if o.apiVersion() == "" || o.kind() == "" || (o.name() == "" && o.meta("generateName") == "") {
			t.Fatalf("%s: an object without apiVersion, kind or metadata.name:\n%v", what, o)
		}
		out = append(out, o)
	}
	return out
}

// dryRunApply applies objs with `kubectl apply --dry-run=server` and checks
// the API server accepted every one of them.
func dryRunApply(t *testing.T, objs []chartObject) {
	t.Helper()
	if len(objs) == 0 {
		return
	}
	var buf bytes.Buffer
	for _, o := range objs {
		b, err := yaml.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		buf.WriteString("---\n")
		buf.Write(b)
	}
	res := kubectl(t, buf.Bytes(), 0, "apply", "--dry-run=server", "-f", "-")
	if n := strings.Count(res.Stdout, "(server dry run)"); n != len(objs) {
		t.Fatalf("kubectl reported %d objects, want %d:\n%s", n, len(objs), res.Stdout)
	}
}

// splitInstalled separates what the control plane can take from the
// explicitly filtered kinds (notInstalled).
func splitInstalled(objs []chartObject) (apply, renderOnly []chartObject) {
	for _, o := range objs {
		if notInstalled[o.group()] {
			renderOnly = append(renderOnly, o)
		} else {
			apply = append(apply, o)
		}
	}
	return apply, renderOnly
}

func chartDir(t *testing.T) string { return repoPath(t, "charts", "snapflow") }

// testCertificate returns a self-signed serving certificate, its key and CA
// (the certificate itself) in PEM, for webhook.tls.mode manual.
func testCertificate(t *testing.T, dns string) (cert, key, ca string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: dns}, DNSNames: []string{dns},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	c := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	return c, string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})), c
}

func TestChartLint(t *testing.T) {
	cert, key, ca := testCertificate(t, "snapflow-webhook.snapflow-system.svc")
	for name, values := range map[string]map[string]any{
		"defaults": {},
		"knative-cert-manager-prune": {
			"knative": map[string]any{"enabled": true},
			"webhook": map[string]any{"tls": map[string]any{"mode": "cert-manager"}},
			"prune": map[string]any{"enabled": true, "backupRepo": "kb-repo", "function": map[string]any{"enabled": true},
				"s3Source": map[string]any{"enabled": true}},
			"monitoring": map[string]any{"serviceMonitor": map[string]any{"enabled": true}, "prometheusRule": map[string]any{"enabled": true},
				"grafanaDashboard": map[string]any{"enabled": true}},
		},
		"manual-cronjob": {
			"webhook": map[string]any{"tls": map[string]any{"mode": "manual", "manual": map[string]any{"cert": cert, "key": key, "ca": ca}}},
			"prune":   map[string]any{"enabled": true, "backupRepo": "kb-repo", "cronjob": map[string]any{"enabled": true}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			out, errOut, err := runHelm(t, "lint", "--strict", chartDir(t), "-f", writeValues(t, values))
			if err != nil {
				t.Fatalf("helm lint: %v\n%s\n%s", err, out, errOut)
			}
		})
	}
}

// The chart ships the CRDs `make generate` writes; hack/chart-crds.sh
// copies them.
func TestChartCRDsMatchGenerated(t *testing.T) {
	want, _ := filepath.Glob(repoPath(t, "config", "crd", "bases", "*.yaml"))
	have, _ := filepath.Glob(filepath.Join(chartDir(t), "crds", "*.yaml"))
	names := func(paths []string) []string {
		var out []string
		for _, p := range paths {
			out = append(out, filepath.Base(p))
		}
		sort.Strings(out)
		return out
	}
	if len(want) == 0 {
		t.Fatal("no CRDs in config/crd/bases")
	}
	if !reflect.DeepEqual(names(want), names(have)) {
		t.Fatalf("charts/snapflow/crds holds %v, config/crd/bases %v: run hack/chart-crds.sh", names(have), names(want))
	}
	for _, w := range want {
		h := filepath.Join(chartDir(t), "crds", filepath.Base(w))
		if !bytes.Equal(readFile(t, w), readFile(t, h)) {
			t.Errorf("%s drifted from config/crd/bases: run hack/chart-crds.sh", h)
		}
	}
}

// chartCase is one point of the values matrix.
type chartCase struct {
	knative    bool
	tls        string // self, cert-manager, manual
	pruneCron  bool   // prune as a CronJob (live deletion, confirmed) instead of a plan Job
	monitoring bool
	// projection grants the functions cluster-wide Secret access for
	// credential projection (an opt-in ClusterRole of its own).
	projection bool
	// exec turns workloadExec hooks and streams on, granting the snapshot
	// and restore functions pods/exec.
	exec bool
	// noProgress turns progress off, and with it pods/log.
	noProgress bool
}

func (c chartCase) name() string {
	mode := "deployments"
	if c.knative {
		mode = "knative"
	}
	prune := "prune-job"
	if c.pruneCron {
		prune = "prune-cronjob"
	}
	return mode + "-" + c.tls + "-" + prune
}

// values builds the case's values; ns is the release namespace, and the
// mover and secret namespaces derive from it.
func (c chartCase) values(t *testing.T, ns string) map[string]any {
	prune := map[string]any{
		"enabled": true, "backupRepo": "kb-repo", "region": "eu-west-1", "pathStyle": true,
		"secretReader": map[string]any{"secrets": []any{
			map[string]any{"namespace": ns + "-kb", "name": "kb-repo-credential"},
			map[string]any{"namespace": ns + "-kb", "name": "kb-repo-generated"},
		}},
	}
	if c.pruneCron {
		// Live deletion of strays: the word these flags need.
		prune["command"], prune["dryRun"], prune["confirm"] = "prune", false, "DELETE-STRAY"
		prune["deleteRepositoryStray"] = true
		prune["cronjob"] = map[string]any{"enabled": true, "timeZone": "Etc/UTC"}
	}
	if c.knative || c.pruneCron {
		prune["function"] = map[string]any{"enabled": true}
		prune["s3Source"] = map[string]any{"enabled": true, "buckets": []any{"kb-backups"}}
	}
	webhook := map[string]any{"tls": map[string]any{"mode": c.tls}}
	switch c.tls {
	case "manual":
		cert, key, ca := testCertificate(t, "rel-snapflow-webhook."+ns+".svc")
		webhook["tls"].(map[string]any)["manual"] = map[string]any{"cert": cert, "key": key, "ca": ca}
	case "self":
		webhook["velero"] = map[string]any{"enabled": true}
		webhook["tls"].(map[string]any)["extraSANs"] = []any{"webhook.example.com"}
	}
	return map[string]any{
		"knative":              map[string]any{"enabled": c.knative},
		"webhook":              webhook,
		"prune":                prune,
		"mover":                map[string]any{"namespaces": []any{ns + "-apps"}},
		"functions":            map[string]any{"maxConcurrentJobs": 4, "snapshot": map[string]any{"workloadExecHooks": c.exec}, "progress": !c.noProgress},
		"globalVolumePolicies": map[string]any{"name": "global-volume-policies", "create": true},
		"credentialProjection": map[string]any{"enabled": c.projection},
		"monitoring": map[string]any{
			"serviceMonitor":   map[string]any{"enabled": c.monitoring},
			"prometheusRule":   map[string]any{"enabled": c.monitoring},
			"grafanaDashboard": map[string]any{"enabled": c.monitoring},
			"exporter":         map[string]any{"networkPolicyFrom": []any{map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"name": "monitoring"}}}}},
		},
	}
}

// renderChart runs helm template and decodes the result.
func renderChart(t *testing.T, release, ns string, values map[string]any, extra ...string) []chartObject {
	t.Helper()
	args := append([]string{"template", release, chartDir(t), "--namespace", ns, "-f", writeValues(t, values)}, extra...)
	out, errOut, err := runHelm(t, args...)
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, errOut)
	}
	return decodeManifests(t, "helm template "+release, []byte(out))
}

func TestChartRenderMatrix(t *testing.T) {
	i := 0
	for _, knative := range []bool{false, true} {
		for _, tls := range []string{"self", "cert-manager", "manual"} {
			for _, cron := range []bool{false, true} {
				c := chartCase{knative: knative, tls: tls, pruneCron: cron, monitoring: i%2 == 0, projection: i%3 == 0, exec: i%2 == 1, noProgress: i%3 == 1}
				i++
				ns := fmt.Sprintf("chart-%d", i)
				t.Run(c.name(), func(t *testing.T) {
					for _, n := range []string{ns, ns + "-apps", ns + "-kb"} {
						ensureNamespace(t, n, "")
					}
					objs := renderChart(t, "rel", ns, c.values(t, ns), "--include-crds")
					checkCase(t, c, ns, objs)
					checkWiring(t, objs)
					apply, renderOnly := splitInstalled(objs)
					for _, o := range renderOnly {
						if !c.monitoring && o.group() == "monitoring.coreos.com" {
							t.Errorf("%s rendered with monitoring disabled", o.key())
						}
					}
					dryRunApply(t, apply)
				})
			}
		}
	}
}

// checkCase asserts the case's mode shows in what rendered.
func checkCase(t *testing.T, c chartCase, ns string, objs []chartObject) {
	t.Helper()
	has := map[string]chartObject{}
	count := map[string]int{}
	for _, o := range objs {
		has[o.kind()+"/"+o.name()] = o
		count[o.kind()]++
	}
	want := func(key string) chartObject {
		t.Helper()
		o, ok := has[key]
		if !ok {
			t.Fatalf("%s did not render", key)
		}
		return o
	}
	absent := func(key string) {
		t.Helper()
		if _, ok := has[key]; ok {
			t.Errorf("%s rendered, but should not in this case", key)
		}
	}
	if count["CustomResourceDefinition"] != 7 {
		t.Errorf("%d CRDs rendered with --include-crds, want 7", count["CustomResourceDefinition"])
	}
	want("Deployment/rel-snapflow-webhook")
	mut := want("MutatingWebhookConfiguration/rel-snapflow-mutating")
	want("ValidatingWebhookConfiguration/rel-snapflow-validating")
	webhooks, _ := mut["webhooks"].([]any)
	if len(webhooks) != 7 {
		t.Errorf("%d mutating webhooks, want one per kind (7)", len(webhooks))
	}
	for _, w := range webhooks {
		cc := chartObject(w.(map[string]any)).dig("clientConfig", "service")
		svc, _ := cc.(map[string]any)
		if svc["name"] != "rel-snapflow-webhook" || svc["namespace"] != ns {
			t.Errorf("webhook points at %v, want the chart's Service", svc)
		}
	}
	args := fmt.Sprint(want("Deployment/rel-snapflow-webhook").dig("spec", "template", "spec", "containers"))
	switch c.tls {
	case "self":
		want("Role/rel-snapflow-webhook-tls")
		for _, a := range []string{"--tls-secret=rel-snapflow-webhook-tls", "--mutating-configs=rel-snapflow-mutating,rel-snapflow-velero", "--velero-backups"} {
			if !strings.Contains(args, a) {
				t.Errorf("webhook args lack %s: %s", a, args)
			}
		}
		want("MutatingWebhookConfiguration/rel-snapflow-velero")
		absent("Certificate/rel-snapflow-webhook")
	case "cert-manager":
		want("Issuer/rel-snapflow-webhook")
		want("Certificate/rel-snapflow-webhook")
		absent("Role/rel-snapflow-webhook-tls")
		if a := mut.dig("metadata", "annotations", "cert-manager.io/inject-ca-from"); a != ns+"/rel-snapflow-webhook" {
			t.Errorf("inject-ca-from annotation is %v", a)
		}
		if !strings.Contains(args, "--tls-cert=/tls/tls.crt") {
			t.Errorf("webhook does not serve cert-manager's certificate: %s", args)
		}
	case "manual":
		sec := want("Secret/rel-snapflow-webhook-tls")
		if sec["type"] != "kubernetes.io/tls" {
			t.Errorf("manual TLS Secret type %v", sec["type"])
		}
		absent("Role/rel-snapflow-webhook-tls")
		for _, w := range webhooks {
			if chartObject(w.(map[string]any)).dig("clientConfig", "caBundle") == nil {
				t.Error("manual TLS rendered a webhook without caBundle")
			}
		}
	}
	if c.knative {
		want("Broker/rel-snapflow")
		want("ApiServerSource/rel-snapflow-kube")
		want("PingSource/rel-snapflow-tick")
		want("SinkBinding/rel-snapflow-functions")
		for _, fn := range []string{"snapshot", "cleanup", "retention", "schedule", "restore", "verify", "maintenance", "prune"} {
			if o := want("Service/rel-snapflow-" + fn); o.group() != "serving.knative.dev" {
				t.Errorf("function %s is a %s, want a Knative Service", fn, o.apiVersion())
			}
		}
		// 7 functions x (3 ApiServerSource types + tick), retention x2,
		// snapshot, restore, prune x3.
		if count["Trigger"] != 7*4+2+1+1+3 {
			t.Errorf("%d Triggers, want %d", count["Trigger"], 7*4+2+1+1+3)
		}
		absent("Deployment/rel-snapflow-kube-source")
		// The progress-only source, fed to the Broker by its own SinkBinding
		// and admitted by an EventPolicy of its own for Job updates only,
		// exists only while progress is on.
		if broker := fmt.Sprint(has["EventPolicy/rel-snapflow-broker"]); strings.Contains(broker, "rel-snapflow-progress-source") {
			t.Errorf("the Broker's main EventPolicy admits the progress source unfiltered: %s", broker)
		}
		if c.noProgress {
			absent("Deployment/rel-snapflow-progress-source")
			absent("SinkBinding/rel-snapflow-progress-source")
			absent("EventPolicy/rel-snapflow-progress-source")
		} else {
			src := fmt.Sprint(want("Deployment/rel-snapflow-progress-source").dig("spec", "template", "spec", "containers"))
			for _, a := range []string{"--only-progress", "--progress=10s"} {
				if !strings.Contains(src, a) {
					t.Errorf("the progress source lacks %s: %s", a, src)
				}
			}
			if strings.Contains(src, "--sink") {
				t.Errorf("the progress source names a sink; its SinkBinding sets K_SINK: %s", src)
			}
			if subject := want("SinkBinding/rel-snapflow-progress-source").dig("spec", "subject", "name"); subject != "rel-snapflow-progress-source" {
				t.Errorf("the progress source's SinkBinding binds %v", subject)
			}
			if rules := fmt.Sprint(want("ClusterRole/rel-snapflow-progress-source")["rules"]); rules != "[map[apiGroups:[batch] resources:[jobs] verbs:[list watch]]]" {
				t.Errorf("the progress source may do more than watch Jobs: %s", rules)
			}
			if f := fmt.Sprint(want("EventPolicy/rel-snapflow-progress-source").dig("spec", "filters")); f != "[map[exact:map[kind:Job type:dev.knative.apiserver.resource.update]]]" {
				t.Errorf("the progress source's EventPolicy filters %s, want Job updates only", f)
			}
		}
	} else {
		src := want("Deployment/rel-snapflow-kube-source")
		sinks := fmt.Sprint(src.dig("spec", "template", "spec", "containers"))
		for _, fn := range []string{"snapshot", "cleanup", "retention", "schedule", "restore", "verify", "maintenance"} {
			want("Deployment/rel-snapflow-" + fn)
			if !strings.Contains(sinks, "--sink=http://rel-snapflow-"+fn+"."+ns+".svc") {
				t.Errorf("the kube source does not feed %s: %s", fn, sinks)
			}
		}
		if strings.Contains(sinks, "rel-snapflow-prune") {
			t.Errorf("the kube source feeds the prune function (every resync would plan the bucket): %s", sinks)
		}
		absent("Broker/rel-snapflow")
		if count["Trigger"] != 0 {
			t.Errorf("%d Triggers rendered without Knative", count["Trigger"])
		}
	}
	// The exporter: read-only, scraped by the listed peers only, its series
	// keeping their own namespace label.
	want("Deployment/rel-snapflow-exporter")
	// It reads: list and watch, and get on ConfigMaps alone (the
	// resourcePolicy documents coverage judges with).
	exporterRules := want("ClusterRole/rel-snapflow-exporter")["rules"].([]any)
	for _, r := range exporterRules {
		rule := r.(map[string]any)
		verbs, resources := fmt.Sprint(rule["verbs"]), fmt.Sprint(rule["resources"])
		if verbs != "[list watch]" && (verbs != "[get]" || resources != "[configmaps]") {
			t.Errorf("the exporter may do more than read: %v", rule)
		}
	}
	if rules := fmt.Sprint(exporterRules); !strings.Contains(rules, "persistentvolumeclaims") {
		t.Errorf("the exporter may not watch PVCs for snapflow_pvc_protected: %s", rules)
	}
	if from := fmt.Sprint(want("NetworkPolicy/rel-snapflow-exporter").dig("spec", "ingress")); !strings.Contains(from, "monitoring") {
		t.Errorf("the exporter's NetworkPolicy admits %s", from)
	}
	if c.monitoring {
		if h := want("ServiceMonitor/rel-snapflow-exporter").dig("spec", "endpoints"); !strings.Contains(fmt.Sprint(h), "honorLabels:true") {
			t.Errorf("the exporter's ServiceMonitor overwrites the series' namespace label: %v", h)
		}
	}
	if c.pruneCron {
		cj := want("CronJob/rel-snapflow-prune")
		pod := fmt.Sprint(cj.dig("spec", "jobTemplate", "spec", "template", "spec", "containers"))
		for _, a := range []string{"prune prune", "--dry-run=false", "--confirm=DELETE-STRAY", "--delete-repository-stray"} {
			if !strings.Contains(pod, a) {
				t.Errorf("prune CronJob lacks %q: %s", a, pod)
			}
		}
		absent("Job/rel-snapflow-prune-plan-1")
	} else {
		job := want("Job/rel-snapflow-prune-plan-1")
		pod := fmt.Sprint(job.dig("spec", "template", "spec", "containers"))
		if !strings.Contains(pod, "prune plan") || strings.Contains(pod, "--confirm") {
			t.Errorf("the default prune Job should only plan: %s", pod)
		}
		absent("CronJob/rel-snapflow-prune")
	}
	// Secret reads are by name only, in the Secrets' namespace.
	role := want("Role/rel-snapflow-prune-secrets")
	if role.meta("namespace") != ns+"-kb" {
		t.Errorf("secret reader Role in %q", role.meta("namespace"))
	}
	rules := fmt.Sprint(role["rules"])
	if !strings.Contains(rules, "kb-repo-credential") || !strings.Contains(rules, "kb-repo-generated") || strings.Contains(rules, "list") {
		t.Errorf("secret reader rules: %s", rules)
	}
	// Cluster-wide Secret access exists only as the opt-in projection
	// roles, each bound to the functions that need its verbs: cleanup
	// reads sources anywhere but writes copies only in the release
	// namespace, and only the sweeping functions may list.
	const projection = "rel-snapflow-credential-projection"
	projectionRoles := map[string]string{projection: "get,list,create,update,delete", projection + "-copy": "get,create,update,delete", projection + "-sources": "get"}
	if c.projection {
		for role, binds := range map[string]string{projection: "rel-snapflow-snapshot,rel-snapflow-verify,rel-snapflow-maintenance", projection + "-copy": "rel-snapflow-restore",
			projection + "-sources": "rel-snapflow-cleanup"} {
			if got := subjectsOf(want("ClusterRoleBinding/" + role)); got != binds {
				t.Errorf("%s binds %s, want %s", role, got, binds)
			}
			var verbs []string
			for _, v := range want("ClusterRole/" + role)["rules"].([]any)[0].(map[string]any)["verbs"].([]any) {
				verbs = append(verbs, fmt.Sprint(v))
			}
			if got := strings.Join(verbs, ","); got != projectionRoles[role] {
				t.Errorf("%s grants %s, want %s", role, got, projectionRoles[role])
			}
		}
		batches := want("Role/" + projection + "-batches")
		if batches.meta("namespace") != ns || subjectsOf(want("RoleBinding/"+projection+"-batches")) != "rel-snapflow-cleanup" {
			t.Errorf("cleanup's copy Role: %v", batches)
		}
	} else {
		for role := range projectionRoles {
			absent("ClusterRole/" + role)
		}
		absent("Role/" + projection + "-batches")
	}
	// pods/exec, and the snapshot and restore functions' flag for it, only
	// when the operator turns workloadExec hooks (and streams) on.
	execArgs := 0
	for _, o := range objs {
		execArgs += strings.Count(fmt.Sprint(o), "--workload-exec-hooks")
	}
	if want := map[bool]int{false: 0, true: 2}[c.exec]; execArgs != want {
		t.Errorf("--workload-exec-hooks rendered %d times, want %d", execArgs, want)
	}
	// pods/log for the snapshot and restore functions, unless progress is off.
	if want, got := map[bool]int{false: 0, true: 2}[c.noProgress], strings.Count(fmt.Sprint(objs), "--progress=false"); got != want {
		t.Errorf("--progress=false rendered %d times with progress off=%v, want %d", got, c.noProgress, want)
	}
	logGrants := 0
	defer func() {
		if want := map[bool]int{false: 2, true: 0}[c.noProgress]; logGrants != want {
			t.Errorf("pods/log granted %d times with progress off=%v, want %d (snapshot and restore)", logGrants, c.noProgress, want)
		}
	}()
	execGrants := 0
	defer func() {
		if c.exec && execGrants != 2 {
			t.Errorf("the snapshot and restore functions are granted pods/exec %d times with workloadExecHooks on, want 2", execGrants)
		}
	}()
	for _, o := range objs {
		if o.kind() != "ClusterRole" {
			continue
		}
		for _, r := range o["rules"].([]any) {
			rule := r.(map[string]any)
			for _, res := range rule["resources"].([]any) {
				if res == "pods/log" {
					if o.name() != "rel-snapflow-snapshot" && o.name() != "rel-snapflow-restore" {
						t.Errorf("ClusterRole %s grants pods/log", o.name())
					}
					logGrants++
				}
				if res == "pods/exec" && !(c.exec && (o.name() == "rel-snapflow-snapshot" || o.name() == "rel-snapflow-restore")) {
					t.Errorf("ClusterRole %s grants pods/exec with workloadExecHooks=%v", o.name(), c.exec)
				} else if res == "pods/exec" {
					execGrants++
				}
				if _, ok := projectionRoles[o.name()]; (res == "secrets" && !(c.projection && ok)) || res == "*" {
					t.Errorf("ClusterRole %s grants %v on %v: Secrets are read through named Roles only", o.name(), rule["verbs"], res)
				}
			}
			for _, verb := range rule["verbs"].([]any) {
				if verb == "*" {
					t.Errorf("ClusterRole %s grants every verb on %v", o.name(), rule["resources"])
				}
			}
		}
	}
}

// subjectsOf lists a binding's subjects' names, comma-separated.
func subjectsOf(b chartObject) string {
	var names []string
	for _, s := range b["subjects"].([]any) {
		names = append(names, fmt.Sprint(s.(map[string]any)["name"]))
	}
	return strings.Join(names, ",")
}

// checkWiring checks that every ServiceAccount a pod, binding or source
// uses, and every role a binding names, is rendered too, and that every
// name carries the release prefix.
func checkWiring(t *testing.T, objs []chartObject) {
	t.Helper()
	sas := map[string]bool{}
	roles := map[string]bool{}
	for _, o := range objs {
		switch o.kind() {
		case "ServiceAccount":
			sas[o.meta("namespace")+"/"+o.name()] = true
		case "Role":
			roles["Role "+o.meta("namespace")+"/"+o.name()] = true
		case "ClusterRole":
			roles["ClusterRole /"+o.name()] = true
		}
		if o.kind() != "CustomResourceDefinition" && o.name() != "global-volume-policies" && !strings.HasPrefix(o.name(), "rel-snapflow") {
			t.Errorf("%s is not named with the release prefix", o.key())
		}
		if labels, _ := o.dig("metadata", "labels").(map[string]any); o.kind() != "CustomResourceDefinition" &&
			(labels["app.kubernetes.io/instance"] != "rel" || labels["app.kubernetes.io/name"] != "snapflow" || labels["app.kubernetes.io/component"] == nil) {
			t.Errorf("%s lacks the app.kubernetes.io labels: %v", o.key(), labels)
		}
	}
	needSA := func(o chartObject, ns, name string) {
		t.Helper()
		if name != "" && !sas[ns+"/"+name] {
			t.Errorf("%s uses ServiceAccount %s/%s, which the chart does not render", o.key(), ns, name)
		}
	}
	for _, o := range objs {
		ns := o.meta("namespace")
		switch o.kind() {
		case "RoleBinding", "ClusterRoleBinding":
			ref := o["roleRef"].(map[string]any)
			key := fmt.Sprintf("%s %s/%s", ref["kind"], map[bool]string{true: ns}[ref["kind"] == "Role"], ref["name"])
			if !roles[key] {
				t.Errorf("%s binds %s, which the chart does not render", o.key(), key)
			}
			for _, s := range o["subjects"].([]any) {
				sub := s.(map[string]any)
				needSA(o, fmt.Sprint(sub["namespace"]), fmt.Sprint(sub["name"]))
			}
		case "Deployment", "Job":
			name, _ := o.dig("spec", "template", "spec", "serviceAccountName").(string)
			needSA(o, ns, name)
		case "CronJob":
			name, _ := o.dig("spec", "jobTemplate", "spec", "template", "spec", "serviceAccountName").(string)
			needSA(o, ns, name)
		case "ApiServerSource":
			name, _ := o.dig("spec", "serviceAccountName").(string)
			needSA(o, ns, name)
		case "Service":
			if o.group() == "serving.knative.dev" {
				name, _ := o.dig("spec", "template", "spec", "serviceAccountName").(string)
				needSA(o, ns, name)
			}
		}
	}
}

// Bad prune settings fail at render time with the chart's message.
func TestChartRejectsBadConfirmation(t *testing.T) {
	base := func(prune map[string]any) map[string]any {
		p := map[string]any{"enabled": true, "backupRepo": "kb-repo"}
		for k, v := range prune {
			p[k] = v
		}
		return map[string]any{"prune": p}
	}
	for name, tc := range map[string]struct {
		values map[string]any
		want   string
	}{
		"unknown word": {base(map[string]any{"confirm": "YES"}),
			`prune.confirm must be empty or one of DELETE, DELETE-STRAY, DELETE-RETAINED, DELETE-RETAINED-AND-STRAY (got "YES")`},
		"lower case": {base(map[string]any{"confirm": "delete"}),
			`prune.confirm must be empty or one of DELETE, DELETE-STRAY, DELETE-RETAINED, DELETE-RETAINED-AND-STRAY (got "delete")`},
		"live prune without word": {base(map[string]any{"command": "prune", "dryRun": false}),
			`prune.command prune with prune.dryRun=false deletes data: set prune.confirm to DELETE (the word these flags need; got "")`},
		"word of other flags": {base(map[string]any{"command": "prune", "dryRun": false, "includeRetained": true, "confirm": "DELETE"}),
			`set prune.confirm to DELETE-RETAINED (the word these flags need; got "DELETE")`},
		"function word": {map[string]any{"prune": map[string]any{"function": map[string]any{"enabled": true, "confirm": "PURGE"}}},
			`prune.function.confirm must be empty or one of DELETE, DELETE-STRAY, DELETE-RETAINED, DELETE-RETAINED-AND-STRAY (got "PURGE")`},
		"no repo": {map[string]any{"prune": map[string]any{"enabled": true}},
			"prune.enabled needs prune.backupRepo"},
		"manual tls without ca": {map[string]any{"webhook": map[string]any{"tls": map[string]any{"mode": "manual"}}},
			"webhook.tls.mode manual needs webhook.tls.manual.ca"},
		"short digest": {map[string]any{"image": map[string]any{"digest": "sha256:abc"}},
			`image.digest must be sha256: and 64 lowercase hex digits, as ` + "`make image`" + ` writes to bin/image/digest (got "sha256:abc")`},
	} {
		t.Run(name, func(t *testing.T) {
			out, errOut, err := runHelm(t, "template", "rel", chartDir(t), "-f", writeValues(t, tc.values))
			if err == nil {
				t.Fatalf("helm template accepted the values:\n%s", out)
			}
			if !strings.Contains(errOut, tc.want) {
				t.Fatalf("helm template failed without the chart's message %q:\n%s", tc.want, errOut)
			}
		})
	}
	// The four words, each with the flags it stands for, render.
	for word, flags := range map[string]map[string]any{
		"DELETE":                    {},
		"DELETE-STRAY":              {"deleteRepositoryStray": true},
		"DELETE-RETAINED":           {"includeRetained": true},
		"DELETE-RETAINED-AND-STRAY": {"includeRetained": true, "deleteRepositoryStray": true},
	} {
		p := map[string]any{"command": "prune", "dryRun": false, "confirm": word}
		for k, v := range flags {
			p[k] = v
		}
		if _, errOut, err := runHelm(t, "template", "rel", chartDir(t), "-f", writeValues(t, base(p))); err != nil {
			t.Errorf("confirm %s with %v: %v\n%s", word, flags, err, errOut)
		}
	}
}

// With image.digest (what `make image` writes) every snapflow container and
// every mover runs exactly that image; a mover image of its own keeps its
// own pin.
func TestChartPinsTheImageDigest(t *testing.T) {
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	refs := func(values map[string]any) (images, movers []string) {
		for _, o := range renderChart(t, "rel", "ns", values) {
			for _, line := range strings.Split(fmt.Sprint(o), " ") {
				if strings.HasPrefix(line, "--mover-image=") {
					movers = append(movers, strings.TrimRight(strings.TrimPrefix(line, "--mover-image="), "]"))
				}
			}
			spec := o.dig("spec", "template", "spec")
			if o.kind() == "CronJob" {
				spec = o.dig("spec", "jobTemplate", "spec", "template", "spec")
			}
			if m, ok := spec.(map[string]any); ok {
				for _, c := range m["containers"].([]any) {
					cm := c.(map[string]any)
					images = append(images, fmt.Sprint(cm["image"]))
					// Told its own image, so `snapflow version` can print it.
					if env, ok := cm["env"].([]any); ok && o.kind() == "Deployment" {
						told := ""
						for _, e := range env {
							if em := e.(map[string]any); em["name"] == "SNAPFLOW_IMAGE" {
								told = fmt.Sprint(em["value"])
							}
						}
						if told != fmt.Sprint(cm["image"]) {
							t.Errorf("%s %s: SNAPFLOW_IMAGE %q, image %q", o.kind(), o.name(), told, cm["image"])
						}
					}
				}
			}
		}
		return images, movers
	}
	images, movers := refs(map[string]any{"image": map[string]any{"tag": "v1.2.3", "digest": digest}})
	if len(images) == 0 || len(movers) == 0 {
		t.Fatalf("rendered no images (%v) or mover images (%v)", images, movers)
	}
	for _, ref := range slices.Concat(images, movers) {
		if ref != "snapflow/snapflow:v1.2.3@"+digest {
			t.Errorf("image %q is not pinned to the digest", ref)
		}
	}
	_, movers = refs(map[string]any{"image": map[string]any{"digest": digest}, "mover": map[string]any{"image": map[string]any{"tag": "custom"}}})
	for _, ref := range movers {
		if ref != "snapflow/snapflow:custom" {
			t.Errorf("a mover image of its own took the main digest: %q", ref)
		}
	}
}

// config/knative is what the chart renders with Knative: it applies, and
// its RBAC and routing stay the chart's.
func TestChartKnativeManifests(t *testing.T) {
	var objs []chartObject
	files, _ := filepath.Glob(repoPath(t, "config", "knative", "*.yaml"))
	if len(files) < 5 {
		t.Fatalf("config/knative holds %d manifests", len(files))
	}
	for _, f := range files {
		objs = append(objs, decodeManifests(t, f, readFile(t, f))...)
	}
	apply, renderOnly := splitInstalled(objs)
	if len(renderOnly) > 0 {
		t.Fatalf("config/knative uses kinds the control plane lacks: %v", renderOnly[0].key())
	}
	dryRunApply(t, apply)

	// The chart with release snapflow in snapflow-system renders the same
	// rules and the same Trigger filters.
	chart := renderChart(t, "snapflow", "snapflow-system", map[string]any{
		"knative": map[string]any{"enabled": true}, "prune": map[string]any{"function": map[string]any{"enabled": true}},
		"image": map[string]any{"tag": "latest"}})
	index := func(objs []chartObject) map[string]chartObject {
		m := map[string]chartObject{}
		for _, o := range objs {
			m[o.kind()+"/"+o.name()] = o
		}
		return m
	}
	fromChart, fromDir := index(chart), index(objs)
	compared := 0
	for key, o := range fromDir {
		if o.kind() == "Namespace" {
			continue // the chart installs into an existing namespace
		}
		c, ok := fromChart[key]
		if !ok {
			t.Errorf("config/knative has %s, which the chart does not render", key)
			continue
		}
		var fields [][]string
		switch o.kind() {
		case "ClusterRole":
			fields = [][]string{{"rules"}}
		case "Trigger":
			// The subscriber carries the audience its function requires.
			fields = [][]string{{"spec", "filter"}, {"spec", "subscriber"}}
		case "Service":
			// The arguments carry who the function trusts.
			fields = [][]string{{"spec", "template", "spec", "serviceAccountName"}, {"spec", "template", "spec", "containers"}}
		case "EventPolicy":
			fields = [][]string{{"spec"}}
		case "Deployment", "SinkBinding":
			// The progress source: its arguments and what it is bound to.
			fields = [][]string{{"spec", "template", "spec", "serviceAccountName"}, {"spec", "template", "spec", "containers"}, {"spec", "subject"}, {"spec", "sink"}}
		default:
			continue
		}
		compared++
		for _, field := range fields {
			if !reflect.DeepEqual(normalize(t, o.dig(field...)), normalize(t, c.dig(field...))) {
				t.Errorf("%s %v differs from the chart's:\nconfig/knative: %v\nchart:          %v", key, field, o.dig(field...), c.dig(field...))
			}
		}
	}
	for key, c := range fromChart {
		// The webhook's objects are in config/webhook.
		kept := slices.Contains([]string{"Trigger", "EventPolicy", "SinkBinding", "ClusterRole", "Deployment"}, c.kind()) && !strings.HasPrefix(c.name(), "snapflow-webhook")
		if kept && fromDir[key] == nil {
			t.Errorf("the chart renders %s, config/knative lacks it", key)
		}
	}
	if compared < 40 {
		t.Errorf("compared only %d objects", compared)
	}

	// The webhook of config/webhook trusts the same functions as the
	// chart's: they alone may create mover Jobs and write controller-owned
	// metadata, so a missing one breaks its function.
	webhookFile := repoPath(t, "config", "webhook", "manifests.yaml")
	users := func(objs []chartObject, name string) []string {
		for _, o := range objs {
			if o.kind() != "Deployment" || o.name() != name {
				continue
			}
			b, _ := json.Marshal(o.dig("spec", "template", "spec", "containers"))
			m := regexp.MustCompile(`--controller-users=([^"]*)`).FindSubmatch(b)
			if m == nil {
				t.Fatalf("Deployment %s passes no --controller-users", name)
			}
			list := strings.Split(string(m[1]), ",")
			slices.Sort(list)
			return list
		}
		t.Fatalf("no Deployment %s", name)
		return nil
	}
	if dir, fromChart := users(decodeManifests(t, webhookFile, readFile(t, webhookFile)), "snapflow-webhook"), users(chart, "snapflow-webhook"); !slices.Equal(dir, fromChart) {
		t.Errorf("config/webhook's --controller-users %v, the chart's %v", dir, fromChart)
	}
}

// normalize round-trips through JSON so YAML scalars compare alike.
func normalize(t *testing.T, v any) any {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := yaml.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// config/examples: every manifest parses; what the control plane has CRDs
// for is dry-run applied, and the Helm hook example renders and applies.
func TestChartExamples(t *testing.T) {
	for _, n := range []string{"apps", "argo-events", "storage"} {
		ensureNamespace(t, n, "")
	}
	all, _ := filepath.Glob(repoPath(t, "config", "examples", "*", "*.yaml"))
	var files []string
	for _, f := range all {
		// The Helm hook example is a chart (Chart.yaml, values.yaml): rendered below.
		if filepath.Base(filepath.Dir(f)) != "helm-pre-upgrade-backup" {
			files = append(files, f)
		}
	}
	if len(files) < 4 {
		t.Fatalf("config/examples holds %d manifests", len(files))
	}
	kinds := map[string]bool{}
	for _, f := range files {
		t.Run(filepath.Base(filepath.Dir(f))+"/"+filepath.Base(f), func(t *testing.T) {
			objs := decodeManifests(t, f, readFile(t, f))
			for _, o := range objs {
				kinds[o.kind()] = true
			}
			apply, _ := splitInstalled(objs)
			dryRunApply(t, apply)
		})
	}
	for _, k := range []string{"Sensor", "TriggerTemplate", "Deployment", "Ingress"} {
		if !kinds[k] {
			t.Errorf("no %s among the examples", k)
		}
	}
	t.Run("helm-pre-upgrade-backup", func(t *testing.T) {
		dir := repoPath(t, "config", "examples", "helm-pre-upgrade-backup")
		if out, errOut, err := runHelm(t, "lint", dir); err != nil {
			t.Fatalf("helm lint: %v\n%s\n%s", err, out, errOut)
		}
		out, errOut, err := runHelm(t, "template", "demo", dir, "--namespace", "apps")
		if err != nil {
			t.Fatalf("helm template: %v\n%s", err, errOut)
		}
		objs := decodeManifests(t, "hook chart", []byte(out))
		var job chartObject
		for _, o := range objs {
			if o.kind() == "Job" {
				job = o
			}
			if hook := o.dig("metadata", "annotations", "helm.sh/hook"); hook != "pre-upgrade" {
				t.Errorf("%s is not a pre-upgrade hook (%v)", o.key(), hook)
			}
		}
		if job == nil || !strings.Contains(fmt.Sprint(job.dig("spec", "template", "spec", "containers")), "snapshot now --policy=app-data") {
			t.Fatalf("no Job running snapflow snapshot now: %v", job)
		}
		dryRunApply(t, objs)
	})
}

// helm install --dry-run=server renders against the real API server's
// capabilities (and creates nothing, CRDs included) and prints NOTES.txt.
func TestChartInstallDryRunNotes(t *testing.T) {
	ensureNamespace(t, "chart-notes", "")
	for name, tc := range map[string]struct {
		values map[string]any
		want   []string
	}{
		"deployments": {
			values: map[string]any{"prune": map[string]any{"enabled": true, "backupRepo": "kb-repo"}, "mover": map[string]any{"namespaces": []any{"apps"}}},
			want: []string{"Admission webhook: rel-snapflow-webhook (TLS mode: self)", "Deployments fed by rel-snapflow-kube-source",
				"- snapshot: http://rel-snapflow-snapshot.chart-notes.svc", "chart-notes, apps", "Job rel-snapflow-prune-plan-1",
				"without deleting anything", "prune.secretReader.secrets is empty"},
		},
		"knative": {
			values: map[string]any{"knative": map[string]any{"enabled": true}},
			want:   []string{"Knative Services behind the Broker rel-snapflow", "kubectl apply --server-side -f <chart>/crds/"},
		},
		// Senders the NetworkPolicy would block are named before they fail.
		"network policy": {
			values: map[string]any{"functions": map[string]any{"eventSink": "http://broker.example", "senderAuth": map[string]any{"trustedSenders": []any{"system:serviceaccount:argo-events:sensor"}}}},
			want: []string{"NetworkPolicy rel-snapflow-functions admits only snapflow's own pods",
				"functions.eventSink is set", "trustedSenders lists senders the NetworkPolicy does not admit"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			out, errOut, err := runHelm(t, "install", "rel", chartDir(t), "--dry-run=server", "--kubeconfig", env.Kubeconfig,
				"--namespace", "chart-notes", "-f", writeValues(t, tc.values))
			if err != nil {
				t.Fatalf("helm install --dry-run=server: %v\n%s", err, errOut)
			}
			_, notes, ok := strings.Cut(out, "NOTES:")
			if !ok {
				t.Fatalf("no NOTES in:\n%s", out)
			}
			for _, w := range tc.want {
				if !strings.Contains(notes, w) {
					t.Errorf("NOTES lack %q:\n%s", w, notes)
				}
			}
		})
	}
	// Nothing was installed.
	res := kubectl(t, nil, 0, "get", "deployments,secrets", "-n", "chart-notes", "-o", "name")
	if strings.Contains(res.Stdout, "rel-snapflow") || strings.Contains(res.Stdout, "sh.helm.release") {
		t.Fatalf("a dry run left objects behind:\n%s", res.Stdout)
	}
}

// Every value in values.yaml has a comment above it. A value documented as
// a whole ("# -- ..." above a map, such as resources) covers its keys.
func TestChartValuesDocumented(t *testing.T) {
	lines := strings.Split(string(readFile(t, filepath.Join(chartDir(t), "values.yaml"))), "\n")
	type open struct {
		indent int
		whole  bool // documented as a whole: children need no comment
	}
	var stack []open
	prevComment, prevWhole := false, false
	for i, line := range lines {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" {
			prevComment = false
			continue
		}
		if strings.HasPrefix(trimmed, "#") {
			if !prevComment {
				prevWhole = strings.HasPrefix(trimmed, "# --")
			}
			prevComment = true
			continue
		}
		indent := len(line) - len(strings.TrimLeft(line, " "))
		for len(stack) > 0 && stack[len(stack)-1].indent >= indent {
			stack = stack[:len(stack)-1]
		}
		covered := false
		for _, o := range stack {
			covered = covered || o.whole
		}
		key, _, isKey := strings.Cut(trimmed, ":")
		if isKey && !strings.HasPrefix(trimmed, "- ") && !strings.Contains(key, " ") {
			if !prevComment && !covered {
				t.Errorf("values.yaml:%d: %q has no comment above it", i+1, key)
			}
			stack = append(stack, open{indent: indent, whole: prevComment && prevWhole})
		}
		prevComment = false
	}
}
