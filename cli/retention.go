package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/retention"
)

// RetentionPreview is what `snapflow retention preview -o json` prints.
type RetentionPreview struct {
	Retention snapv1.Retention    `json:"retention"`
	Verdicts  []retention.Verdict `json:"verdicts"`
	// Keep counts what retention keeps; Ignored what it does not decide
	// on (not Succeeded, no kopia snapshot, being deleted).
	Keep    int      `json:"keep"`
	Ignored int      `json:"ignored"`
	Prune   []string `json:"prune"`
}

func newRetentionCmd(kube *kubeFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "retention", Short: "Inspect GFS retention"}
	var policy, namespace, retFile, snapFile, output string
	preview := &cobra.Command{
		Use:   "preview (--policy NAME [-n NAMESPACE] | --retention FILE --snapshots FILE)",
		Short: "List which Snapshots GFS retention keeps, by which bucket, and which it would prune; deletes nothing",
		Long: `Lists which Snapshots GFS retention keeps, by which bucket, and which it
would prune; deletes nothing. Exits 1 when an input is invalid, 2 when it
cannot be read or the flags do not fit together.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var r *snapv1.Retention
			var snaps []snapv1.Snapshot
			var multi bool
			var err error
			switch {
			case policy != "" && (retFile != "" || snapFile != ""):
				return usage(errors.New("use --policy against the cluster, or --retention and --snapshots offline, not both"))
			case policy != "":
				r, snaps, multi, err = retentionFromCluster(cmd, kube, namespace, policy)
			case retFile != "" && snapFile != "":
				r, snaps, multi, err = retentionFromFiles(retFile, snapFile)
			default:
				return usage(errors.New("give --policy NAME, or both --retention FILE and --snapshots FILE"))
			}
			if err != nil {
				return err
			}
			if r == nil {
				return errors.New("the policy has no spec.retention, so nothing is ever pruned")
			}
			cands := make([]retention.Candidate, len(snaps))
			for i := range snaps {
				cands[i] = retention.FromSnapshot(&snaps[i], multi)
			}
			vs := retention.Select(*r, cands)
			sort.SliceStable(vs, func(i, j int) bool {
				if vs[i].Bucket != vs[j].Bucket {
					return vs[i].Bucket < vs[j].Bucket
				}
				return vs[i].Time.After(vs[j].Time)
			})
			res := RetentionPreview{Retention: *r, Verdicts: vs, Prune: retention.Prune(vs)}
			for _, v := range vs {
				switch {
				case v.Excluded != "":
					res.Ignored++
				case v.Keep:
					res.Keep++
				}
			}
			if res.Prune == nil {
				res.Prune = []string{}
			}
			if output != OutputTable {
				return printStructured(cmd.OutOrStdout(), output, res)
			}
			printRetention(cmd.OutOrStdout(), res)
			return nil
		},
	}
	f := preview.Flags()
	preview.SetFlagErrorFunc(flagUsage)
	f.StringVar(&policy, "policy", "", "SnapshotPolicy to preview, read with its Snapshots from the cluster")
	f.StringVarP(&namespace, "namespace", "n", "", "namespace of the policy (default: the kubeconfig's)")
	f.StringVar(&retFile, "retention", "", "`FILE` holding a SnapshotPolicy, or a bare retention block (offline)")
	f.StringVar(&snapFile, "snapshots", "", "`FILE` of Snapshots, a List or YAML documents as kubectl get snapshots -o yaml prints them (offline)")
	f.StringVarP(&output, "output", "o", OutputTable, "output format: table, json or yaml")
	cmd.AddCommand(preview)
	return cmd
}

// retentionFromCluster reads a policy's retention, the Snapshots it
// governs, and whether it writes to several repositories.
func retentionFromCluster(cmd *cobra.Command, kube *kubeFlags, ns, name string) (*snapv1.Retention, []snapv1.Snapshot, bool, error) {
	c, err := kube.client()
	if err != nil {
		return nil, nil, false, usage(err)
	}
	if ns, err = kube.namespace(ns); err != nil {
		return nil, nil, false, usage(err)
	}
	var p snapv1.SnapshotPolicy
	if err := c.Get(cmd.Context(), client.ObjectKey{Namespace: ns, Name: name}, &p); err != nil {
		return nil, nil, false, usage(fmt.Errorf("read SnapshotPolicy %s/%s: %w", ns, name, err))
	}
	// Retention governs exactly the Snapshots carrying the policy's config label.
	var list snapv1.SnapshotList
	if err := c.List(cmd.Context(), &list, client.InNamespace(ns), client.MatchingLabels{wellknown.LabelConfig: name}); err != nil {
		return nil, nil, false, usage(fmt.Errorf("list Snapshots of %s/%s: %w", ns, name, err))
	}
	return p.Spec.Retention, list.Items, retention.MultiRepo(&p), nil
}

// retentionFromFiles reads a retention offline. A SnapshotPolicy file says
// whether the policy writes to several repositories; with a bare
// retention block, Snapshots pinned to two or more repositories say so.
func retentionFromFiles(retFile, snapFile string) (*snapv1.Retention, []snapv1.Snapshot, bool, error) {
	raw, err := os.ReadFile(retFile)
	if err != nil {
		return nil, nil, false, usage(fmt.Errorf("--retention: %w", err))
	}
	var probe struct{ Kind string }
	_ = yaml.Unmarshal(raw, &probe)
	var r *snapv1.Retention
	multi := -1
	if probe.Kind == "SnapshotPolicy" {
		var p snapv1.SnapshotPolicy
		if err := yaml.UnmarshalStrict(raw, &p); err != nil {
			return nil, nil, false, fmt.Errorf("--retention %s: %w", retFile, err)
		}
		r = p.Spec.Retention
		if retention.MultiRepo(&p) {
			multi = 2
		} else {
			multi = 1
		}
	} else {
		var bare struct {
			Retention *snapv1.Retention `json:"retention"`
		}
		if err := yaml.UnmarshalStrict(raw, &bare); err != nil || bare.Retention == nil {
			r = &snapv1.Retention{}
			if err := yaml.UnmarshalStrict(raw, r); err != nil {
				return nil, nil, false, fmt.Errorf("--retention %s: want a SnapshotPolicy or a retention block: %w", retFile, err)
			}
		} else {
			r = bare.Retention
		}
	}
	snaps, err := readSnapshots(snapFile)
	if err != nil {
		return nil, nil, false, fmt.Errorf("--snapshots: %w", err)
	}
	if multi < 0 {
		multi = retention.PinnedRepositories(snaps)
	}
	return r, snaps, multi > 1, nil
}

// readSnapshots reads Snapshots strictly: a document of another kind, or a
// field the API does not have (a misspelt spec.pin), is an error naming
// the document, never silently left out of the preview.
func readSnapshots(path string) ([]snapv1.Snapshot, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, usage(err)
	}
	var out []snapv1.Snapshot
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for i := 0; ; i++ {
		var doc json.RawMessage
		if err := dec.Decode(&doc); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("%s: document %d: %w", path, i, err)
		}
		if len(doc) == 0 || string(doc) == "null" {
			continue
		}
		var head struct {
			Kind  string            `json:"kind"`
			Items []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(doc, &head); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", path, i, err)
		}
		items := []json.RawMessage{doc}
		switch head.Kind {
		case "List", "SnapshotList":
			items = head.Items
		case "Snapshot":
		default:
			return nil, fmt.Errorf("%s: document %d is a %q, not a Snapshot or a List of them", path, i, head.Kind)
		}
		for j, item := range items {
			var s snapv1.Snapshot
			strict, err := sigsjson.UnmarshalStrict(item, &s)
			if err == nil && len(strict) > 0 {
				err = errors.Join(strict...)
			}
			if err == nil && s.Kind != "Snapshot" {
				err = fmt.Errorf("a %q, not a Snapshot", s.Kind)
			}
			if err != nil {
				at := fmt.Sprintf("document %d", i)
				if len(items) > 1 || head.Kind != "Snapshot" {
					at += fmt.Sprintf(" item %d", j)
				}
				return nil, fmt.Errorf("%s: %s: %w", path, at, err)
			}
			out = append(out, s)
		}
	}
}

func printRetention(w io.Writer, res RetentionPreview) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tTIME\tBUCKET\tVERDICT\tWHY")
	for _, v := range res.Verdicts {
		verdict, why := "prune", ""
		switch {
		case v.Excluded != "":
			verdict, why = "ignore", v.Excluded
			if v.Pinned {
				why += ", pinned"
			}
		case v.Keep:
			verdict, why = "keep", strings.Join(v.Reasons, ",")
		}
		bucket := v.Bucket
		if bucket == "" {
			bucket = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", v.Name, v.Time.UTC().Format(time.RFC3339), bucket, verdict, why)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\n%d kept, %d would be pruned, %d not decided on (nothing was deleted)\n", res.Keep, len(res.Prune), res.Ignored)
}
