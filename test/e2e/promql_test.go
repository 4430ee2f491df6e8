package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/snapflow/snapflow/internal/coverage"
	"github.com/snapflow/snapflow/internal/statemetrics"
	"github.com/snapflow/snapflow/test/harness"
)

// promqlSelector is one series selector of a query: a metric name and the
// label names its matchers use, with the values of its = and =~ matchers.
type promqlSelector struct {
	metric string
	labels []string
	values map[string]string
}

// promqlQuery is what a query names: its selectors, and the labels of its
// by, without, on, ignoring and group_left/right clauses.
type promqlQuery struct {
	selectors []promqlSelector
	clauses   []string
}

var (
	promqlClauses = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}
	promqlWords   = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true, "inf": true, "nan": true, "atan2": true,
		// Aggregations, which may put a by or without clause before their "(".
		"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true, "count": true,
		"count_values": true, "bottomk": true, "topk": true, "quantile": true, "limitk": true, "limit_ratio": true}
	promqlLabel = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"`)
)

// promqlSelectors finds the series selectors of a PromQL expression: every
// identifier that is not a function, an aggregation, a keyword or a label
// list of a by/on clause, with the labels of its matchers. Enough PromQL
// for checking names; promtool checks the syntax.
func promqlSelectors(expr string) (promqlQuery, error) {
	var out promqlQuery
	s := []rune(expr)
	skipTo := func(i int, open, closing rune) (int, error) {
		depth := 0
		for j := i; j < len(s); j++ {
			switch s[j] {
			case '"', '\'', '`':
				q := s[j]
				for j++; j < len(s) && s[j] != q; j++ {
					if s[j] == '\\' {
						j++
					}
				}
			case open:
				depth++
			case closing:
				depth--
				if depth == 0 {
					return j + 1, nil
				}
			}
		}
		return 0, fmt.Errorf("unbalanced %c in %q", open, expr)
	}
	next := func(i int) int {
		for i < len(s) && (s[i] == ' ' || s[i] == '\n' || s[i] == '\t') {
			i++
		}
		return i
	}
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			j := i + 1
			for j < len(s) && s[j] != c {
				if s[j] == '\\' {
					j++
				}
				j++
			}
			i = j + 1
		case c == '[':
			end, err := skipTo(i, '[', ']')
			if err != nil {
				return out, err
			}
			i = end
		case c == '{':
			// A selector without a name ({__name__=...}) is not used here.
			return out, fmt.Errorf("a nameless selector in %q", expr)
		case c >= '0' && c <= '9' || c == '.':
			for i < len(s) && (s[i] == '.' || s[i] == '_' || s[i] >= '0' && s[i] <= '9' || s[i] >= 'a' && s[i] <= 'z' || s[i] >= 'A' && s[i] <= 'Z') {
				i++
			}
		case c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			j := i
			for j < len(s) && (s[j] == '_' || s[j] == ':' || s[j] >= 'a' && s[j] <= 'z' || s[j] >= 'A' && s[j] <= 'Z' || s[j] >= '0' && s[j] <= '9') {
				j++
			}
			word := string(s[i:j])
			k := next(j)
			switch {
			case promqlClauses[word]:
				i = k
				if k < len(s) && s[k] == '(' {
					end, err := skipTo(k, '(', ')')
					if err != nil {
						return out, err
					}
					for _, l := range strings.Split(string(s[k+1:end-1]), ",") {
						if l = strings.TrimSpace(l); l != "" {
							out.clauses = append(out.clauses, l)
						}
					}
					i = end
				}
			case promqlWords[word]:
				i = j
			case k < len(s) && s[k] == '(':
				i = k + 1 // a function or an aggregation
			default:
				sel := promqlSelector{metric: word, values: map[string]string{}}
				i = j
				if k < len(s) && s[k] == '{' {
					end, err := skipTo(k, '{', '}')
					if err != nil {
						return out, err
					}
					for _, m := range promqlLabel.FindAllStringSubmatch(string(s[k+1:end-1]), -1) {
						sel.labels = append(sel.labels, m[1])
						if m[2] == "=" || m[2] == "=~" {
							sel.values[m[1]] = m[3]
						}
					}
					i = end
				}
				out.selectors = append(out.selectors, sel)
			}
		default:
			i++
		}
	}
	return out, nil
}

