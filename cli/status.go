package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/internal/fleet"
)

func newStatusCmd(kube *kubeFlags) *cobra.Command {
	var namespace, output string
	var all bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Summarise backups: per policy the last success, next run and failures; per repository the queue",
		Long: `Summarise the backups of a namespace (or, with -A, the cluster) for the
engineer on call. Per SnapshotPolicy: its state (OK, Failing when its newest
finished run failed, Unscheduled when no active schedule fires it,
Suspended), the last success, the next scheduled run, how many runs failed
since the last success and why the newest did, and how many runs are
running, queued for a slot, or held from deletion. Per repository: its
phase, those same counts, and its stored snapshots and bytes.`,
		Example: `  snapflow status
  snapflow status -A -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, ns, err := kube.lister(output, namespace, all)
			if err != nil {
				return err
			}
			in, warnings, err := readFleet(cmd.Context(), c, ns)
			if err != nil {
				return err
			}
			for _, w := range warnings {
				fmt.Fprintln(cmd.ErrOrStderr(), "warning:", w)
			}
			rep := fleet.Summarize(in)
			if output != OutputTable {
				return printStructured(cmd.OutOrStdout(), output, rep)
			}
			printFleet(cmd.OutOrStdout(), rep, all, time.Now())
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&namespace, "namespace", "n", "", "namespace (default: the kubeconfig's)")
	f.BoolVarP(&all, "all-namespaces", "A", false, "every namespace")
	f.StringVarP(&output, "output", "o", OutputTable, "output format: table, json or yaml")
	return cmd
}

// readFleet lists what the summary needs in ns ("" for all). The
// ClusterRepositories are left out, with a warning, when the user may not
// list them.
func readFleet(ctx context.Context, c client.Client, ns string) (fleet.Input, []string, error) {
	var in fleet.Input
	var warnings []string
	var pols snapv1.SnapshotPolicyList
	var scheds snapv1.SnapshotScheduleList
	var snaps snapv1.SnapshotList
	var repos snapv1.RepositoryList
	for what, l := range map[string]client.ObjectList{"SnapshotPolicies": &pols, "SnapshotSchedules": &scheds, "Snapshots": &snaps, "Repositories": &repos} {
		if err := c.List(ctx, l, client.InNamespace(ns)); err != nil {
			return in, nil, fmt.Errorf("list %s: %w", what, err)
		}
	}
	var crs snapv1.ClusterRepositoryList
	if err := c.List(ctx, &crs); apierrors.IsForbidden(err) {
		warnings = append(warnings, "you may not list ClusterRepositories, so they are not shown")
	} else if err != nil {
		return in, nil, fmt.Errorf("list ClusterRepositories: %w", err)
	}
	in.Policies, in.Schedules, in.Snapshots, in.Repositories, in.ClusterRepositories = pols.Items, scheds.Items, snaps.Items, repos.Items, crs.Items
	return in, warnings, nil
}

func printFleet(w io.Writer, rep fleet.Report, all bool, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if all {
		fmt.Fprint(tw, "NAMESPACE\t")
	}
	fmt.Fprintln(tw, "POLICY\tSTATE\tLAST SUCCESS\tNEXT RUN\tFAILED\tRUNNING\tQUEUED\tHELD\tLAST FAILURE")
	for _, p := range rep.Policies {
		if all {
			fmt.Fprintf(tw, "%s\t", p.Namespace)
		}
		last, next := "-", "-"
		if p.LastSuccess != nil {
			last = duration.HumanDuration(now.Sub(p.LastSuccess.Time)) + " ago"
		}
		if p.NextRun != nil {
			if d := p.NextRun.Sub(now); d >= 0 {
				next = "in " + duration.HumanDuration(d)
			} else {
				next = "overdue " + duration.HumanDuration(-d)
			}
		}
		why := strings.Join(strings.Fields(p.LastFailure), " ")
		if r := []rune(why); len(r) > 80 {
			why = string(r[:77]) + "..."
		}
		if why == "" {
			why = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\n", p.Name, p.State, last, next, p.FailedSince, p.Running, p.Queued, p.HeldDeletions, why)
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "REPOSITORY\tPHASE\tRUNNING\tQUEUED\tHELD\tSNAPSHOTS\tSTORED")
	for _, r := range rep.Repositories {
		name := r.Kind + "/" + r.Name
		if r.Namespace != "" {
			name = r.Kind + "/" + r.Namespace + "/" + r.Name
		}
		phase := r.Phase
		if r.Suspended {
			phase += " (suspended)"
		}
		snaps, stored := "-", "-"
		if r.Snapshots != nil {
			snaps = fmt.Sprint(*r.Snapshots)
		}
		if r.Bytes != nil {
			stored = humanBytes(*r.Bytes)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%s\n", name, phase, r.Running, r.Queued, r.HeldDeletions, snaps, stored)
	}
	_ = tw.Flush()
	failing := 0
	for _, p := range rep.Policies {
		if p.State == fleet.Failing {
			failing++
		}
	}
	fmt.Fprintf(w, "\n%d polic%s, %d failing; %d repositor%s\n", len(rep.Policies), plural(len(rep.Policies), "y", "ies"), failing, len(rep.Repositories), plural(len(rep.Repositories), "y", "ies"))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// suspendable are the kinds `suspend` and `resume` act on, by the names a
// user types.
var suspendable = map[string]func() client.Object{
	"policy":            func() client.Object { return &snapv1.SnapshotPolicy{} },
	"schedule":          func() client.Object { return &snapv1.SnapshotSchedule{} },
	"repository":        func() client.Object { return &snapv1.Repository{} },
	"clusterrepository": func() client.Object { return &snapv1.ClusterRepository{} },
}

// setSuspend flips obj's suspend field and says whether it changed.
func setSuspend(obj client.Object, on bool) bool {
	var field *bool
	switch o := obj.(type) {
	case *snapv1.SnapshotPolicy:
		field = &o.Spec.Suspend
	case *snapv1.SnapshotSchedule:
		field = &o.Spec.Schedule.Suspend
	case *snapv1.Repository:
		field = &o.Spec.Suspend
	case *snapv1.ClusterRepository:
		field = &o.Spec.Suspend
	}
	if *field == on {
		return false
	}
	*field = on
	return true
}

func newSuspendCmd(kube *kubeFlags, on bool) *cobra.Command {
	verb, done := "suspend", "suspended"
	what := "no new runs start; running ones finish"
	if !on {
		verb, done = "resume", "resumed"
		what = "runs start again"
	}
	var namespace string
	cmd := &cobra.Command{
		Use:       verb + " policy|schedule|repository|clusterrepository NAME",
		Short:     strings.ToUpper(verb[:1]) + verb[1:] + " a SnapshotPolicy, SnapshotSchedule, Repository or ClusterRepository: " + what,
		Example:   fmt.Sprintf("  snapflow %s policy db -n apps\n  snapflow %s schedule nightly", verb, verb),
		Args:      cobra.ExactArgs(2),
		ValidArgs: []string{"policy", "schedule", "repository", "clusterrepository"},
		RunE: func(cmd *cobra.Command, args []string) error {
			kind := strings.ToLower(args[0])
			newObj, ok := suspendable[kind]
			if !ok {
				return usage(fmt.Errorf("cannot %s a %q: name one of policy, schedule, repository, clusterrepository", verb, args[0]))
			}
			c, err := kube.client()
			if err != nil {
				return err
			}
			obj := newObj()
			key := client.ObjectKey{Name: args[1]}
			shown := args[1]
			if kind != "clusterrepository" {
				if key.Namespace, err = kube.namespace(namespace); err != nil {
					return err
				}
				shown = key.Namespace + "/" + args[1]
			}
			if err := c.Get(cmd.Context(), key, obj); err != nil {
				return fmt.Errorf("read %s %s: %w", kind, shown, err)
			}
			before := obj.DeepCopyObject().(client.Object)
			if !setSuspend(obj, on) {
				fmt.Fprintf(cmd.OutOrStdout(), "%s %s was already %s\n", kind, shown, done)
				return nil
			}
			// Optimistic: an edit made since the read fails the patch
			// instead of being overwritten.
			if err := c.Patch(cmd.Context(), obj, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
				return fmt.Errorf("%s %s %s: %w", verb, kind, shown, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s %s: %s\n", kind, shown, done, what)
			return nil
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "namespace (default: the kubeconfig's; not used for a clusterrepository)")
	return cmd
}
