package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/snapflow/snapflow/internal/prune"
	"github.com/snapflow/snapflow/internal/prune/execute"
	"github.com/snapflow/snapflow/internal/prune/kubeinv"
	"github.com/snapflow/snapflow/internal/prune/s3store"
)

// Environment variables that supply flag defaults; an explicit
// flag wins and an empty variable counts as unset.
const (
	envPruneBackupRepo = "KBBACKUP_PRUNE_BACKUP_REPO"
	envPruneNamespace  = "KBBACKUP_PRUNE_NAMESPACE"
	envPrunePrefix     = "KBBACKUP_PRUNE_PREFIX"
	envPruneBucket     = "KBBACKUP_PRUNE_BUCKET"
	envPruneEndpoint   = "KBBACKUP_PRUNE_ENDPOINT"
	envPruneKubeMode   = "KBBACKUP_PRUNE_KUBE_MODE"
)

// pruneOptions are the flags of `snapflow prune`.
type pruneOptions struct {
	// run holds the flags the prune function takes as KBBACKUP_PRUNE_*
	// variables: one struct, checked by one Validate.
	run                                   execute.Settings
	useRepoCreds                          bool
	kubeMode                              string
	kube                                  *kubeFlags
	requestTimeout                        time.Duration
	output                                string
	showAll, debug, failOnOrphans, dryRun bool
	confirm                               string

	// command is "plan" or "prune"; versioningMode is the parsed
	// --bucket-versioning; progressEvery throttles the stderr progress line.
	command        string
	versioningMode prune.VersioningMode
	progressEvery  time.Duration
}

const pruneLong = `Finds and deletes backup data in the bucket of one KubeBlocks BackupRepo
that no KubeBlocks Backup accounts for any more: per-backup directories,
historical repository volume roots, unowned pvc-<UUID>/ roots and, with
--delete-repository-stray, stray objects.

'plan' never writes. 'prune' is a dry run unless --dry-run=false and the
confirmation word are both given: DELETE, DELETE-STRAY (with
--delete-repository-stray), DELETE-RETAINED (with --include-retained) or
DELETE-RETAINED-AND-STRAY (with both).

The bucket must belong to this cluster alone: any canonical pvc-<UUID>/ root
that no PVC or PV of this cluster owns is treated as an orphan. Give other
clusters and applications their own buckets.

A Backup, Restore or PVC created after the final inventory refresh and
before the delete finishes is not seen; the tool narrows that window but
cannot close it. On an unversioned bucket an object rewritten between the
final listing and the delete is deleted too; --bucket-versioning=disabled is
the operator's acceptance of that race. Versioned buckets delete exact
versions instead (--purge-versions).

--prefix narrows the scan to a full object prefix inside a discovered root.
In a cluster directory that no Backup references, a --prefix below the
cluster yields only a protected placeholder: prune a single backup there
with --prefix at or above the cluster directory.

Environment: KBBACKUP_PRUNE_BACKUP_REPO, _NAMESPACE, _PREFIX, _BUCKET,
_ENDPOINT and _KUBE_MODE supply flag defaults. Exit codes: 0 success, 1 any
error, 2 'plan --fail-on-orphans' found an orphan.`

func newPruneCmd(kube *kubeFlags) *cobra.Command {
	o := &pruneOptions{progressEvery: 5 * time.Second, kube: kube}
	cmd := &cobra.Command{
		Use:   "prune",
		Short: "Find and delete orphaned KubeBlocks backup data in object storage",
		Long:  pruneLong,
	}
	bindPruneFlags(cmd.PersistentFlags(), o)
	plan := &cobra.Command{
		Use:   "plan --backup-repo NAME",
		Short: "Build a read-only plan of what could be cleaned up",
		Long:  pruneLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.command = "plan"
			return runPrune(cmd, o)
		},
	}
	plan.Flags().BoolVar(&o.failOnOrphans, "fail-on-orphans", false, "exit 2 if any candidate is in state orphan")
	run := &cobra.Command{
		Use:   "prune --backup-repo NAME [--dry-run=false --confirm WORD]",
		Short: "Preview (the default) or delete the orphaned data",
		Long:  pruneLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.command = "prune"
			return runPrune(cmd, o)
		},
	}
	run.Flags().BoolVar(&o.dryRun, "dry-run", true, "preview only; --dry-run=false deletes")
	run.Flags().StringVar(&o.confirm, "confirm", "", "confirmation word required with --dry-run=false")
	run.Flags().IntVar(&o.run.Concurrency, "concurrency", execute.DefaultConcurrency, "candidates processed in parallel (≥ 1; raise it for large jobs)")
	cmd.AddCommand(plan, run)
	return cmd
}

