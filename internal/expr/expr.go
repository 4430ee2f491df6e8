// Package expr compiles and evaluates snapflow's CEL expressions: a
// verification's successExpr, preflight checks, and a repository's identity
// expressions. Each kind has a fixed set of variables; an expression that
// names anything else, returns the wrong type or is too long is refused when
// it is admitted, not when it first runs.
package expr

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
)

// MaxLen bounds every expression, in bytes.
const MaxLen = 1024

// costLimit bounds one evaluation so a pathological expression cannot stall a handler.
const costLimit = 100_000

// Kind is one family of expressions with its own variables and result type.
type Kind struct {
	name    string
	vars    []cel.EnvOption
	names   []string
	result  *types.Type
	samples []map[string]any

	// Compiling is the costly part of admission; the same few expressions
	// arrive again and again, so verdicts are kept per source text.
	envOnce  sync.Once
	env      *cel.Env
	envErr   error
	compiled memo[*Program]
	checked  memo[struct{}]
}

// maxCached bounds each cache; past it the cache starts over.
const maxCached = 2048

// memo remembers the outcome of a pure function of the source text.
type memo[V any] struct {
	mu sync.Mutex
	m  map[string]memoEntry[V]
}

type memoEntry[V any] struct {
	v   V
	err error
}

func (c *memo[V]) get(src string, f func(string) (V, error)) (V, error) {
	c.mu.Lock()
	e, ok := c.m[src]
	c.mu.Unlock()
	if ok {
		return e.v, e.err
	}
	v, err := f(src)
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxCached {
		c.m = map[string]memoEntry[V]{}
	}
	c.m[src] = memoEntry[V]{v, err}
	c.mu.Unlock()
	return v, err
}

var (
	// Success is a verification's pass/fail predicate.
	Success = &Kind{
		name: "successExpr",
		vars: []cel.EnvOption{
			cel.Variable("stats", cel.MapType(cel.StringType, cel.IntType)),
			cel.Variable("snapshot", cel.MapType(cel.StringType, cel.DynType)),
			cel.Variable("restored", cel.MapType(cel.StringType, cel.DynType)),
			cel.Variable("tier", cel.StringType),
		},
		names:  []string{"stats", "snapshot", "restored", "tier"},
		result: cel.BoolType,
		samples: []map[string]any{
			{"stats": map[string]int64{"files": 20, "bytes": 81920, "errors": 0}, "snapshot": map[string]any{"id": "k0123456789abcdef", "startTime": "2026-01-01T00:00:00Z"}, "restored": map[string]any{}, "tier": "quick"},
			{"stats": map[string]int64{"files": 20, "bytes": 81920, "errors": 0}, "snapshot": map[string]any{"id": "k0123456789abcdef"}, "restored": map[string]any{"files": int64(20), "checksumMatches": true}, "tier": "deep"},
		},
	}

	// Preflight is a gate evaluated before a run starts.
	Preflight = &Kind{
		name: "preflight expr",
		vars: []cel.EnvOption{
			cel.Variable("repository", cel.MapType(cel.StringType, cel.DynType)),
			cel.Variable("maintenance", cel.MapType(cel.StringType, cel.DynType)),
		},
		names:  []string{"repository", "maintenance"},
		result: cel.BoolType,
		samples: []map[string]any{{
			"repository": map[string]any{
				"phase": "Ready", "ready": true, "backendReachable": true,
				"snapshotCountKnown": true, "snapshotCount": int64(12),
				"indexBlobCountKnown": true, "indexBlobCount": int64(40),
				"sizeBytesKnown": true, "sizeBytes": int64(1 << 30),
				"lastHealthyKnown": true, "lastHealthyAgeSeconds": int64(60),
				"lastReverifyKnown": false, "lastReverifyAgeSeconds": int64(0),
			},
			"maintenance": map[string]any{"hasRun": true, "lastSuccessAgeSeconds": int64(3600)},
		}},
	}

	// Identity computes a kopia username or hostname from a repository's identityDefaults.
	Identity = &Kind{
		name: "identity expression",
		vars: []cel.EnvOption{
			cel.Variable(namespaceAlias, cel.StringType),
			cel.Variable("policyName", cel.StringType),
			cel.Variable("labels", cel.MapType(cel.StringType, cel.StringType)),
			cel.Variable("annotations", cel.MapType(cel.StringType, cel.StringType)),
			cel.Variable("cluster", cel.StringType),
		},
		names:  []string{"namespace", "policyName", "labels", "annotations", "cluster"},
		result: cel.StringType,
		samples: []map[string]any{{
			"namespace": "billing", "policyName": "postgres-data",
			"labels": map[string]string{}, "annotations": map[string]string{}, "cluster": "prod",
		}},
	}
)

