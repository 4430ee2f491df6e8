package cli

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/internal/validate"
)

// restoreFlags are the command line form of a Restore.
type restoreFlags struct {
	snapshot, policy, identity, snapshotID, asOf string
	offset                                       int32
	repository                                   string
	toPVC, intoPVC, capacity, storageClass       string
	accessModes                                  []string
	onMissing, waitTimeout                       string
	parallel                                     int32
	options                                      map[string]*bool
}

// restoreOptionFlags map flag names onto the Restore's tri-state options.
var restoreOptionFlags = []struct {
	flag, help string
	field      func(*snapv1.RestoreOptions) **bool
}{
	{"delete-extra", "delete files in the target that the snapshot does not have (options.enableFileDeletion)", func(o *snapv1.RestoreOptions) **bool { return &o.EnableFileDeletion }},
	{"overwrite-files", "overwrite files that exist in the target (kopia's default: true)", func(o *snapv1.RestoreOptions) **bool { return &o.OverwriteFiles }},
	{"overwrite-directories", "overwrite directories that exist (kopia's default: true)", func(o *snapv1.RestoreOptions) **bool { return &o.OverwriteDirectories }},
	{"overwrite-symlinks", "overwrite symlinks that exist (kopia's default: true)", func(o *snapv1.RestoreOptions) **bool { return &o.OverwriteSymlinks }},
	{"skip-existing", "leave files that already exist untouched", func(o *snapv1.RestoreOptions) **bool { return &o.SkipExisting }},
	{"skip-owners", "do not restore owners", func(o *snapv1.RestoreOptions) **bool { return &o.SkipOwners }},
	{"skip-permissions", "do not restore permissions", func(o *snapv1.RestoreOptions) **bool { return &o.SkipPermissions }},
	{"skip-times", "do not restore modification times", func(o *snapv1.RestoreOptions) **bool { return &o.SkipTimes }},
	{"ignore-errors", "carry on past files that cannot be restored", func(o *snapv1.RestoreOptions) **bool { return &o.IgnoreErrors }},
	{"ignore-permission-errors", "carry on past permission errors (kopia's default: true)", func(o *snapv1.RestoreOptions) **bool { return &o.IgnorePermissionErrors }},
	{"write-files-atomically", "write each file to a temporary name and rename it", func(o *snapv1.RestoreOptions) **bool { return &o.WriteFilesAtomically }},
	{"write-sparse-files", "write files sparsely", func(o *snapv1.RestoreOptions) **bool { return &o.WriteSparseFiles }},
}

