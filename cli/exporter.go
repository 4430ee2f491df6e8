package cli

import (
	"fmt"

	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/snapflow/snapflow/internal/coverage"
	"github.com/snapflow/snapflow/internal/scheme"
	"github.com/snapflow/snapflow/internal/statemetrics"
)

func newExporterCmd(kube *kubeFlags) *cobra.Command {
	var addr, global, pruneRecord string
	var devLogs, judgeCoverage bool
	cmd := &cobra.Command{
		Use:   "exporter",
		Short: "Serve Prometheus metrics derived from snapflow's objects (kopiur_* and snapflow_* gauges)",
		Long: `Serve Prometheus metrics derived from the status of Snapshots, policies,
repositories, restores and maintenances, read through a watch cache: the
functions scale to zero and keep nothing in memory, so what dashboards and
alerts need comes from the objects. A series lives as long as its object.
The names and meanings follow Kopiur's (kopiur_*), so its dashboards and
alerts work unchanged. It needs list and watch on those kinds.

With --coverage (the default) it also serves snapflow_pvc_protected, every
PVC's verdict as "snapflow coverage -A" gives it: it then watches PVCs,
PersistentVolumes and namespaces too, and reads the resourcePolicy
ConfigMaps the policies name, so it needs list and watch on those and get
on ConfigMaps.

With --prune-record it also serves the outcome of each BackupRepo's last
orphan-prune run, which the prune function records there.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := zap.New(zap.UseDevMode(devLogs)).WithName("exporter")
			ctrl.SetLogger(log)
			if err := globalPoliciesFlag(global); err != nil {
				return err
			}
			if _, _, ok := coverage.SplitConfigMap(pruneRecord); pruneRecord != "" && !ok {
				return fmt.Errorf("--prune-record %q: want NAMESPACE/NAME of the prune function's record ConfigMap, e.g. snapflow-system/snapflow-prune-record", pruneRecord)
			}
			cfg, err := kube.restConfig()
			if err != nil {
				return err
			}
			return statemetrics.Serve(cmd.Context(), statemetrics.Options{Config: cfg, Scheme: scheme.New(), Addr: addr, Log: log,
				Coverage: judgeCoverage, GlobalVolumePolicies: global, PruneRecord: pruneRecord})
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:8080", "address of /metrics, /healthz and /readyz (the chart listens on :8080)")
	cmd.Flags().BoolVar(&devLogs, "dev-logs", false, "human-readable logs instead of JSON")
	cmd.Flags().BoolVar(&judgeCoverage, "coverage", true, "serve snapflow_pvc_protected (needs list and watch on PVCs, PVs and namespaces, get on ConfigMaps)")
	cmd.Flags().StringVar(&pruneRecord, "prune-record", "", "the prune function's record of each BackupRepo's last runs, as NAMESPACE/NAME of its ConfigMap: serves snapflow_prune_blocked and snapflow_prune_last_run_timestamp_seconds (needs get on that ConfigMap); empty serves neither")
	cmd.Flags().StringVar(&global, "global-volume-policies", "", "the global volume-policy ConfigMap as NAMESPACE/NAME, so its skip rules count as exclusions in snapflow_pvc_protected")
	return cmd
}