// Variables lists the names an expression of this kind may use.
func (k *Kind) Variables() []string { return append([]string(nil), k.names...) }

// Program is a compiled expression ready to evaluate.
type Program struct {
	kind *Kind
	prg  cel.Program
	src  string
}

// Compile checks src and returns a program. Errors say what is wrong and
// which variables exist.
func (k *Kind) Compile(src string) (*Program, error) {
	return k.compiled.get(src, k.compile)
}

func (k *Kind) compile(src string) (*Program, error) {
	if strings.TrimSpace(src) == "" {
		return nil, errors.New("is empty: write an expression, or remove the field")
	}
	if len(src) > MaxLen {
		return nil, fmt.Errorf("is %d bytes long; at most %d are allowed", len(src), MaxLen)
	}
	k.envOnce.Do(func() { k.env, k.envErr = cel.NewEnv(k.vars...) })
	if k.envErr != nil {
		return nil, fmt.Errorf("build CEL environment: %w", k.envErr)
	}
	env := k.env
	ast, iss := env.Compile(k.rewrite(src))
	if iss.Err() != nil {
		msg := strings.ReplaceAll(strings.TrimSpace(iss.Err().Error()), namespaceAlias, "namespace")
		if strings.Contains(msg, "undeclared reference") {
			return nil, fmt.Errorf("failed to compile: %s (available variables: %s)", firstLine(msg), strings.Join(k.names, ", "))
		}
		return nil, fmt.Errorf("failed to compile: %s (check the CEL syntax)", firstLine(msg))
	}
	out := ast.OutputType()
	if !out.IsExactType(k.result) && !out.IsExactType(cel.DynType) {
		return nil, fmt.Errorf("must return a %s, got %s", typeName(k.result), typeName(out))
	}

	prg, err := env.Program(ast, cel.CostLimit(costLimit))
	if err != nil {
		return nil, fmt.Errorf("failed to plan: %w", err)
	}
	return &Program{kind: k, prg: prg, src: src}, nil
}

// Check compiles src and trial-evaluates it over representative values of
// every variable, so a type error that only shows at run time surfaces now.
// A missing map key is tolerated: not every key exists on every run.
func (k *Kind) Check(src string) error {
	_, err := k.checked.get(src, func(src string) (struct{}, error) { return struct{}{}, k.check(src) })
	return err
}

func (k *Kind) check(src string) error {
	p, err := k.Compile(src)
	if err != nil {
		return err
	}
	for _, vars := range k.samples {
		v, _, err := p.prg.Eval(k.activation(vars))
		if err != nil {
			if strings.Contains(err.Error(), "no such key") {
				continue
			}
			return fmt.Errorf("failed to evaluate: %s", firstLine(err.Error()))
		}
		if v.Type().TypeName() != k.result.TypeName() {
			return fmt.Errorf("must return a %s, got %s", typeName(k.result), v.Type().TypeName())
		}
	}
	return nil
}

// EvalBool evaluates a predicate.
func (p *Program) EvalBool(vars map[string]any) (bool, error) {
	v, _, err := p.prg.Eval(p.kind.activation(vars))
	if err != nil {
		return false, fmt.Errorf("%s %q: %w", p.kind.name, p.src, err)
	}
	b, ok := v.Value().(bool)
	if !ok {
		return false, fmt.Errorf("%s %q returned %s, not a bool", p.kind.name, p.src, v.Type().TypeName())
	}
	return b, nil
}