// build turns the flags into a Restore; only flags the user set become
// options, so unset ones keep kopia's defaults.
func (o *restoreFlags) build(ns, name string, changed func(string) bool) (*snapv1.Restore, error) {
	rs := &snapv1.Restore{TypeMeta: metav1.TypeMeta{APIVersion: snapv1.GroupVersion.String(), Kind: "Restore"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	sp := &rs.Spec
	var offset *int32
	if changed("offset") {
		offset = &o.offset
	}
	sources := 0
	if o.snapshot != "" {
		sources++
		sp.Source.SnapshotRef = &snapv1.NamespacedObjectRef{Name: o.snapshot}
	}
	if o.policy != "" {
		sources++
		sp.Source.FromPolicy = &snapv1.FromPolicy{Name: o.policy, AsOf: o.asOf, Offset: offset}
	}
	if o.identity != "" {
		sources++
		who, path, _ := strings.Cut(o.identity, ":")
		user, host, ok := strings.Cut(who, "@")
		if !ok || user == "" || host == "" {
			return nil, fmt.Errorf("--identity %q: use USER@HOST or USER@HOST:/source/path (kopia's identity of the backup)", o.identity)
		}
		sp.Source.Identity = &snapv1.IdentitySource{Username: user, Hostname: host, SourcePath: path, SnapshotID: o.snapshotID, AsOf: o.asOf, Offset: offset}
	}
	if sources != 1 {
		return nil, fmt.Errorf("name exactly one source: --snapshot NAME, --policy NAME (with --as-of/--offset) or --identity USER@HOST[:PATH]")
	}
	if (o.asOf != "" || offset != nil) && sp.Source.SnapshotRef != nil {
		return nil, fmt.Errorf("--as-of and --offset choose among a policy's or an identity's snapshots; --snapshot names one exactly")
	}
	if o.snapshotID != "" && sp.Source.Identity == nil {
		return nil, fmt.Errorf("--snapshot-id goes with --identity")
	}
	if o.repository != "" {
		kind, repoName, ok := strings.Cut(o.repository, "/")
		ref := snapv1.RepositoryRef{Kind: snapv1.KindRepository, Name: o.repository}
		if ok {
			if kind != string(snapv1.KindClusterRepository) && kind != string(snapv1.KindRepository) {
				return nil, fmt.Errorf("--repository %q: use NAME (a Repository in the namespace) or ClusterRepository/NAME", o.repository)
			}
			ref = snapv1.RepositoryRef{Kind: snapv1.RepositoryKind(kind), Name: repoName}
		}
		sp.Repository = &ref
	}
	switch {
	case o.toPVC != "" && o.intoPVC != "":
		return nil, fmt.Errorf("--to-pvc creates a new PVC and --into-pvc writes into an existing one; choose one")
	case o.toPVC != "":
		if o.capacity == "" {
			return nil, fmt.Errorf("--to-pvc needs --capacity (the size of the PVC to create, e.g. 10Gi)")
		}
		q, err := resource.ParseQuantity(o.capacity)
		if err != nil {
			return nil, fmt.Errorf("--capacity %q: %w", o.capacity, err)
		}
		t := &snapv1.NewPVCTarget{Name: o.toPVC, Capacity: &q, AccessModes: o.accessModes}
		if o.storageClass != "" {
			t.StorageClassName = &o.storageClass
		}
		sp.Target.PVC = t
	case o.intoPVC != "":
		sp.Target.PVCRef = &snapv1.LocalObjectRef{Name: o.intoPVC}
	default:
		return nil, fmt.Errorf("name the target: --to-pvc NAME --capacity SIZE (a new PVC) or --into-pvc NAME (an existing PVC, whose files may be overwritten)")
	}
	opts := &snapv1.RestoreOptions{}
	set := false
	for _, of := range restoreOptionFlags {
		if changed(of.flag) {
			v := *o.options[of.flag]
			*of.field(opts) = &v
			set = true
		}
	}
	if changed("parallel") {
		opts.Parallel, set = &o.parallel, true
	}
	if set {
		sp.Options = opts
	}
	if o.onMissing != "" || o.waitTimeout != "" {
		sp.Policy = &snapv1.RestorePolicy{OnMissingSnapshot: snapv1.OnMissingSnapshot(o.onMissing), WaitTimeout: o.waitTimeout}
	}
	if res := validate.Restore(rs, validate.Options{}); !res.OK() {
		return nil, fmt.Errorf("the restore is invalid: %v", res.Errs)
	}
	return rs, nil
}

func newRestoreCmd(kube *kubeFlags) *cobra.Command {
	o := restoreFlags{options: map[string]*bool{}}
	var ns, name, output string
	var wait bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "restore [NAME]",
		Short: "Restore a snapshot into a new or existing PVC, and follow it",
		Long: `restore creates a Restore (the same object kubectl apply would) and follows
it until it completes, printing progress on stderr. The source is a Snapshot
(--snapshot), the newest snapshot of a policy (--policy, optionally --as-of a
time or --offset back from the newest), or a kopia identity (--identity
USER@HOST[:PATH], which needs --repository). The target is a new PVC
(--to-pvc with --capacity) or an existing one (--into-pvc). Restore options
you do not set keep kopia restore's defaults. It exits 1 when the restore fails.`,
		Example: `  snapflow restore --snapshot app-manual-20260501 --to-pvc app-data-restored --capacity 10Gi
  snapflow restore --policy app --as-of 2026-05-01T00:00:00Z --into-pvc app-data --delete-extra
  snapflow restore --identity app@prod:/pvc/app-data --repository ClusterRepository/offsite --to-pvc copy --capacity 5Gi`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != OutputTable && output != OutputJSON && output != OutputYAML {
				return fmt.Errorf("unknown output format %q: use one of table, json, yaml", output)
			}
			namespace, err := kube.namespace(ns)
			if err != nil {
				return err
			}
			if len(args) == 1 {
				name = args[0]
			} else {
				name = "restore-" + time.Now().UTC().Format("20060102-150405")
			}
			rs, err := o.build(namespace, name, cmd.Flags().Changed)
			if err != nil {
				return err
			}
			c, err := kube.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if err := c.Create(ctx, rs); err != nil {
				return fmt.Errorf("create Restore %s/%s: %w", namespace, name, err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "created Restore %s/%s\n", namespace, name)
			if wait {
				wctx, cancel := context.WithTimeout(ctx, timeout)
				defer cancel()
				if err := followRestore(wctx, cmd, c, rs); err != nil {
					return err
				}
			}
			if err := c.Get(ctx, client.ObjectKeyFromObject(rs), rs); err != nil {
				return err
			}
			if err := printRestore(cmd, rs, output); err != nil {
				return err
			}
			if rs.Status.Phase == snapv1.RestoreFailed {
				msg := "the restore failed"
				if fl := rs.Status.Failure; fl != nil {
					msg = fmt.Sprintf("the restore failed (%s): %s", fl.Class, fl.Message)
				}
				return fmt.Errorf("%s (see kubectl describe restore %s -n %s)", msg, name, namespace)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.snapshot, "snapshot", "", "restore this Snapshot")
	f.StringVar(&o.policy, "policy", "", "restore the newest snapshot of this SnapshotPolicy")
	f.StringVar(&o.identity, "identity", "", "restore a kopia identity USER@HOST[:PATH] (needs --repository)")
	f.StringVar(&o.snapshotID, "snapshot-id", "", "with --identity: this kopia snapshot id exactly")
	f.StringVar(&o.asOf, "as-of", "", "the newest snapshot at or before this RFC3339 time")
	f.Int32Var(&o.offset, "offset", 0, "skip this many newer snapshots (0 is the newest)")
	f.StringVar(&o.repository, "repository", "", "NAME of a Repository, or ClusterRepository/NAME, to read from")
	f.StringVar(&o.toPVC, "to-pvc", "", "create this PVC and restore into it")
	f.StringVar(&o.capacity, "capacity", "", "size of the PVC --to-pvc creates (e.g. 10Gi)")
	f.StringVar(&o.storageClass, "storage-class", "", "StorageClass of the PVC --to-pvc creates")
	f.StringSliceVar(&o.accessModes, "access-mode", nil, "access modes of the PVC --to-pvc creates (default ReadWriteOnce)")
	f.StringVar(&o.intoPVC, "into-pvc", "", "restore into this existing PVC (its files may be overwritten)")
	f.StringVar(&o.onMissing, "on-missing", "", "Fail or Continue when there is no snapshot to restore")
	f.StringVar(&o.waitTimeout, "wait-timeout", "", "how long to wait for the source snapshot to exist (e.g. 10m)")
	f.Int32Var(&o.parallel, "parallel", 8, "files restored in parallel")
	for _, of := range restoreOptionFlags {
		o.options[of.flag] = new(bool)
		f.BoolVar(o.options[of.flag], of.flag, false, of.help)
	}
	f.StringVarP(&ns, "namespace", "n", "", "namespace of the Restore (default: the kubeconfig's)")
	f.StringVarP(&output, "output", "o", OutputTable, "table, json or yaml")
	f.BoolVar(&wait, "wait", true, "follow the Restore until it finishes")
	f.DurationVar(&timeout, "timeout", 6*time.Hour, "how long to follow it")
	f.SortFlags = false
	return cmd
}

// followRestore polls the Restore and prints its phase and progress as they change.
func followRestore(ctx context.Context, cmd *cobra.Command, c client.Client, rs *snapv1.Restore) error {
	last := ""
	out := newStatusLine(cmd.ErrOrStderr())
	defer out.done()
	for {
		var live snapv1.Restore
		if err := c.Get(ctx, client.ObjectKeyFromObject(rs), &live); err != nil {
			return fmt.Errorf("read Restore %s: %w", rs.Name, err)
		}
		ph := live.Status.Phase
		if ph == "" {
			ph = snapv1.RestorePending
		}
		line, percent := string(ph), int32(-1)
		if p := live.Status.Progress; p != nil && p.Summary != "" {
			line += ": " + p.Summary
			if p.Percent != nil && !ph.IsTerminal() {
				percent = *p.Percent
			}
		} else if p != nil && p.FilesRestored != nil && p.BytesRestored != nil {
			line += fmt.Sprintf(": %d files, %s restored", *p.FilesRestored, humanBytes(*p.BytesRestored))
		}
		if r := live.Status.Resolved; r != nil && r.KopiaSnapshotID != "" {
			line += " (kopia snapshot " + r.KopiaSnapshotID + ")"
		}
		for _, cond := range live.Status.Conditions {
			if cond.Type == "Ready" && cond.Status == metav1.ConditionFalse && !ph.IsTerminal() && cond.Message != "" {
				line += " - " + cond.Message
			}
		}
		if line != last {
			out.print(line, percent)
			last = line
		}
		if ph.IsTerminal() {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("gave up following after the timeout: %s (the Restore keeps running)", line)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// restoreRow is what `snapflow restore` reports.
type restoreRow struct {
	Name          string `json:"name"`
	Phase         string `json:"phase"`
	Source        string `json:"source,omitempty"`
	Repository    string `json:"repository,omitempty"`
	KopiaSnapshot string `json:"kopiaSnapshotID,omitempty"`
	TargetPVC     string `json:"targetPVC,omitempty"`
	Files         int64  `json:"filesRestored"`
	Bytes         int64  `json:"bytesRestored"`
	Failure       string `json:"failure,omitempty"`
}

func printRestore(cmd *cobra.Command, rs *snapv1.Restore, output string) error {
	r := restoreRow{Name: rs.Name, Phase: string(rs.Status.Phase), Source: rs.Status.SourceKind}
	if res := rs.Status.Resolved; res != nil {
		r.KopiaSnapshot = res.KopiaSnapshotID
		if res.Repository != nil {
			r.Repository = validate.RepoKey(*res.Repository, rs.Namespace)
		}
	}
	if t := rs.Status.Target; t != nil {
		r.TargetPVC = t.PVCRef
	}
	if p := rs.Status.Progress; p != nil && p.FilesRestored != nil && p.BytesRestored != nil {
		r.Files, r.Bytes = *p.FilesRestored, *p.BytesRestored
	}
	if fl := rs.Status.Failure; fl != nil {
		r.Failure = fl.Class + ": " + fl.Message
	}
	if output != OutputTable {
		return printStructured(cmd.OutOrStdout(), output, r)
	}
	tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tPHASE\tSOURCE\tREPOSITORY\tKOPIA-SNAPSHOT\tTARGET-PVC\tFILES\tBYTES\tFAILURE")
	fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\n", r.Name, r.Phase, r.Source, r.Repository, r.KopiaSnapshot, r.TargetPVC, r.Files, r.Bytes, r.Failure)
	return tw.Flush()
}

func humanBytes(n int64) string { return humanize.IBytes(uint64(max(n, 0))) }
