package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/snapflow/snapflow/internal/volumepolicy"
)

// PolicyCheck is what `snapflow policy check -o json` prints.
type PolicyCheck struct {
	Warnings []string            `json:"warnings,omitempty"`
	Rules    []volumepolicy.Rule `json:"rules"`
	// Merged is the document Velero would use for a Backup with the
	// recipe as its own policy: the recipe whole, the global
	// volumePolicies appended.
	Merged   *volumepolicy.Document `json:"merged,omitempty"`
	Volume   string                 `json:"volume,omitempty"`
	Decision *volumepolicy.Decision `json:"decision,omitempty"`
}

func newPolicyCmd(kube *kubeFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "policy", Short: "Work with volume policies"}
	cmd.AddCommand(newPolicyCheckCmd(kube))
	return cmd
}

func newPolicyCheckCmd(kube *kubeFlags) *cobra.Command {
	var policies, global, pvFile, pvcFile, podVolumeFile, volumeFrom, output string
	cmd := &cobra.Command{
		Use:   "check --policies FILE [--global FILE] [--pv FILE --pvc FILE --pod-volume FILE | --volume-from NAMESPACE/PVC]",
		Short: "Validate volume policies, show the merged list and what a volume would get",
		Long: `Validates a recipe's volume policies and, optionally, the global baseline
(Velero ResourcePolicies v1 documents, as files or as ConfigMap manifests),
prints the effective list (recipe rules first, then the global ones) and,
for a given volume, the action and the rule that matched. The volume is a
PV and its PVC, an unbound PVC, or a pod's volume (--pod-volume, one entry
of a pod's spec.volumes, e.g. {name: cache, emptyDir: {}}), matched as
Velero matches each. Use it to test a baseline before rolling it out.

Exits 1 when a document is invalid, 2 when an input cannot be read or
the flags do not fit together.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if policies == "" && global == "" {
				return usage(errors.New("give --policies FILE, --global FILE, or both"))
			}
			var res PolicyCheck
			recipe, w, err := loadPolicyFile(policies, "--policies")
			if err != nil {
				return err
			}
			res.Warnings = append(res.Warnings, w...)
			base, w, err := loadPolicyFile(global, "--global")
			if err != nil {
				return err
			}
			if base != nil {
				if other := base.OtherSections(); len(other) > 0 {
					w = append(w, fmt.Sprintf("--global: %s ignored: only volumePolicies apply globally", strings.Join(other, ", ")))
				}
			}
			if recipe != nil {
				if other := recipe.OtherSections(); len(other) > 0 {
					w = append(w, fmt.Sprintf("--policies: %s kept for Velero, but snapflow applies only volumePolicies", strings.Join(other, ", ")))
				}
			}
			res.Warnings = append(res.Warnings, w...)
			res.Rules = volumepolicy.Merge(recipe, base)
			if res.Rules == nil {
				res.Rules = []volumepolicy.Rule{}
			}
			res.Merged = volumepolicy.MergeDocuments(recipe, base)
			vol, name, err := loadVolume(cmd, kube, pvFile, pvcFile, podVolumeFile, volumeFrom)
			if err != nil {
				return usage(err)
			}
			if name != "" {
				d := volumepolicy.Decide(res.Rules, vol)
				res.Volume, res.Decision = name, &d
			}
			if output != OutputTable {
				return printStructured(cmd.OutOrStdout(), output, res)
			}
			printPolicyCheck(cmd.OutOrStdout(), res)
			return nil
		},
	}
	cmd.SetFlagErrorFunc(flagUsage)
	f := cmd.Flags()
	f.StringVar(&policies, "policies", "", "the recipe's ResourcePolicies document or ConfigMap manifest")
	f.StringVar(&global, "global", "", "the global baseline's document or ConfigMap manifest")
	f.StringVar(&pvFile, "pv", "", "a PersistentVolume manifest to evaluate")
	f.StringVar(&pvcFile, "pvc", "", "a PersistentVolumeClaim manifest to evaluate")
	f.StringVar(&podVolumeFile, "pod-volume", "", "a pod volume (one entry of a pod's spec.volumes) to evaluate, alone or with the --pvc and --pv it names")
	f.StringVar(&volumeFrom, "volume-from", "", "evaluate a PVC (and its bound PV) read from the cluster, as NAMESPACE/NAME")
	f.StringVarP(&output, "output", "o", OutputTable, "output format: table, json or yaml")
	return cmd
}

// loadPolicyFile reads a ResourcePolicies document, bare or inside a ConfigMap manifest.
func loadPolicyFile(path, flag string) (*volumepolicy.Document, []string, error) {
	if path == "" {
		return nil, nil, nil
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, usage(fmt.Errorf("%s: %w", flag, err))
	}
	var probe struct{ Kind string }
	_ = yaml.Unmarshal(raw, &probe)
	var doc *volumepolicy.Document
	what := flag + " " + path
	if probe.Kind == "ConfigMap" {
		var cm corev1.ConfigMap
		if err := yaml.UnmarshalStrict(raw, &cm); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", what, err)
		}
		// Named as the webhook names it, with the file it came from.
		what = fmt.Sprintf("%s: ConfigMap %s/%s", what, cm.Namespace, cm.Name)
		doc, err = volumepolicy.FromConfigMap(&cm)
	} else {
		doc, err = volumepolicy.Parse(raw)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", what, err)
	}
	warnings, err := doc.Validate()
	if err != nil {
		return nil, nil, fmt.Errorf("%s is invalid: %w", what, err)
	}
	for i := range warnings {
		warnings[i] = flag + ": " + warnings[i]
	}
	return doc, warnings, nil
}

func loadVolume(cmd *cobra.Command, kube *kubeFlags, pvFile, pvcFile, podVolumeFile, from string) (volumepolicy.Volume, string, error) {
	var v volumepolicy.Volume
	if from != "" {
		if pvFile != "" || pvcFile != "" || podVolumeFile != "" {
			return v, "", errors.New("use --volume-from or --pv/--pvc/--pod-volume, not both")
		}
		ns, name, ok := strings.Cut(from, "/")
		if !ok || ns == "" || name == "" {
			return v, "", fmt.Errorf("--volume-from %q: want NAMESPACE/PVC", from)
		}
		c, err := kube.client()
		if err != nil {
			return v, "", err
		}
		var pvc corev1.PersistentVolumeClaim
		if err := c.Get(cmd.Context(), client.ObjectKey{Namespace: ns, Name: name}, &pvc); err != nil {
			return v, "", fmt.Errorf("--volume-from: read PVC %s: %w", from, err)
		}
		v.PVC = &pvc
		if pvc.Spec.VolumeName != "" {
			var pv corev1.PersistentVolume
			if err := c.Get(cmd.Context(), client.ObjectKey{Name: pvc.Spec.VolumeName}, &pv); err != nil {
				return v, "", fmt.Errorf("--volume-from: read PV %s bound to %s: %w", pvc.Spec.VolumeName, from, err)
			}
			v.PV = &pv
		}
		return v, "pvc " + from, nil
	}
	var names []string
	if pvcFile != "" {
		var pvc corev1.PersistentVolumeClaim
		if err := readStrict(pvcFile, &pvc); err != nil {
			return v, "", fmt.Errorf("--pvc: %w", err)
		}
		v.PVC = &pvc
		names = append(names, "pvc "+pvc.Namespace+"/"+pvc.Name)
	}
	if pvFile != "" {
		var pv corev1.PersistentVolume
		if err := readStrict(pvFile, &pv); err != nil {
			return v, "", fmt.Errorf("--pv: %w", err)
		}
		v.PV = &pv
		names = append(names, "pv "+pv.Name)
	}
	if podVolumeFile != "" {
		var vol corev1.Volume
		if err := readStrict(podVolumeFile, &vol); err != nil {
			return v, "", fmt.Errorf("--pod-volume: %w", err)
		}
		if vol.Name == "" {
			return v, "", fmt.Errorf("--pod-volume %s: the volume has no name; give one entry of a pod's spec.volumes, e.g. {name: cache, emptyDir: {}}", podVolumeFile)
		}
		if c := vol.PersistentVolumeClaim; c != nil && (v.PVC == nil || v.PVC.Name != c.ClaimName) {
			return v, "", fmt.Errorf("--pod-volume %s names PVC %q: give that PVC with --pvc (and its PV with --pv), as a backup reads them", podVolumeFile, c.ClaimName)
		}
		v.PodVolume = &vol
		names = append(names, "pod volume "+vol.Name)
	}
	return v, strings.Join(names, ", "), nil
}

func readStrict(path string, into any) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := yaml.UnmarshalStrict(raw, into); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

func printPolicyCheck(w io.Writer, res PolicyCheck) {
	for _, warn := range res.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warn)
	}
	fmt.Fprintf(w, "Effective volume policies (first match wins):\n")
	if len(res.Rules) == 0 {
		fmt.Fprintln(w, "  (none)")
	}
	for i, r := range res.Rules {
		cond, _ := json.Marshal(r.Conditions)
		c := string(cond)
		if c == "{}" {
			c = "every volume"
		}
		fmt.Fprintf(w, "  %2d  %-8s #%d  %-10s %s%s\n", i, r.Source, r.Index, r.Action.Type, c, params(r.Action))
	}
	if res.Decision == nil {
		return
	}
	fmt.Fprintf(w, "\nVolume: %s\n", res.Volume)
	if !res.Decision.Matched {
		fmt.Fprintln(w, "  no rule matches: the recipe's copyMethod decides")
		return
	}
	r := res.Decision.Rule
	fmt.Fprintf(w, "  action: %s%s\n  rule:   %s policy #%d\n", r.Action.Type, params(r.Action), r.Source, r.Index)
}

func params(a volumepolicy.Action) string {
	if len(a.Parameters) == 0 {
		return ""
	}
	b, _ := json.Marshal(a.Parameters)
	return " " + string(b)
}