// served are the series a query may name: the exporter's families with
// their labels, the processes' metrics docs/metrics.md lists in its
// tables' first column (a histogram also as _bucket, _sum and _count), and
// what the chart README says comes from elsewhere (kube-state-metrics' Job
// series, Prometheus' up, controller-runtime's webhook counter).
type served struct {
	labels     map[string][]string
	names      map[string]bool
	histograms map[string]bool
	// values are the values an exporter label can take, where they are a
	// closed set.
	values map[string]map[string][]string
}

func servedMetrics(t *testing.T) served {
	t.Helper()
	sv := served{labels: map[string][]string{}, histograms: map[string]bool{}, values: map[string]map[string][]string{},
		names: map[string]bool{"up": true, "kube_job_failed": true, "kube_job_labels": true, "controller_runtime_webhook_requests_total": true}}
	for _, d := range statemetrics.Families {
		sv.labels[d.Name], sv.names[d.Name] = d.Labels, true
	}
	var states []string
	for _, st := range []coverage.State{coverage.Protected, coverage.Excluded, coverage.Failing, coverage.Unscheduled, coverage.Suspended, coverage.Unprotected} {
		states = append(states, string(st))
	}
	sv.values[statemetrics.PVCProtected.Name] = map[string][]string{"state": states}
	cell := regexp.MustCompile("`((?:snapflow|kopiur)_[a-z0-9_]+)")
	for _, line := range strings.Split(string(readFile(t, repoPath(t, "docs", "metrics.md"))), "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		first := strings.Split(line, "|")[1]
		for _, m := range cell.FindAllStringSubmatch(first, -1) {
			sv.names[m[1]] = true
			if strings.HasSuffix(m[1], "_seconds") && sv.labels[m[1]] == nil {
				sv.histograms[m[1]] = true // the processes' durations
			}
		}
	}
	return sv
}

// checkServed reports every selector of expr naming a series nothing
// serves, a label an exporter family does not have (in a matcher, or in a
// by/on clause of a query over exporter families alone), or a value
// outside a label's closed set.
func checkServed(expr string, sv served) []string {
	q, err := promqlSelectors(expr)
	if err != nil {
		return []string{err.Error()}
	}
	var problems []string
	union, exporterOnly := map[string]bool{}, true
	for _, sel := range q.selectors {
		base := sel.metric
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(sel.metric, suffix); ok && sv.histograms[b] {
				base = b
			}
		}
		if !sv.names[base] {
			problems = append(problems, fmt.Sprintf("%s: nothing serves %s", expr, sel.metric))
			continue
		}
		known, ok := sv.labels[base]
		if !ok {
			exporterOnly = false
			continue
		}
		for _, l := range known {
			union[l] = true
		}
		for _, l := range sel.labels {
			if !slices.Contains(known, l) {
				problems = append(problems, fmt.Sprintf("%s: %s has no label %s (it has %v)", expr, base, l, known))
			}
		}
		for l, v := range sel.values {
			allowed := sv.values[base][l]
			if allowed == nil {
				continue
			}
			for _, alt := range strings.Split(v, "|") {
				if !slices.Contains(allowed, alt) {
					problems = append(problems, fmt.Sprintf("%s: %s{%s} is never %q (it is one of %v)", expr, base, l, alt, allowed))
				}
			}
		}
	}
	if exporterOnly && len(q.selectors) > 0 {
		for _, l := range q.clauses {
			if !union[l] {
				problems = append(problems, fmt.Sprintf("%s: no series of the query has label %s", expr, l))
			}
		}
	}
	return problems
}

