package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/snapflow/snapflow/test/harness"
)

// The chart's alerts are valid rules (promtool check rules), and each
// fires on a synthetic series and stays quiet on a healthy one
// (promtool test rules over test/fixtures/alerts/rules.test.yaml).
func TestAlertRules(t *testing.T) {
	promtool := harness.RequireTool(t, "promtool")
	const ns = "snapflow-system"
	var groups any
	for _, o := range renderChart(t, "rel", ns, map[string]any{"monitoring": map[string]any{"prometheusRule": map[string]any{"enabled": true}},
		"prune": map[string]any{"function": map[string]any{"enabled": true}}}) {
		if o.kind() == "PrometheusRule" {
			groups = o.dig("spec", "groups")
		}
	}
	if groups == nil {
		t.Fatal("the chart rendered no PrometheusRule with monitoring.prometheusRule.enabled")
	}
	dir := t.TempDir()
	write := func(name string, v any) string {
		b, err := yaml.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	run := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), harness.Timeout(2*time.Minute))
		defer cancel()
		out, err := exec.CommandContext(ctx, promtool, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("check", "rules", write("rules.yaml", map[string]any{"groups": groups}))

	// The unit tests compare labels; annotations are templates promtool
	// check rules has already parsed, so they are left out here.
	var alerts []string
	sv := servedMetrics(t)
	for _, g := range groups.([]any) {
		for _, r := range g.(map[string]any)["rules"].([]any) {
			rule := r.(map[string]any)
			delete(rule, "annotations")
			alerts = append(alerts, rule["alert"].(string))
			// A rule over a series nothing serves never fires.
			for _, pr := range checkServed(rule["expr"].(string), sv) {
				t.Errorf("alert %s: %s", rule["alert"], pr)
			}
		}
	}
	rules := write("bare.yaml", map[string]any{"groups": groups})
	fixture := readFile(t, repoPath(t, "test", "fixtures", "alerts", "rules.test.yaml"))
	tested := filepath.Join(dir, "rules.test.yaml")
	if err := os.WriteFile(tested, []byte(strings.Replace(string(fixture), "rule_files: [RULES]", "rule_files: ["+rules+"]", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	run("test", "rules", tested)

	// Every alert the chart renders has a case.
	for _, a := range alerts {
		if !strings.Contains(string(fixture), "alertname: "+a+"\n") {
			t.Errorf("alert %s has no promtool test case in test/fixtures/alerts/rules.test.yaml", a)
		}
	}
}
