package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/validate"
	"github.com/snapflow/snapflow/internal/volumepolicy"
)

// SnapshotDescription is what `snapflow describe snapshot -o json` prints.
type SnapshotDescription struct {
	Snapshot       *snapv1.Snapshot    `json:"snapshot"`
	VolumePolicies *volumepolicy.Stamp `json:"volumePolicies,omitempty"`
}

func newDescribeCmd(kube *kubeFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "describe", Short: "Show snapflow objects with what snapflow decided about them"}
	var namespace, output string
	snap := &cobra.Command{
		Use:   "snapshot NAME",
		Short: "Show a Snapshot, including its effective volume policies and the ConfigMaps they came from",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := kube.client()
			if err != nil {
				return err
			}
			namespace, err := kube.namespace(namespace)
			if err != nil {
				return err
			}
			var s snapv1.Snapshot
			if err := c.Get(cmd.Context(), client.ObjectKey{Namespace: namespace, Name: args[0]}, &s); err != nil {
				return fmt.Errorf("read Snapshot %s/%s: %w", namespace, args[0], err)
			}
			d := SnapshotDescription{Snapshot: &s}
			if raw := s.Annotations[wellknown.AnnotationVolumePolicies]; raw != "" {
				var stamp volumepolicy.Stamp
				if err := json.Unmarshal([]byte(raw), &stamp); err != nil {
					return fmt.Errorf("annotation %s is not readable: %w", wellknown.AnnotationVolumePolicies, err)
				}
				d.VolumePolicies = &stamp
			}
			if output != OutputTable {
				return printStructured(cmd.OutOrStdout(), output, d)
			}
			describeSnapshot(cmd.OutOrStdout(), d)
			return nil
		},
	}
	snap.Flags().StringVarP(&namespace, "namespace", "n", "", "namespace of the Snapshot (default: the kubeconfig's)")
	snap.Flags().StringVarP(&output, "output", "o", OutputTable, "output format: table (text), json or yaml")
	cmd.AddCommand(snap)
	return cmd
}

func describeSnapshot(w io.Writer, d SnapshotDescription) {
	s := d.Snapshot
	field := func(k, v string) {
		if v == "" {
			v = "<none>"
		}
		fmt.Fprintf(w, "%-18s %s\n", k+":", v)
	}
	field("Name", s.Name)
	field("Namespace", s.Namespace)
	field("Phase", string(s.Status.Phase))
	origin, _ := validate.Origin(s)
	field("Origin", string(origin))
	if s.Spec.PolicyRef != nil {
		field("Policy", s.Spec.PolicyRef.Name)
	}
	field("Deletion policy", string(s.Spec.DeletionPolicy))
	if s.Status.Snapshot != nil {
		field("Kopia snapshot", s.Status.Snapshot.KopiaSnapshotID)
	} else if why := skipped(s); why != "" {
		field("Kopia snapshot", "<none>: "+why)
	}
	if st := s.Status.Stats; st != nil {
		b, _ := json.Marshal(st)
		field("Stats", string(b))
	}
	if p := s.Status.Progress; p != nil && p.Summary != "" {
		at := ""
		if p.ObservedAt != nil {
			at = " (at " + p.ObservedAt.UTC().Format(time.RFC3339) + ")"
		}
		field("Progress", p.Summary+at)
	}
	for _, c := range s.Status.Conditions {
		fmt.Fprintf(w, "Condition:         %s=%s %s: %s\n", c.Type, c.Status, c.Reason, c.Message)
	}

	fmt.Fprintln(w, "\nVolume policies:")
	vp := d.VolumePolicies
	if vp == nil {
		fmt.Fprintln(w, "  <none>: no recipe or global volume policies applied when this Snapshot was admitted")
		return
	}
	if vp.Recipe != nil {
		fmt.Fprintf(w, "  Recipe:\n    Type:\tconfigmap\n    Name:\t%s (resourceVersion %s)\n", vp.Recipe.ConfigMap, vp.Recipe.ResourceVersion)
	}
	if vp.Global != nil {
		fmt.Fprintf(w, "  Global volume policies:\n    Type:\tconfigmap\n    Name:\t%s (resourceVersion %s)\n", vp.Global.ConfigMap, vp.Global.ResourceVersion)
	}
	fmt.Fprintln(w, "  Effective rules (first match wins):")
	for i, r := range vp.Rules {
		cond, _ := json.Marshal(r.Conditions)
		fmt.Fprintf(w, "    %2d  %-6s #%d  %-10s %s%s\n", i, r.Source, r.Index, r.Action.Type, strings.ReplaceAll(string(cond), "{}", "every volume"), params(r.Action))
	}
}
