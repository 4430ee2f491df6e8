package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/snapflow/snapflow/internal/coverage"
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
			if err := globalPoliciesFlag(global); err != nil {
				return err
			}
			c, ns, err := kube.lister(output, namespace, all)
			if err != nil {
				return err
			}
			in, warnings, err := coverage.Read(cmd.Context(), c, ns, global, coverage.ReadOptions{})
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

// globalPoliciesFlag checks --global-volume-policies, which the coverage
// command and the exporter take alike.
func globalPoliciesFlag(global string) error {
	if _, _, ok := coverage.SplitConfigMap(global); global != "" && !ok {
		return fmt.Errorf("--global-volume-policies %q: want NAMESPACE/NAME of the ConfigMap, e.g. snapflow-system/global-volume-policies", global)
	}
	return nil
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
