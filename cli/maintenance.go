package cli

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/kubemeta"
	"github.com/snapflow/snapflow/internal/mover"
)

func newMaintenanceCmd(kube *kubeFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "maintenance", Short: "Run kopia maintenance on a repository now"}
	var o struct {
		namespace, output, safety string
		full, wait                bool
		timeout                   time.Duration
	}
	run := &cobra.Command{
		Use:   "run NAME",
		Short: "Ask the maintenance function to run a Maintenance now, and follow it",
		Long: `run sets the run-requested annotation (and run-mode) on a Maintenance, as
kubectl annotate would, so the maintenance function starts a run at once
instead of at the next cron slot. A repository's default Maintenance is
named after it (clusterrepository-NAME for a ClusterRepository, in
snapflow's namespace). --full runs garbage collection; with --safety none
what deletions freed is reclaimed now rather than after kopia's safety
margins, which is safe only while nothing else writes to the repository
(the run waits for snapflow's other Jobs of the repository, and backups
wait for it). Scheduled runs always keep kopia's margins.
With --wait it follows the run and exits 1 unless it succeeded.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.output != OutputTable && o.output != OutputJSON && o.output != OutputYAML {
				return fmt.Errorf("unknown output format %q: use one of table, json, yaml", o.output)
			}
			if o.safety != "full" && o.safety != "none" {
				return fmt.Errorf("--safety %q: use full (kopia's margins, safe beside running backups) or none", o.safety)
			}
			c, err := kube.client()
			if err != nil {
				return err
			}
			ns, err := kube.namespace(o.namespace)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			mode := "quick"
			if o.full {
				mode = "full"
			}
			at := time.Now().UTC().Truncate(time.Second)
			// The safety is written on every request, so a none of an
			// earlier request never carries over to this one.
			patch, err := kubemeta.AnnotationsPatch(map[string]string{wellknown.AnnotationMaintenanceRunReq: at.Format(time.RFC3339), wellknown.AnnotationMaintenanceRunMode: mode,
				wellknown.AnnotationMaintenanceSafety: o.safety})
			if err != nil {
				return err
			}
			m := &snapv1.Maintenance{}
			m.Namespace, m.Name = ns, args[0]
			if err := c.Patch(ctx, m, patch); err != nil {
				return fmt.Errorf("request a run of Maintenance %s/%s: %w", ns, args[0], err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "requested a %s maintenance run of %s/%s at %s\n", mode, ns, args[0], at.Format(time.RFC3339))
			if !o.wait {
				return nil
			}
			wctx, cancel := context.WithTimeout(ctx, o.timeout)
			defer cancel()
			r, err := followMaintenance(wctx, cmd.ErrOrStderr(), c, ns, args[0], mode, at)
			if err != nil {
				return err
			}
			if o.output == OutputTable {
				printMaintenanceRun(cmd.OutOrStdout(), r)
			} else if err := printStructured(cmd.OutOrStdout(), o.output, r); err != nil {
				return err
			}
			if r.Phase != mover.MaintenanceSucceeded {
				return fmt.Errorf("the %s run ended %s: %s", mode, r.Phase, r.Message)
			}
			return nil
		},
	}
	f := run.Flags()
	f.StringVarP(&o.namespace, "namespace", "n", "", "namespace of the Maintenance (default: the kubeconfig's)")
	f.BoolVar(&o.full, "full", false, "run full maintenance (snapshot garbage collection, deletion of unreferenced blobs) instead of quick")
	f.StringVar(&o.safety, "safety", "full", "full (kopia's margins) or none (reclaim now; only while nothing else writes to the repository); applies to requested runs only, never to scheduled ones")
	f.BoolVar(&o.wait, "wait", false, "follow the run until it ends")
	f.DurationVar(&o.timeout, "timeout", 30*time.Minute, "how long --wait follows the run")
	f.StringVarP(&o.output, "output", "o", OutputTable, "table, json or yaml (with --wait)")
	cmd.AddCommand(run)
	return cmd
}

// followMaintenance polls until mode's run for a slot at or after since has
// ended, printing each change of phase.
func followMaintenance(ctx context.Context, w io.Writer, c client.Client, ns, name, mode string, since time.Time) (snapv1.MaintenanceRun, error) {
	last := ""
	for {
		var m snapv1.Maintenance
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &m); err != nil {
			return snapv1.MaintenanceRun{}, fmt.Errorf("read Maintenance %s/%s: %w", ns, name, err)
		}
		line := "waiting for the maintenance function"
		for _, r := range m.Status.Runs {
			if r.Mode != mode || r.Slot.Time.Before(since) {
				continue
			}
			if r.Phase != mover.MaintenanceRunning {
				return r, nil
			}
			line = "running in Job " + r.Job
		}
		if line != last {
			fmt.Fprintf(w, "[%s] %s\n", time.Now().Format("15:04:05"), line)
			last = line
		}
		select {
		case <-ctx.Done():
			return snapv1.MaintenanceRun{}, fmt.Errorf("gave up following after the timeout: %s (the run goes on)", line)
		case <-time.After(time.Second):
		}
	}
}

func printMaintenanceRun(w io.Writer, r snapv1.MaintenanceRun) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	num := func(p *int64) string {
		if p == nil {
			return "-"
		}
		return fmt.Sprint(*p)
	}
	fmt.Fprintln(tw, "MODE\tPHASE\tSAFETY\tBYTES BEFORE\tBYTES AFTER\tRECLAIMED\tSECONDS\tMESSAGE")
	fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Mode, r.Phase, r.Safety, num(r.BytesBefore), num(r.BytesAfter), num(r.ReclaimedBytes), num(r.DurationSeconds), r.Message)
	_ = tw.Flush()
}
