package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	jsonpatchapply "github.com/evanphx/json-patch/v5"
	"github.com/spf13/cobra"
	jsonpatch "gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/snapflow/snapflow/internal/admission"
	"github.com/snapflow/snapflow/internal/crdschema"
	"github.com/snapflow/snapflow/internal/repository"
	"github.com/snapflow/snapflow/internal/validate"
)

const kopiurAPIVersion = "kopiur.home-operations.com/v1alpha1"

// Finding is the verdict on one object, as `snapflow validate -o json` prints it.
type Finding struct {
	File      string                `json:"file"`
	Kind      string                `json:"kind"`
	Namespace string                `json:"namespace,omitempty"`
	Name      string                `json:"name"`
	Allowed   bool                  `json:"allowed"`
	Errors    []FieldProblem        `json:"errors,omitempty"`
	Warnings  []string              `json:"warnings,omitempty"`
	Patches   []jsonpatch.Operation `json:"patches,omitempty"`
	Mutated   map[string]any        `json:"mutated,omitempty"`
}

// FieldProblem is one denial reason.
type FieldProblem struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

func newValidateCmd(kube *kubeFlags) *cobra.Command {
	var files []string
	var output string
	var showMutations, cluster bool
	cmd := &cobra.Command{
		Use:   "validate -f FILE|DIR [-f ...]",
		Short: "Check snapflow manifests offline with the webhook's own rules",
		Long: `Runs the admission webhook's validation and mutations over manifests
without a cluster, so a CI pipeline can check backup manifests before they
merge. Schema defaults are applied and unknown fields reported as the API
server would. Rules that read other objects use the other objects in the
given files, and say so when a referent is not among them; with --cluster
those not in the files are read from the cluster of the kubeconfig (read
only), as the webhook would find them once the files are applied.

Exits 1 when anything would be denied, 2 when the manifests cannot be
read.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(files) == 0 {
				return usage(errors.New("give at least one manifest with -f FILE or -f DIR"))
			}
			var live validate.Lookup
			if cluster {
				c, err := kube.client()
				if err != nil {
					return usage(fmt.Errorf("--cluster: %w", err))
				}
				live = repository.Lookup{Reader: c}
			}
			findings, err := validateManifests(cmd.Context(), files, showMutations, live)
			if err != nil {
				return usage(err)
			}
			if err := printFindings(cmd.OutOrStdout(), output, findings, showMutations); err != nil {
				return err
			}
			denied := 0
			for _, f := range findings {
				if !f.Allowed {
					denied++
				}
			}
			if denied > 0 {
				return exitError{code: 1, msg: fmt.Sprintf("%d of %d objects would be denied", denied, len(findings))}
			}
			return nil
		},
	}
	cmd.SetFlagErrorFunc(flagUsage)
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "manifest file or directory (YAML or JSON, searched recursively); repeatable")
	cmd.Flags().StringVarP(&output, "output", "o", OutputTable, "output format: table, json or yaml")
	cmd.Flags().BoolVar(&showMutations, "show-mutations", false, "print each object as the webhook would store it")
	cmd.Flags().BoolVar(&cluster, "cluster", false, "read referents the files do not define (resourcePolicy ConfigMaps, repositories, namespaces, PVCs) from the cluster")
	return cmd
}

type doc struct {
	file string
	obj  map[string]any
}

func readManifests(paths []string) ([]doc, error) {
	var docs []doc
	for _, root := range paths {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				return nil
			}
			if ext := filepath.Ext(p); p != root && ext != ".yaml" && ext != ".yml" && ext != ".json" {
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
			for {
				var obj map[string]any
				if err := dec.Decode(&obj); err != nil {
					if errors.Is(err, io.EOF) {
						return nil
					}
					return fmt.Errorf("%s: %w", p, err)
				}
				if obj != nil {
					docs = append(docs, doc{file: p, obj: obj})
				}
			}
		})
		if err != nil {
			return nil, fmt.Errorf("read manifests: %w", err)
		}
	}
	return docs, nil
}

// validateManifests checks the manifests under paths; live, when set,
// supplies the referents they do not define.
func validateManifests(ctx context.Context, paths []string, withMutated bool, live validate.Lookup) ([]Finding, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	docs, err := readManifests(paths)
	if err != nil {
		return nil, err
	}
	lookup := validate.NewObjects()
	lookup.Offline = true
	type entry struct {
		doc     doc
		obj     admission.Object
		finding Finding
	}
	var entries []entry
	for _, d := range docs {
		apiVersion, _ := d.obj["apiVersion"].(string)
		kind, _ := d.obj["kind"].(string)
		meta, _ := d.obj["metadata"].(map[string]any)
		name, _ := meta["name"].(string)
		if name == "" {
			name, _ = meta["generateName"].(string)
		}
		ns, _ := meta["namespace"].(string)
		if apiVersion == "v1" && (kind == "Namespace" || kind == "ConfigMap") {
			// Namespaces for tenancy, ConfigMaps for a recipe's volume
			// policies: read by the rules of the objects naming them.
			var obj any = &corev1.Namespace{}
			if kind == "ConfigMap" {
				obj = &corev1.ConfigMap{}
			}
			b, _ := json.Marshal(d.obj)
			if json.Unmarshal(b, obj) == nil {
				lookup.Add(obj)
			}
			continue
		}
		if apiVersion != kopiurAPIVersion {
			continue
		}
		f := Finding{File: d.file, Kind: kind, Namespace: ns, Name: name, Allowed: true}
		unknown, err := crdschema.Apply(kind, d.obj)
		if err != nil {
			f.Allowed = false
			f.Errors = append(f.Errors, FieldProblem{Field: "kind", Message: err.Error()})
			entries = append(entries, entry{doc: d, finding: f})
			continue
		}
		for _, u := range unknown {
			f.Allowed = false
			f.Errors = append(f.Errors, FieldProblem{Field: u, Message: "unknown field: the API server refuses it under strict field validation; check the spelling against the API reference"})
		}
		// The schema's own rules, which the API server applies before the
		// webhook sees the object (an empty identity.username, say).
		schemaErrs, err := crdschema.Validate(kind, d.obj)
		if err != nil {
			return nil, err
		}
		for _, e := range schemaErrs {
			f.Allowed = false
			f.Errors = append(f.Errors, FieldProblem{Field: e.Field, Message: e.ErrorBody()})
		}
		raw, _ := json.Marshal(d.obj)
		obj, err := admission.Decode(kind, raw)
		if err != nil {
			f.Allowed = false
			f.Errors = append(f.Errors, FieldProblem{Field: "", Message: err.Error()})
		} else {
			lookup.Add(obj)
		}
		entries = append(entries, entry{doc: d, obj: obj, finding: f})
	}

	var lk validate.Lookup = lookup
	if live != nil {
		lk = validate.Layered{Given: lookup, Cluster: live}
	}
	findings := make([]Finding, 0, len(entries))
	for _, e := range entries {
		f := e.finding
		if e.obj != nil {
			r := admission.Validate(ctx, lk, admission.Create, e.obj, nil)
			for _, fe := range r.Errs.WrappedErrors() {
				for _, p := range fe.Paths {
					f.Errors = append(f.Errors, FieldProblem{Field: p, Message: fe.Message})
				}
			}
			f.Warnings = append(f.Warnings, r.Warnings...)
			f.Allowed = f.Allowed && r.OK()
			patches, _, err := admission.Mutate(ctx, lk, nil, admission.Create, e.obj, nil)
			if err != nil {
				f.Allowed = false
				f.Errors = append(f.Errors, FieldProblem{Message: err.Error()})
			}
			f.Patches = patches
			if withMutated {
				mutated, err := applyPatches(e.doc.obj, f.Patches)
				if err != nil {
					return nil, err
				}
				f.Mutated = mutated
			}
		}
		sort.Slice(f.Errors, func(i, j int) bool { return f.Errors[i].Field < f.Errors[j].Field })
		findings = append(findings, f)
	}
	return findings, nil
}

func applyPatches(obj map[string]any, ops []jsonpatch.Operation) (map[string]any, error) {
	doc, _ := json.Marshal(obj)
	if len(ops) > 0 {
		pb, _ := json.Marshal(ops)
		p, err := jsonpatchapply.DecodePatch(pb)
		if err != nil {
			return nil, fmt.Errorf("decode mutation: %w", err)
		}
		if doc, err = p.Apply(doc); err != nil {
			return nil, fmt.Errorf("apply mutation: %w", err)
		}
	}
	var out map[string]any
	err := json.Unmarshal(doc, &out)
	return out, err
}

func printFindings(w io.Writer, format string, findings []Finding, showMutations bool) error {
	if format != OutputTable {
		return printStructured(w, format, findings)
	}
	for _, f := range findings {
		id := f.Name
		if f.Namespace != "" {
			id = f.Namespace + "/" + f.Name
		}
		verdict := "ok"
		if !f.Allowed {
			verdict = "DENIED"
		}
		fmt.Fprintf(w, "%s %s %s (%s)\n", verdict, f.Kind, id, f.File)
		for _, e := range f.Errors {
			fmt.Fprintf(w, "  error   %s: %s\n", e.Field, e.Message)
		}
		for _, warn := range f.Warnings {
			fmt.Fprintf(w, "  warning %s\n", warn)
		}
		if showMutations && f.Mutated != nil {
			b, _ := yaml.Marshal(f.Mutated)
			fmt.Fprintf(w, "  stored as:\n    %s\n", strings.ReplaceAll(strings.TrimRight(string(b), "\n"), "\n", "\n    "))
		}
	}
	return nil
}