func bindPruneFlags(f *pflag.FlagSet, o *pruneOptions) {
	f.StringVar(&o.run.BackupRepo, "backup-repo", os.Getenv(envPruneBackupRepo), "BackupRepo name (required; env "+envPruneBackupRepo+")")
	f.StringVarP(&o.run.Namespace, "namespace", "n", os.Getenv(envPruneNamespace), "scan only this namespace's repository root (env "+envPruneNamespace+")")
	f.StringVar(&o.run.Prefix, "prefix", os.Getenv(envPrunePrefix), "narrow to a full object prefix inside a discovered root (env "+envPrunePrefix+")")
	f.StringVar(&o.run.Bucket, "bucket", os.Getenv(envPruneBucket), "fill in or assert the bucket; a mismatch is fatal (env "+envPruneBucket+")")
	f.StringVar(&o.run.Endpoint, "endpoint", os.Getenv(envPruneEndpoint), "override the S3 endpoint URL (env "+envPruneEndpoint+")")
	f.StringVar(&o.run.Region, "region", envOr("AWS_REGION", os.Getenv("AWS_DEFAULT_REGION")), "override the region (default AWS_REGION, then AWS_DEFAULT_REGION)")
	f.BoolVar(&o.run.PathStyle, "path-style", false, "path-style addressing (MinIO, RustFS, private endpoints)")
	f.StringVar(&o.run.CAFile, "ca-file", "", "PEM CA bundle for a private S3 endpoint")
	f.BoolVar(&o.run.InsecureSkipTLSVerify, "insecure-skip-tls-verify", false, "skip S3 TLS verification")
	f.BoolVar(&o.useRepoCreds, "use-backup-repo-credentials", true, "read the BackupRepo's credential Secret; false uses the AWS default chain")
	f.StringVar(&o.kubeMode, "kube-mode", envOr(envPruneKubeMode, "auto"), "auto, kubeconfig or in-cluster (env "+envPruneKubeMode+")")
	f.DurationVar(&o.requestTimeout, "request-timeout", 30*time.Second, "timeout of each Kubernetes request (> 0)")
	f.DurationVar(&o.run.Timeout, "timeout", execute.DefaultTimeout, "timeout of the whole command (> 0; raise it for large jobs, e.g. 2h)")
	f.DurationVar(&o.run.MinAge, "min-age", prune.DefaultMinAge, "minimum age of deletable data (≥ 0; 0 disables the age gate except for undated or future objects)")
	f.StringVar(&o.run.ManifestName, "manifest-name", prune.DefaultManifestName, "backup manifest file name")
	f.BoolVar(&o.run.IncludeRetained, "include-retained", false, "treat Retain manifests as eligible")
	f.BoolVar(&o.run.DeleteRepositoryStray, "delete-repository-stray", false, "make repository strays eligible")
	f.StringVar(&o.run.BucketVersioning, "bucket-versioning", "auto", "auto, disabled, enabled or suspended")
	f.BoolVar(&o.run.PurgeVersions, "purge-versions", false, "list versions and permanently delete every version")
	f.BoolVar(&o.showAll, "show-all", false, "also list live and hard-protected candidates")
	f.StringVarP(&o.output, "output", "o", OutputTable, "table or json")
	f.BoolVar(&o.debug, "debug", false, "redacted diagnostics on stderr")
}

