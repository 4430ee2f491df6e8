package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/internal/repousage"
)

func newRepositoryCmd(kube *kubeFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "repository", Aliases: []string{"repo"}, Short: "Inspect repositories"}
	var namespace, output string
	u := &cobra.Command{
		Use:   "usage (NAME | ClusterRepository/NAME)",
		Short: "Explain what a repository's storage holds and what would free it",
		Long: `Explain what a repository's storage holds and what would free it: what its
last full maintenance run counted (stored bytes, and the part of them no
snapshot references, which later full runs free), and per kopia identity
the Snapshots that hold data there, the bytes they added by age, what
retention would prune now (and whether their deletion policy keeps the
data), what is pinned or retained, and what is being deleted.

Added bytes are what a Snapshot uploaded when it was taken. Deleting it
frees at most the part no other snapshot shares; the next full maintenance
run reports what is reclaimable. Reads Snapshots and SnapshotPolicies of
every namespace it may list, else of the repository's namespace (and says
so). Changes nothing.`,
		Example: `  snapflow repository usage primary -n apps
  snapflow repository usage ClusterRepository/offsite -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return usage(err)
			}
			ref, err := repositoryArg(args[0])
			if err != nil {
				return usage(err)
			}
			c, err := kube.client()
			if err != nil {
				return usage(err)
			}
			in := repousage.Input{Repository: ref, Now: time.Now()}
			ctx := cmd.Context()
			if ref.Kind == snapv1.KindClusterRepository {
				var r snapv1.ClusterRepository
				if err := c.Get(ctx, client.ObjectKey{Name: ref.Name}, &r); err != nil {
					return fmt.Errorf("read ClusterRepository %s: %w", ref.Name, err)
				}
				in.Stats, in.RepositorySuspended = r.Status.StorageStats, r.Spec.Suspend
			} else {
				if in.Repository.Namespace, err = kube.namespace(namespace); err != nil {
					return usage(err)
				}
				var r snapv1.Repository
				if err := c.Get(ctx, client.ObjectKey{Namespace: in.Repository.Namespace, Name: ref.Name}, &r); err != nil {
					return fmt.Errorf("read Repository %s/%s: %w", in.Repository.Namespace, ref.Name, err)
				}
				in.Stats, in.RepositorySuspended = r.Status.StorageStats, r.Spec.Suspend
			}
			narrowed, err := readUsage(cmd, c, &in)
			if err != nil {
				return err
			}
			rep := repousage.Explain(in)
			if narrowed != "" {
				rep.Notes = append(rep.Notes, narrowed)
			}
			if output != OutputTable {
				return printStructured(cmd.OutOrStdout(), output, rep)
			}
			printUsage(cmd.OutOrStdout(), rep)
			return nil
		},
	}
	u.SetFlagErrorFunc(flagUsage)
	u.Flags().StringVarP(&namespace, "namespace", "n", "", "namespace of the Repository (default: the kubeconfig's)")
	u.Flags().StringVarP(&output, "output", "o", OutputTable, "output format: table, json or yaml")
	cmd.AddCommand(u)
	return cmd
}

// repositoryArg reads NAME (a Repository) or Kind/NAME.
func repositoryArg(arg string) (snapv1.RepositoryRef, error) {
	kind, name, ok := strings.Cut(arg, "/")
	if !ok {
		return snapv1.RepositoryRef{Kind: snapv1.KindRepository, Name: arg}, nil
	}
	if (kind != string(snapv1.KindClusterRepository) && kind != string(snapv1.KindRepository)) || name == "" {
		return snapv1.RepositoryRef{}, fmt.Errorf("repository %q: use NAME (a Repository in the namespace) or ClusterRepository/NAME", arg)
	}
	return snapv1.RepositoryRef{Kind: snapv1.RepositoryKind(kind), Name: name}, nil
}

// readUsage lists the Snapshots and SnapshotPolicies that may write to the
// repository: of every namespace, or, when the caller may not list them
// cluster-wide, of the Repository's own namespace, saying so.
func readUsage(cmd *cobra.Command, c client.Client, in *repousage.Input) (narrowed string, err error) {
	ctx := cmd.Context()
	var snaps snapv1.SnapshotList
	var pols snapv1.SnapshotPolicyList
	err = c.List(ctx, &snaps)
	if err == nil {
		err = c.List(ctx, &pols)
	}
	if apierrors.IsForbidden(err) && in.Repository.Kind == snapv1.KindRepository {
		ns := client.InNamespace(in.Repository.Namespace)
		if err = c.List(ctx, &snaps, ns); err == nil {
			err = c.List(ctx, &pols, ns)
		}
		narrowed = fmt.Sprintf("you may not list Snapshots in every namespace: only those of namespace %s are counted", in.Repository.Namespace)
	}
	if err != nil {
		return "", fmt.Errorf("list Snapshots and SnapshotPolicies: %w", err)
	}
	in.Snapshots, in.Policies = snaps.Items, pols.Items
	return narrowed, nil
}

func printUsage(w io.Writer, rep repousage.Report) {
	opt := func(p *int64) string {
		if p == nil {
			return "unknown"
		}
		return humanBytes(*p)
	}
	fmt.Fprintf(w, "%s\n", rep.Repository)
	if rep.StoredBytes != nil {
		at := ""
		if rep.StoredObservedAt != nil {
			at = " at " + rep.StoredObservedAt.UTC().Format(time.RFC3339)
		}
		blobs := ""
		if rep.BlobCount != nil {
			blobs = fmt.Sprintf(" in %d blobs", *rep.BlobCount)
		}
		fmt.Fprintf(w, "  stored:      %s%s (counted by the last full maintenance run%s)\n", opt(rep.StoredBytes), blobs, at)
		fmt.Fprintf(w, "  reclaimable: %s (referenced by no snapshot; later full maintenance runs free it)\n", opt(rep.ReclaimableBytes))
	}
	if rep.LogicalBytes != nil {
		fmt.Fprintf(w, "  snapshots:   %s of source data\n", opt(rep.LogicalBytes))
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "IDENTITY\tPOLICY\tSNAPSHOTS\tLATEST\tADDED-24H\tADDED-7D\tADDED-30D\tADDED-OLDER\tRETENTION-PRUNES\tPRUNED-ADDED\tPINNED\tDELETING")
	row := func(g repousage.Group) {
		prunes := fmt.Sprint(g.Prunes)
		if g.PrunesKeepData > 0 {
			prunes += fmt.Sprintf(" (%d keep data)", g.PrunesKeepData)
		}
		pol := g.Policy
		if pol == "" {
			pol = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\n", g.Identity, pol, g.Snapshots, humanBytes(g.LatestSize),
			humanBytes(g.Added.Day), humanBytes(g.Added.Week), humanBytes(g.Added.Month), humanBytes(g.Added.Older),
			prunes, humanBytes(g.PrunedAdded), g.Pinned, g.Deleting)
	}
	for _, g := range rep.Groups {
		row(g)
	}
	if len(rep.Groups) > 1 {
		row(rep.Total)
	}
	_ = tw.Flush()
	if len(rep.Groups) == 0 {
		fmt.Fprintln(w, "no Snapshot holds data in this repository")
	}
	for _, n := range rep.Notes {
		fmt.Fprintln(w, "note:", n)
	}
}
