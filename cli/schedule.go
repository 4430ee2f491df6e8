package cli

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/internal/schedule"
	"github.com/snapflow/snapflow/internal/validate"
)

// ScheduleNext is what `snapflow schedule next -o json` prints.
type ScheduleNext struct {
	Cron     string            `json:"cron"`
	Timezone string            `json:"timezone"`
	Jitter   string            `json:"jitter,omitempty"`
	Notes    []string          `json:"notes,omitempty"`
	Firings  []schedule.Firing `json:"firings"`
}

func newScheduleCmd(kube *kubeFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "schedule", Short: "Inspect schedules"}
	var name, namespace, cronExpr, tz, jitter, seed, uid, output string
	var count int
	next := &cobra.Command{
		Use:   "next (--schedule NAME [-n NAMESPACE] | --cron EXPR [--timezone TZ] [--jitter D] [--seed NS/NAME] [--uid UID])",
		Short: "Print the next firing times with H, timezone and jitter applied",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			res := ScheduleNext{}
			switch {
			case name != "" && cronExpr != "":
				return errors.New("use --schedule against the cluster, or --cron offline, not both")
			case name != "":
				if err := scheduleFromCluster(cmd, kube, namespace, name, &res, &seed, &uid); err != nil {
					return err
				}
			case cronExpr != "":
				res.Cron, res.Timezone, res.Jitter = cronExpr, tz, jitter
				if res.Timezone == "" {
					res.Timezone = "UTC"
				}
			default:
				return errors.New("give --schedule NAME, or --cron EXPR")
			}
			loc, err := time.LoadLocation(res.Timezone)
			if err != nil {
				return fmt.Errorf("timezone %q: %w", res.Timezone, err)
			}
			var window time.Duration
			if res.Jitter != "" {
				if window, err = time.ParseDuration(res.Jitter); err != nil {
					return fmt.Errorf("jitter %q: %w", res.Jitter, err)
				}
			}
			res.Firings, err = schedule.Next(schedule.Spec{Cron: res.Cron, Location: loc, Jitter: window, Seed: seed, UID: uid}, time.Now(), count)
			if err != nil {
				return err
			}
			if output != OutputTable {
				return printStructured(cmd.OutOrStdout(), output, res)
			}
			w := cmd.OutOrStdout()
			for _, n := range res.Notes {
				fmt.Fprintf(w, "note: %s\n", n)
			}
			fmt.Fprintf(w, "cron %q in %s, jitter %s\n", res.Cron, res.Timezone, describeJitter(res.Jitter))
			for _, f := range res.Firings {
				fmt.Fprintf(w, "  %s  (slot %s)\n", f.At.In(loc).Format(time.RFC3339), f.Slot.In(loc).Format("2006-01-02 15:04 MST"))
			}
			return nil
		},
	}
	f := next.Flags()
	f.StringVar(&name, "schedule", "", "SnapshotSchedule to read from the cluster")
	f.StringVarP(&namespace, "namespace", "n", "", "namespace of the schedule (default: the kubeconfig's)")
	f.StringVar(&cronExpr, "cron", "", "a 5-field cron expression (offline)")
	f.StringVar(&tz, "timezone", "", "IANA timezone (offline; default UTC)")
	f.StringVar(&jitter, "jitter", "", "jitter window, e.g. 30m (offline)")
	f.StringVar(&seed, "seed", "", "what H is derived from: the schedule's namespace/name (offline)")
	f.StringVar(&uid, "uid", "", "what jitter is derived from: the schedule's UID (offline)")
	f.IntVar(&count, "count", 5, "how many firings to print")
	f.StringVarP(&output, "output", "o", OutputTable, "output format: table, json or yaml")
	cmd.AddCommand(next)
	return cmd
}

func describeJitter(j string) string {
	if j == "" {
		return "none"
	}
	return j
}

func scheduleFromCluster(cmd *cobra.Command, kube *kubeFlags, ns, name string, res *ScheduleNext, seed, uid *string) error {
	c, err := kube.client()
	if err != nil {
		return err
	}
	if ns, err = kube.namespace(ns); err != nil {
		return err
	}
	ctx := cmd.Context()
	var s snapv1.SnapshotSchedule
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &s); err != nil {
		return fmt.Errorf("read SnapshotSchedule %s/%s: %w", ns, name, err)
	}
	var policies []snapv1.SnapshotPolicy
	if s.Spec.PolicyRef != nil {
		var p snapv1.SnapshotPolicy
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: s.Spec.PolicyRef.Name}, &p); err == nil {
			policies = append(policies, p)
		}
	} else if s.Spec.PolicySelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(s.Spec.PolicySelector)
		if err != nil {
			return fmt.Errorf("spec.policySelector: %w", err)
		}
		var list snapv1.SnapshotPolicyList
		if err := c.List(ctx, &list, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: sel}); err != nil {
			return err
		}
		policies = list.Items
	}
	var defaults []schedule.Defaults
	for _, p := range policies {
		for _, ref := range validate.PolicyRefs(&p) {
			var sd *snapv1.ScheduleDefaults
			if ref.Kind == snapv1.KindClusterRepository {
				var cr snapv1.ClusterRepository
				if c.Get(ctx, client.ObjectKey{Name: ref.Name}, &cr) == nil {
					sd = cr.Spec.ScheduleDefaults
				}
			} else {
				rns := ref.Namespace
				if rns == "" {
					rns = ns
				}
				var r snapv1.Repository
				if c.Get(ctx, client.ObjectKey{Namespace: rns, Name: ref.Name}, &r) == nil {
					sd = r.Spec.ScheduleDefaults
				}
			}
			d := schedule.Defaults{}
			if sd != nil {
				d = schedule.Defaults{Timezone: sd.Timezone, Jitter: sd.Jitter}
			}
			defaults = append(defaults, d)
		}
	}
	res.Cron = s.Spec.Schedule.Cron
	var notes schedule.Notes
	res.Timezone, res.Jitter, notes = schedule.Inherit(s.Spec.Schedule.Timezone, s.Spec.Schedule.Jitter, defaults)
	res.Notes = notes.All()
	*seed, *uid = ns+"/"+name, string(s.UID)
	return nil
}