// validate checks every flag before any network access. The run
// settings are checked as the prune function checks its variables; a flag
// given as 0 where 0 would mean "the default" is refused here.
func (o *pruneOptions) validate() error {
	o.run.DisableMinAge = o.run.MinAge == 0
	o.run.DefaultCredentialChain = !o.useRepoCreds
	switch {
	case strings.TrimSpace(o.run.BackupRepo) == "":
		return errors.New("--backup-repo is required (or set " + envPruneBackupRepo + ")")
	case o.output != OutputTable && o.output != OutputJSON:
		return fmt.Errorf("invalid --output %q: use table or json", o.output)
	case o.run.Timeout == 0:
		return errors.New("invalid --timeout: must be > 0")
	case o.requestTimeout <= 0:
		return errors.New("invalid --request-timeout: must be > 0")
	case o.run.ManifestName == "":
		return errors.New("invalid --manifest-name \"\": must be a bare file name")
	case o.command == "prune" && o.run.Concurrency == 0:
		return errors.New("invalid --concurrency 0: must be >= 1")
	}
	if err := o.run.Validate(execute.FlagName); err != nil {
		return err
	}
	mode, err := o.run.Versioning(execute.FlagName)
	if err != nil {
		return err
	}
	o.versioningMode = mode
	if _, err := kubeModeOf(o.kubeMode); err != nil {
		return err
	}
	if o.command == "prune" && !o.dryRun {
		return prune.CheckConfirmation(o.run.Options(), o.confirm)
	}
	return nil
}

func (o *pruneOptions) mode() string {
	switch {
	case o.command == "plan":
		return "plan"
	case o.dryRun:
		return "dry-run"
	}
	return "delete"
}

// runPrune is the prune pipeline: inventory, S3 settings, versioning,
// discovery, classification, then (prune only) the dry run or execution.
func runPrune(cmd *cobra.Command, o *pruneOptions) error {
	if err := o.validate(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), o.run.Timeout)
	defer cancel()
	stderr := cmd.ErrOrStderr()
	cfg, err := pruneRestConfig(o)
	if err != nil {
		return err
	}
	c, err := pruneKubeClient(cfg)
	if err != nil {
		return err
	}
	src := &kubeinv.Source{Client: c, Repo: o.run.BackupRepo, Namespace: o.run.Namespace}
	repo, err := src.GetRepo(ctx)
	if err != nil {
		return err
	}
	prog := newPruneProgress(stderr, o.progressEvery)
	var debug *debugWriter
	var store *s3store.Store
	stats := func() {
		if o.debug && store != nil {
			fmt.Fprintf(debug, "debug: s3_requests %s\n", statsLine(store.Stats()))
		}
	}
	mode := execute.ModeDelete
	switch {
	case o.command == "plan":
		mode = execute.ModePlan
	case o.dryRun:
		mode = execute.ModeDryRun
	}
	res, err := execute.Pipeline{
		Source: src, Repo: repo, Settings: o.run, Mode: mode, Now: time.Now,
		Configure: func(settings kubeinv.S3Settings, inv prune.Inventory, cfg *s3store.Config) {
			debug = newDebugWriter(stderr, o.debug, settings.Secrets())
			debugSettings(debug, o, settings, inv)
			if o.debug {
				cfg.Debug = debug
			}
		},
		Store: func(s *s3store.Store) execute.Store {
			store = s
			return &progressStore{Store: s, p: prog}
		},
		Planned:  func(prune.Plan) { prog.done(); stats() },
		Progress: prog.candidates,
	}.Run(ctx)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if mode == execute.ModePlan {
		if err := printPrune(out, o, res.Plan, nil); err != nil {
			return err
		}
		return failOnOrphans(res.Plan, o.failOnOrphans)
	}
	if mode == execute.ModeDelete {
		prog.done()
		stats()
	}
	if err := printPrune(out, o, res.Final, res.Execution); err != nil {
		return err
	}
	return res.RunErr
}

// failOnOrphans is exit code 2 of --fail-on-orphans: every candidate counts,
// shown or not, including a deferred orphan-repository-root.
func failOnOrphans(pl prune.Plan, enabled bool) error {
	if n := pl.StateCounts[prune.StateOrphan]; enabled && n > 0 {
		return exitError{code: 2, msg: fmt.Sprintf("%d candidates are orphans (--fail-on-orphans)", n)}
	}
	return nil
}

func statsLine(s s3store.Stats) string {
	return fmt.Sprintf("list_pages=%d version_list_pages=%d manifest_gets=%d versioning_queries=%d delete_requests=%d deleted_objects=%d",
		s.ListPages, s.VersionListPages, s.ManifestGets, s.VersioningQueries, s.DeleteRequests, s.DeletedObjects)
}
