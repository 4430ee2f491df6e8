package e2e

import (
	"slices"
	"sort"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// Without Knative, the chart's NetworkPolicy admits to the function pods
// only snapflow's own senders in the release namespace and the peers the
// operator lists; the webhook and the sources stay reachable. No CNI runs
// here, so the test checks what the policy selects, by the same label
// matching a CNI applies, and that the API server accepts it.
func TestChartNetworkPolicy(t *testing.T) {
	const ns = "chart-netpol"
	ensureNamespace(t, ns, "")
	argo := map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": "argo-events"}}}
	values := map[string]any{
		"prune": map[string]any{
			"enabled": true, "backupRepo": "kb-repo", "region": "eu-west-1",
			"function": map[string]any{"enabled": true},
			"s3Source": map[string]any{"enabled": true, "buckets": []any{"kb-backups"}},
		},
		"networkPolicy": map[string]any{"from": []any{argo}},
	}
	objs := renderChart(t, "rel", ns, values)

	var pols []chartObject
	pods := map[string]map[string]string{} // Deployment name -> pod template labels
	ports := map[string][]string{}         // Deployment name -> container port names
	for _, o := range objs {
		switch o.kind() {
		case "NetworkPolicy":
			pols = append(pols, o)
		case "Deployment":
			var d struct {
				Spec struct {
					Template struct {
						Metadata metav1.ObjectMeta `json:"metadata"`
						Spec     struct {
							Containers []struct {
								Ports []struct {
									Name string `json:"name"`
								} `json:"ports"`
							} `json:"containers"`
						} `json:"spec"`
					} `json:"template"`
				} `json:"spec"`
			}
			decodeInto(t, o, &d)
			pods[o.name()] = d.Spec.Template.Metadata.Labels
			for _, c := range d.Spec.Template.Spec.Containers {
				for _, p := range c.Ports {
					ports[o.name()] = append(ports[o.name()], p.Name)
				}
			}
		}
	}
	if len(pols) != 1 || pols[0].name() != "rel-snapflow-functions" || pols[0].meta("namespace") != ns {
		t.Fatalf("want one NetworkPolicy rel-snapflow-functions in %s, got %d", ns, len(pols))
	}
	var np networkingv1.NetworkPolicy
	decodeInto(t, pols[0], &np)
	selected := mustSelector(t, &np.Spec.PodSelector)

	functions := []string{"snapshot", "cleanup", "retention", "schedule", "restore", "verify", "prune"}
	for _, fn := range functions {
		name := "rel-snapflow-" + fn
		l, ok := pods[name]
		if !ok {
			t.Fatalf("Deployment %s did not render", name)
		}
		if !selected.Matches(labels.Set(l)) {
			t.Errorf("the NetworkPolicy does not cover function %s (pod labels %v)", name, l)
		}
		if !slices.Contains(ports[name], "http") {
			t.Errorf("%s has no container port named http, which the policy admits (ports %v)", name, ports[name])
		}
	}
	// The webhook is called by the API server, and the S3 source by SNS:
	// neither may be closed off by this policy.
	for _, name := range []string{"rel-snapflow-webhook", "rel-snapflow-kube-source", "rel-snapflow-s3-source"} {
		l, ok := pods[name]
		if !ok {
			t.Fatalf("Deployment %s did not render", name)
		}
		if selected.Matches(labels.Set(l)) {
			t.Errorf("the NetworkPolicy selects %s, which must stay reachable", name)
		}
	}

	if got := np.Spec.PolicyTypes; len(got) != 1 || got[0] != networkingv1.PolicyTypeIngress {
		t.Errorf("policyTypes %v, want [Ingress] (egress is not limited)", got)
	}
	if len(np.Spec.Ingress) != 1 {
		t.Fatalf("%d ingress rules, want 1", len(np.Spec.Ingress))
	}
	rule := np.Spec.Ingress[0]
	if len(rule.Ports) != 1 || rule.Ports[0].Port == nil || rule.Ports[0].Port.String() != "http" {
		t.Errorf("ingress ports %v, want only the named port http", rule.Ports)
	}
	// admits reports whether a pod with these labels in the release
	// namespace matches a peer (a peer without namespaceSelector means the
	// policy's own namespace).
	admits := func(l map[string]string) bool {
		for _, p := range rule.From {
			if p.NamespaceSelector != nil || p.IPBlock != nil || p.PodSelector == nil {
				continue
			}
			if mustSelector(t, p.PodSelector).Matches(labels.Set(l)) {
				return true
			}
		}
		return false
	}
	var senders []string
	for name, l := range pods {
		if name == "rel-snapflow-webhook" || name == "rel-snapflow-exporter" {
			if admits(l) {
				t.Errorf("%s's pods may reach the functions, but they send no events", name)
			}
			continue
		}
		if !admits(l) {
			t.Errorf("%s sends events to the functions but the policy does not admit it (labels %v)", name, l)
		}
		senders = append(senders, strings.TrimPrefix(name, "rel-snapflow-"))
	}
	sort.Strings(senders)
	t.Logf("senders admitted: %v", senders)
	// Other pods of the release namespace, and snapflow-labelled pods
	// that are not its sources (a mover, a hook Job), are not admitted.
	for _, l := range []map[string]string{
		{"app": "anything"},
		{"app.kubernetes.io/name": "snapflow", "app.kubernetes.io/instance": "rel", "app.kubernetes.io/component": "mover"},
		{"app.kubernetes.io/name": "snapflow", "app.kubernetes.io/instance": "other", "app.kubernetes.io/component": "snapshot"},
	} {
		if admits(l) {
			t.Errorf("a pod labelled %v may reach the functions", l)
		}
	}
	// The operator's extra peer comes after snapflow's own, unchanged.
	if n := len(rule.From); n != 2 {
		t.Fatalf("%d from peers, want snapflow's own and the listed one", n)
	}
	if ns := rule.From[1].NamespaceSelector; ns == nil || ns.MatchLabels["kubernetes.io/metadata.name"] != "argo-events" || rule.From[1].PodSelector != nil {
		t.Errorf("the listed peer rendered as %+v", rule.From[1])
	}
	dryRunApply(t, pols)

	// With Knative the traffic comes through Knative's activator, and the
	// operator may turn the policy off.
	for what, v := range map[string]map[string]any{
		"knative":  {"knative": map[string]any{"enabled": true}},
		"disabled": {"networkPolicy": map[string]any{"enabled": false}},
	} {
		for _, o := range renderChart(t, "rel", ns, v) {
			if o.kind() == "NetworkPolicy" {
				t.Errorf("%s: %s rendered", what, o.key())
			}
		}
	}
}

// decodeInto converts a rendered object to a typed one.
func decodeInto(t *testing.T, o chartObject, into any) {
	t.Helper()
	b, err := yaml.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, into); err != nil {
		t.Fatalf("%s: %v", o.key(), err)
	}
}

func mustSelector(t *testing.T, ls *metav1.LabelSelector) labels.Selector {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
