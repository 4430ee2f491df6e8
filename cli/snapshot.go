package cli

import (
	"cmp"
	"context"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/functions/snapshot"
	"github.com/snapflow/snapflow/internal/fanout"
	"github.com/snapflow/snapflow/internal/volumepolicy"
)

func newSnapshotCmd(kube *kubeFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "snapshot", Short: "Take and inspect Snapshots"}
	var o struct {
		policy, namespace, output string
		wait                      bool
		timeout                   time.Duration
	}
	now := &cobra.Command{
		Use:   "now --policy NAME",
		Short: "Back up a policy now: one Snapshot per selected PVC and repository, then follow them",
		Long: `now mints the Snapshots of one firing of a SnapshotPolicy, exactly as a
schedule would (pvcSelector sources expand to one Snapshot per matching PVC,
multi-repository policies to one per repository), and follows them until they
finish, printing progress on stderr. It exits 1 when any of them failed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.policy == "" {
				return fmt.Errorf("--policy is required: the SnapshotPolicy to back up")
			}
			if o.output != OutputTable && o.output != OutputJSON && o.output != OutputYAML {
				return fmt.Errorf("unknown output format %q: use one of table, json, yaml", o.output)
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
			var p snapv1.SnapshotPolicy
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: o.policy}, &p); err != nil {
				return fmt.Errorf("read SnapshotPolicy %s/%s: %w", ns, o.policy, err)
			}
			names, err := snapshot.Mint(ctx, c, &p, fanout.Base(o.policy+"-manual", time.Now()), snapshot.Minted{Origin: snapv1.OriginManual})
			if len(names) > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "created %d Snapshot(s) in %s: %s\n", len(names), ns, strings.Join(names, ", "))
			}
			if err != nil {
				// Some PVCs may have been left out (two sources cover them).
				return err
			}
			if !o.wait {
				return report(cmd, c, ns, names, o.output)
			}
			wctx, cancel := context.WithTimeout(ctx, o.timeout)
			defer cancel()
			if err := follow(wctx, cmd, c, ns, names); err != nil {
				return err
			}
			if err := report(cmd, c, ns, names, o.output); err != nil {
				return err
			}
			return failedAny(ctx, c, ns, names)
		},
	}
	f := now.Flags()
	f.StringVar(&o.policy, "policy", "", "the SnapshotPolicy to back up")
	f.StringVarP(&o.namespace, "namespace", "n", "", "namespace of the policy (default: the kubeconfig's)")
	f.StringVarP(&o.output, "output", "o", OutputTable, "table, json or yaml")
	f.BoolVar(&o.wait, "wait", true, "follow the Snapshots until they finish")
	f.DurationVar(&o.timeout, "timeout", time.Hour, "how long to follow them")
	cmd.AddCommand(now)
	return cmd
}

// follow polls the Snapshots and prints a line whenever their phases change.
func follow(ctx context.Context, cmd *cobra.Command, c client.Client, ns string, names []string) error {
	last := ""
	out := newStatusLine(cmd.ErrOrStderr())
	defer out.done()
	for {
		counts := map[snapv1.SnapshotPhase]int{}
		done := 0
		var running []string
		percent := int32(-1)
		for _, n := range names {
			var s snapv1.Snapshot
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: n}, &s); err != nil {
				return fmt.Errorf("read Snapshot %s: %w", n, err)
			}
			ph := s.Status.Phase
			if ph == "" {
				ph = snapv1.SnapshotPending
			}
			counts[ph]++
			if ph.IsTerminal() {
				done++
			}
			if p := s.Status.Progress; ph == snapv1.SnapshotRunning && p != nil && p.Summary != "" {
				running = append(running, n+": "+p.Summary)
				if p.Percent != nil && len(names) == 1 {
					percent = *p.Percent
				}
			}
		}
		var parts []string
		for _, ph := range []snapv1.SnapshotPhase{snapv1.SnapshotPending, snapv1.SnapshotRunning, snapv1.SnapshotSucceeded, snapv1.SnapshotUnchanged, snapv1.SnapshotFailed} {
			if counts[ph] > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", counts[ph], strings.ToLower(string(ph))))
			}
		}
		line := strings.Join(parts, ", ")
		if len(running) > 0 {
			line += " | " + strings.Join(running, " | ")
		}
		if line != last {
			out.print(fmt.Sprintf("%d/%d finished: %s", done, len(names), line), percent)
			last = line
		}
		if done == len(names) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("gave up following after the timeout: %s (the Snapshots keep running)", line)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// snapshotRow is what `snapshot now` reports per Snapshot.
type snapshotRow struct {
	Name          string `json:"name"`
	Phase         string `json:"phase"`
	Repository    string `json:"repository,omitempty"`
	Source        string `json:"source,omitempty"`
	KopiaSnapshot string `json:"kopiaSnapshotID,omitempty"`
	FilesNew      int64  `json:"filesNew"`
	BytesNew      int64  `json:"bytesNew"`
	Failure       string `json:"failure,omitempty"`
	// Skipped says why a volume policy left nothing to back up.
	Skipped string `json:"skipped,omitempty"`
}

func report(cmd *cobra.Command, c client.Client, ns string, names []string, output string) error {
	var rows []snapshotRow
	for _, n := range names {
		var s snapv1.Snapshot
		if err := c.Get(cmd.Context(), client.ObjectKey{Namespace: ns, Name: n}, &s); err != nil {
			return err
		}
		r := snapshotRow{Name: n, Phase: string(s.Status.Phase)}
		if res := s.Status.Resolved; res != nil {
			if res.Repository != nil {
				r.Repository = res.Repository.Name
			}
			if len(res.Sources) > 0 {
				// An nfs source has no PVC: its export path names it.
				r.Source = cmp.Or(res.Sources[0].PVC, res.Sources[0].SourcePath)
			}
		}
		if s.Status.Snapshot != nil {
			r.KopiaSnapshot = s.Status.Snapshot.KopiaSnapshotID
		}
		r.Skipped = skipped(&s)
		if st := s.Status.Stats; st != nil && st.FilesNew != nil && st.BytesNew != nil {
			r.FilesNew, r.BytesNew = *st.FilesNew, *st.BytesNew
		}
		if f := s.Status.Failure; f != nil {
			r.Failure = f.Class + ": " + f.Message
		}
		rows = append(rows, r)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Name < rows[j].Name })
	if output != OutputTable {
		return printStructured(cmd.OutOrStdout(), output, rows)
	}
	tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tPHASE\tREPOSITORY\tSOURCE\tKOPIA-SNAPSHOT\tFILES-NEW\tBYTES-NEW\tFAILURE")
	for _, r := range rows {
		kopiaSnapshot := r.KopiaSnapshot
		if kopiaSnapshot == "" && r.Skipped != "" {
			kopiaSnapshot = "none: " + r.Skipped
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\n", r.Name, r.Phase, r.Repository, r.Source, kopiaSnapshot, r.FilesNew, r.BytesNew, r.Failure)
	}
	return tw.Flush()
}

func failedAny(ctx context.Context, c client.Client, ns string, names []string) error {
	var failed []string
	for _, n := range names {
		var s snapv1.Snapshot
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: n}, &s); err == nil && s.Status.Phase == snapv1.SnapshotFailed {
			failed = append(failed, n)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d of %d Snapshots failed: %s (see kubectl describe snapshot)", len(failed), len(names), strings.Join(failed, ", "))
	}
	return nil
}

// skipped is why a volume policy rule left s with nothing to back up, or "".
func skipped(s *snapv1.Snapshot) string {
	for _, d := range s.Status.VolumePolicies {
		if d.Action == volumepolicy.Skip {
			return d.Message
		}
	}
	return ""
}