// EvalString evaluates an expression that yields a string.
func (p *Program) EvalString(vars map[string]any) (string, error) {
	v, _, err := p.prg.Eval(p.kind.activation(vars))
	if err != nil {
		return "", fmt.Errorf("%s %q: %w", p.kind.name, p.src, err)
	}
	s, ok := v.Value().(string)
	if !ok {
		return "", fmt.Errorf("%s %q returned %s, not a string", p.kind.name, p.src, v.Type().TypeName())
	}
	return s, nil
}

func firstLine(s string) string {
	s = strings.TrimPrefix(s, "ERROR: <input>:")
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}

func typeName(t *types.Type) string { return t.String() }

// namespaceAlias stands in for the identity variable "namespace", which CEL
// reserves as a keyword; Kopiur manifests use the plain name, so it is
// renamed before compiling.
const namespaceAlias = "__namespace"

// rewrite renames the namespace identifier outside string literals.
func (k *Kind) rewrite(src string) string {
	if k != Identity || !strings.Contains(src, "namespace") {
		return src
	}
	var b strings.Builder
	for i := 0; i < len(src); {
		c := src[i]
		if c == '"' || c == '\'' {
			j := skipString(src, i)
			b.WriteString(src[i:j])
			i = j
			continue
		}
		if isIdentStart(c) {
			j := i
			for j < len(src) && isIdentPart(src[j]) {
				j++
			}
			word := src[i:j]
			if word == "namespace" && (i == 0 || src[i-1] != '.') {
				word = namespaceAlias
			}
			b.WriteString(word)
			i = j
			continue
		}
		b.WriteByte(c)
		i++
	}
	return b.String()
}

// activation maps variable names as users write them onto the compiled names.
func (k *Kind) activation(vars map[string]any) map[string]any {
	ns, ok := vars["namespace"]
	if k != Identity || !ok {
		return vars
	}
	out := make(map[string]any, len(vars))
	for key, v := range vars {
		out[key] = v
	}
	out[namespaceAlias] = ns
	return out
}

// skipString returns the index just past the string literal starting at i,
// for single, double and triple quotes.
func skipString(src string, i int) int {
	q := src[i]
	if strings.HasPrefix(src[i:], strings.Repeat(string(q), 3)) {
		end := strings.Index(src[i+3:], strings.Repeat(string(q), 3))
		if end < 0 {
			return len(src)
		}
		return i + 3 + end + 3
	}
	for j := i + 1; j < len(src); j++ {
		switch src[j] {
		case '\\':
			j++
		case q:
			return j + 1
		}
	}
	return len(src)
}

func isIdentStart(c byte) bool { return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isIdentPart(c byte) bool  { return isIdentStart(c) || c >= '0' && c <= '9' }

// PreflightGuards maps each preflight value that is absent until snapflow
// has observed it to the flag that says it is there.
var PreflightGuards = map[string]string{
	"repository.snapshotCount":          "repository.snapshotCountKnown",
	"repository.indexBlobCount":         "repository.indexBlobCountKnown",
	"repository.sizeBytes":              "repository.sizeBytesKnown",
	"repository.lastHealthyAgeSeconds":  "repository.lastHealthyKnown",
	"repository.lastReverifyAgeSeconds": "repository.lastReverifyKnown",
	"maintenance.lastSuccessAgeSeconds": "maintenance.hasRun",
}

var selection = regexp.MustCompile(`\b(repository|maintenance)\.([A-Za-z_][A-Za-z0-9_]*)`)

// Unguarded lists the values src reads without reading their guard flag:
// such a check holds the run until the value has been observed.
func Unguarded(src string) []string {
	read := map[string]bool{}
	for _, m := range selection.FindAllStringSubmatch(src, -1) {
		read[m[1]+"."+m[2]] = true
	}
	var out []string
	for v, guard := range PreflightGuards {
		if read[v] && !read[guard] {
			out = append(out, v)
		}
	}
	sort.Strings(out)
	return out
}
