package cli

import (
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"knative.dev/pkg/signals"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/snapflow/snapflow/internal/admission"
	"github.com/snapflow/snapflow/webhook"
)

func newWebhookCmd(kube *kubeFlags) *cobra.Command {
	o := webhook.Options{}
	var sans, mutating, validating, controllers, jobControllers string
	var devLogs bool
	cmd := &cobra.Command{
		Use:   "webhook",
		Short: "Run the admission webhook (validation, defaults, finalizers)",
		Long: `Serves mutating and validating admission for the six snapflow kinds over HTTPS.

By default the webhook keeps its own CA and serving certificate in a Secret in
its namespace, renews them before they expire without a restart, and writes
the CA into the webhook configurations' caBundle. Give --tls-cert and
--tls-key to serve certificates from files instead (e.g. from cert-manager);
they are reloaded when the files change.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := zap.New(zap.UseDevMode(devLogs))
			ctrl.SetLogger(log)
			o.Log = log.WithName("webhook")
			o.ExtraSANs = splitList(sans)
			o.MutatingConfigs = splitList(mutating)
			o.ValidatingConfigs = splitList(validating)
			o.ControllerUsers = splitList(controllers)
			o.JobControllers = splitList(jobControllers)
			cfg, err := kube.restConfig()
			if err != nil {
				return err
			}
			return webhook.Run(signals.NewContext(), cfg, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Host, "host", "", "address to listen on (all when empty)")
	f.IntVar(&o.Port, "port", 9443, "HTTPS port for admission requests")
	f.StringVar(&o.TLSCertFile, "tls-cert", "", "serving certificate file (with --tls-key); self-managed when empty")
	f.StringVar(&o.TLSKeyFile, "tls-key", "", "serving key file (with --tls-cert)")
	f.StringVar(&o.Namespace, "namespace", os.Getenv("POD_NAMESPACE"), "namespace the webhook runs in (holds its certificate Secret)")
	f.StringVar(&o.ServiceName, "service-name", webhook.DefaultServiceName, "Service in front of the webhook; its DNS names go into the certificate")
	f.StringVar(&o.SecretName, "tls-secret", webhook.DefaultSecretName, "Secret holding the self-managed CA and certificate")
	f.StringVar(&sans, "tls-san", "", "extra comma-separated DNS names or IPs for the self-managed certificate")
	f.StringVar(&mutating, "mutating-configs", webhook.DefaultMutatingConfig, "comma-separated MutatingWebhookConfigurations whose caBundle the webhook maintains")
	f.StringVar(&validating, "validating-configs", webhook.DefaultValidatingConfig, "comma-separated ValidatingWebhookConfigurations whose caBundle the webhook maintains")
	f.DurationVar(&o.CertCheckInterval, "cert-check-interval", time.Hour, "how often the self-managed certificate is checked for renewal")
	f.StringVar(&o.MetricsAddr, "metrics-addr", ":8080", "address of the Prometheus /metrics endpoint")
	f.StringVar(&o.HealthAddr, "health-addr", ":8081", "address of the /healthz and /readyz endpoints")
	f.Int64Var(&o.MaxRequestBytes, "max-request-bytes", webhook.DefaultMaxRequestBytes, "refuse admission requests larger than this")
	f.StringVar(&o.GlobalVolumePoliciesConfigMap, "global-backup-volume-policies-configmap", "", "ConfigMap in the webhook's namespace whose volumePolicies every Snapshot inherits after its recipe's own (optional)")
	f.BoolVar(&o.VeleroBackups, "velero-backups", false, "also merge the global volume policies into velero.io Backups (needs the snapflow-velero webhook configuration)")
	f.StringVar(&controllers, "controller-users", "", "comma-separated users (snapflow's functions' ServiceAccounts, system:serviceaccount:NS:NAME) that may write controller-owned labels and annotations such as pruned-by; the webhook's own identity always may")
	f.StringVar(&jobControllers, "job-controller-users", strings.Join(admission.DefaultJobControllers, ","), "comma-separated users the Kubernetes Job controller acts as; only they may create pods labelled app.kubernetes.io/managed-by=snapflow, whose reports the functions trust")
	f.BoolVar(&devLogs, "dev-logs", false, "human-readable logs instead of JSON")
	return cmd
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
