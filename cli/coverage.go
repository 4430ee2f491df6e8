package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/internal/coverage"
	"github.com/snapflow/snapflow/internal/policysource"
	"github.com/snapflow/snapflow/internal/volumepolicy"
)

// coverageReport is what `snapflow coverage -o json|yaml` prints.
type coverageReport struct {
	Counts map[coverage.State]int `json:"counts"`
	Items  []coverage.Verdict     `json:"items"`
}

func newCoverageCmd(kube *kubeFlags) *cobra.Command {
	var namespace, output, global string
	var all, failUnprotected bool
	cmd := &cobra.Command{
		Use:   "coverage",
		Short: "Show, for every PVC, what backs it up, what excludes it, or that nothing does",
		Long: `Show, for every PVC, whether it is backed up: the SnapshotPolicies whose
sources cover it and that an active SnapshotSchedule fires (with the last
success and the next firing), the volume-policy rule or annotation that
excludes it, or UNPROTECTED.

States: Protected; Excluded (a volume-policy skip rule, or the annotation
snapflow.dev/backup-not-required on the PVC or its namespace, whose value is
shown as the reason: anyone who may edit the PVC or namespace can set it);
Failing (a policy covers it but cannot back it up: a missing repository, two
of its sources covering the PVC, an unreadable resourcePolicy); Unscheduled
(a policy covers it, no schedule fires the policy); Suspended; Unprotected.
snapflow's own claims (staged, cache, prime) and claims being deleted are
not listed.`,
		Example: `  snapflow coverage -A
  snapflow coverage -n apps -o json
  snapflow coverage -A --global-volume-policies snapflow-system/global-volume-policies --fail-unprotected`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, ns, err := kube.lister(output, namespace, all)
			if err != nil {
				return err
			}
			in, warnings, err := readCoverage(cmd.Context(), c, ns, global)
			if err != nil {
				return err
			}
			for _, w := range warnings {
				fmt.Fprintln(cmd.ErrOrStderr(), "warning:", w)
			}
			if global == "" {
				fmt.Fprintln(cmd.ErrOrStderr(), "note: no --global-volume-policies given: the global baseline's skip rules, which every backup applies, are not considered")
			}
			verdicts := coverage.Verdicts(in)
			counts := coverage.Counts(verdicts)
			if output == OutputTable {
				printCoverage(cmd.OutOrStdout(), verdicts, all, time.Now())
			} else if err := printStructured(cmd.OutOrStdout(), output, coverageReport{Counts: counts, Items: verdicts}); err != nil {
				return err
			}
			if failUnprotected && counts[coverage.Unprotected]+counts[coverage.Failing] > 0 {
				return exitError{code: 3, msg: fmt.Sprintf("%d PVC(s) unprotected, %d failing", counts[coverage.Unprotected], counts[coverage.Failing])}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&namespace, "namespace", "n", "", "namespace (default: the kubeconfig's)")
	f.BoolVarP(&all, "all-namespaces", "A", false, "every namespace")
	f.StringVarP(&output, "output", "o", OutputTable, "output format: table, json or yaml")
	f.StringVar(&global, "global-volume-policies", "", "the global volume-policy ConfigMap as NAMESPACE/NAME (the chart's globalVolumePolicies.name in its namespace), so its skip rules count as exclusions")
	f.BoolVar(&failUnprotected, "fail-unprotected", false, "exit 3 when any PVC is unprotected or failing (for CI and cron checks)")
	return cmd
}

// readCoverage lists what the verdicts need, in ns ("" for all). A
// resourcePolicy ConfigMap that cannot be read is a warning: its PVCs are
// judged without it.
func readCoverage(ctx context.Context, c client.Client, ns, global string) (coverage.Input, []string, error) {
	var in coverage.Input
	var warnings []string
	var pvcs corev1.PersistentVolumeClaimList
	var pols snapv1.SnapshotPolicyList
	var scheds snapv1.SnapshotScheduleList
	for _, l := range []client.ObjectList{&pvcs, &pols, &scheds} {
		if err := c.List(ctx, l, client.InNamespace(ns)); err != nil {
			return in, nil, fmt.Errorf("list %T: %w", l, err)
		}
	}
	in.PVCs, in.Policies, in.Schedules = pvcs.Items, pols.Items, scheds.Items
	// Namespace annotations: one namespace, or all of them.
	if ns != "" {
		var n corev1.Namespace
		if err := c.Get(ctx, client.ObjectKey{Name: ns}, &n); err == nil {
			in.Namespaces = []corev1.Namespace{n}
		} else if !apierrors.IsNotFound(err) {
			warnings = append(warnings, fmt.Sprintf("namespace %s: %v (its %s annotation is not considered)", ns, err, "snapflow.dev/backup-not-required"))
		}
	} else {
		var nl corev1.NamespaceList
		if err := c.List(ctx, &nl); err != nil {
			warnings = append(warnings, fmt.Sprintf("list namespaces: %v (their annotations are not considered)", err))
		}
		in.Namespaces = nl.Items
	}
	// Volume policies look at the bound volume: one listing, not a read
	// per claim.
	in.PVs = map[string]*corev1.PersistentVolume{}
	var pvs corev1.PersistentVolumeList
	if err := c.List(ctx, &pvs); err != nil {
		warnings = append(warnings, fmt.Sprintf("list PersistentVolumes: %v (volume-policy rules on volumes are judged from the claims alone)", err))
	}
	for i := range pvs.Items {
		in.PVs[pvs.Items[i].Name] = &pvs.Items[i]
	}
	in.Recipes, in.RecipeErrors = map[string]*volumepolicy.Document{}, map[string]string{}
	for _, p := range pols.Items {
		if p.Spec.ResourcePolicy == nil {
			continue
		}
		key := p.Namespace + "/" + p.Spec.ResourcePolicy.Name
		if _, done := in.Recipes[key]; done {
			continue
		}
		doc, _, err := policysource.Read(ctx, c, p.Namespace, p.Spec.ResourcePolicy.Name, "resourcePolicy")
		switch {
		case apierrors.IsForbidden(err):
			// Unknown, not broken: the user may not read it.
			warnings = append(warnings, fmt.Sprintf("SnapshotPolicy %s/%s spec.resourcePolicy: %v (its skip rules are not considered)", p.Namespace, p.Name, err))
		case err != nil:
			// Every run of the policy fails on it, as the snapshot function reads it.
			in.RecipeErrors[key] = err.Error()
		default:
			in.Recipes[key] = doc
		}
	}
	if global != "" {
		gns, gname, ok := strings.Cut(global, "/")
		if !ok || gns == "" || gname == "" {
			return in, nil, fmt.Errorf("--global-volume-policies %q: want NAMESPACE/NAME of the ConfigMap", global)
		}
		doc, _, err := policysource.Read(ctx, c, gns, gname, "global backup volume policies")
		if err != nil {
			return in, nil, fmt.Errorf("--global-volume-policies: %w", err)
		}
		in.Global, in.GlobalName = doc, global
	}
	return in, warnings, nil
}

func printCoverage(w io.Writer, vs []coverage.Verdict, all bool, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if all {
		fmt.Fprint(tw, "NAMESPACE\t")
	}
	fmt.Fprintln(tw, "PVC\tSTATE\tPOLICIES\tLAST SUCCESS\tNEXT\tREASON")
	for _, v := range vs {
		if all {
			fmt.Fprintf(tw, "%s\t", v.Namespace)
		}
		state := string(v.State)
		if v.State == coverage.Unprotected {
			state = "UNPROTECTED"
		}
		last, next := "-", "-"
		if v.LastSuccess != nil {
			last = duration.HumanDuration(now.Sub(v.LastSuccess.Time)) + " ago"
		}
		if v.NextFiring != nil {
			next = "in " + duration.HumanDuration(v.NextFiring.Sub(now))
		}
		pols := strings.Join(v.Policies, ",")
		if pols == "" {
			pols = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", v.PVC, state, pols, last, next, v.Reason)
	}
	_ = tw.Flush()
	counts := coverage.Counts(vs)
	fmt.Fprintf(w, "\n%d PVC(s): %d protected, %d excluded, %d failing, %d unscheduled, %d suspended, %d unprotected\n", len(vs),
		counts[coverage.Protected], counts[coverage.Excluded], counts[coverage.Failing], counts[coverage.Unscheduled], counts[coverage.Suspended], counts[coverage.Unprotected])
}