func TestPromQLSelectors(t *testing.T) {
	q, err := promqlSelectors(`count(kube_job_failed{condition="true"} * on (namespace, job_name) group_left () kube_job_labels{label_x="a,b}"} == 1) or vector(0) + time() - max by (ns) (a_b:c[5m] offset 1h) and histogram_quantile(0.9, rate(x_bucket{le=~"1"}[1m]))`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range q.selectors {
		got = append(got, s.metric+fmt.Sprint(s.labels))
	}
	want := []string{"kube_job_failed[condition]", "kube_job_labels[label_x]", "a_b:c[]", "x_bucket[le]"}
	if !slices.Equal(got, want) || !slices.Equal(q.clauses, []string{"namespace", "job_name", "ns"}) || q.selectors[1].values["label_x"] != "a,b}" {
		t.Fatalf("got %v %v %v, want %v", got, q.clauses, q.selectors[1].values, want)
	}
	sv := served{names: map[string]bool{"g": true, "h_seconds": true}, labels: map[string][]string{"g": {"namespace", "state"}},
		histograms: map[string]bool{"h_seconds": true}, values: map[string]map[string][]string{"g": {"state": {"A", "B"}}}}
	for expr, want := range map[string]int{
		`sum by (namespace) (g{state=~"A|B"})`: 0,
		`sum by (namespce) (g)`:                1,
		`g{state="C"}`:                         1,
		`g{nope="x"}`:                          1,
		`g_count`:                              1, // a gauge has no _count
		`rate(h_seconds_count[5m])`:            0,
		`sum by (le, function) (rate(h_seconds_bucket[5m]))`: 0, // labels of non-exporter series are not known
	} {
		if got := checkServed(expr, sv); len(got) != want {
			t.Errorf("%s: %d problems %v, want %d", expr, len(got), got, want)
		}
	}
}

type dashboardPanel struct {
	ID      int    `json:"id"`
	Type    string `json:"type"`
	Title   string `json:"title"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []dashboardPanel `json:"panels"`
}

// The dashboard's queries are valid PromQL (promtool check rules) and name
// only series snapflow or the components the chart README names serve,
// with labels the exporter's families have.
func TestDashboardQueriesUseServedMetrics(t *testing.T) {
	promtool := harness.RequireTool(t, "promtool")
	var dash struct {
		Panels     []dashboardPanel `json:"panels"`
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(readFile(t, repoPath(t, "charts", "snapflow", "dashboards", "snapflow.json")), &dash); err != nil {
		t.Fatal(err)
	}
	sv := servedMetrics(t)
	// Grafana's variables, as an "All" selection expands them.
	vars := strings.NewReplacer(`"$namespace"`, `".*"`, "$__rate_interval", "5m")
	var rules []map[string]any
	ids := map[int]bool{}
	// A collapsed row holds its panels.
	var panels []dashboardPanel
	for _, p := range dash.Panels {
		panels = append(append(panels, p), p.Panels...)
	}
	for _, p := range panels {
		if ids[p.ID] {
			t.Errorf("panel id %d is used twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for i, tg := range p.Targets {
			expr := vars.Replace(tg.Expr)
			if strings.Contains(expr, "$") {
				t.Errorf("panel %q: an unknown variable in %s", p.Title, tg.Expr)
			}
			for _, pr := range checkServed(expr, sv) {
				t.Errorf("panel %q: %s", p.Title, pr)
			}
			rules = append(rules, map[string]any{"record": fmt.Sprintf("dashboard:panel_%d_%d", p.ID, i), "expr": expr})
		}
	}
	for _, v := range dash.Templating.List {
		if m := regexp.MustCompile(`^label_values\((\w+), *(\w+)\)$`).FindStringSubmatch(v.Definition); m != nil {
			if !slices.Contains(sv.labels[m[1]], m[2]) {
				t.Errorf("variable %s: %s has no label %s", v.Name, m[1], m[2])
			}
		} else if v.Definition != "" {
			t.Errorf("variable %s: unchecked query %q", v.Name, v.Definition)
		}
	}
	sort.Slice(rules, func(i, j int) bool { return rules[i]["record"].(string) < rules[j]["record"].(string) })
	b, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "dashboard-rules.yaml")
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.CommandContext(testContext(t), promtool, "check", "rules", file).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules over the dashboard's queries: %v\n%s", err, out)
	}
}
