package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/snapflow/snapflow/internal/admission"
	"github.com/snapflow/snapflow/internal/certs"
	"github.com/snapflow/snapflow/internal/policysource"
	"github.com/snapflow/snapflow/internal/repository"
	"github.com/snapflow/snapflow/internal/scheme"
)

// Default names of the objects the webhook manages.
const (
	DefaultMutatingConfig   = "snapflow-mutating"
	DefaultValidatingConfig = "snapflow-validating"
	DefaultServiceName      = "snapflow-webhook"
	DefaultSecretName       = "snapflow-webhook-tls"
	// DefaultMaxRequestBytes fits an AdmissionReview of two objects at etcd's
	// 1.5 MiB object limit with room for the envelope.
	DefaultMaxRequestBytes = 4 << 20
)

// Options configures the admission server.
type Options struct {
	Host string
	Port int
	// TLSCertFile and TLSKeyFile serve given certificates (e.g. from
	// cert-manager), reloaded when the files change. When empty, the server
	// manages its own CA and certificate in SecretName.
	TLSCertFile, TLSKeyFile string
	Namespace               string
	ServiceName             string
	SecretName              string
	// ExtraSANs are further DNS names or IP addresses for the self-managed certificate.
	ExtraSANs         []string
	MutatingConfigs   []string
	ValidatingConfigs []string
	CertPolicy        certs.Policy
	CertCheckInterval time.Duration
	MetricsAddr       string
	HealthAddr        string
	MaxRequestBytes   int64
	// GlobalVolumePoliciesConfigMap names a ConfigMap in Namespace whose
	// volumePolicies every Snapshot inherits after its recipe's own.
	GlobalVolumePoliciesConfigMap string
	// VeleroBackups merges the global volume policies into velero.io Backups
	// too (needs GlobalVolumePoliciesConfigMap and the snapflow-velero
	// webhook configuration).
	VeleroBackups bool
	// VeleroSweepInterval and VeleroGrace tune the cleanup of merged ConfigMaps.
	VeleroSweepInterval, VeleroGrace time.Duration
	// ControllerUsers may write the controller-owned labels and annotations
	// (snapflow's functions' ServiceAccounts). The webhook's own identity is
	// added: in `snapflow dev` the functions share it.
	ControllerUsers []string
	// JobControllers are the identities the Kubernetes Job controller acts
	// as; only they may create pods labelled as snapflow's (default
	// admission.DefaultJobControllers).
	JobControllers []string
	Log            logr.Logger
}

func (o *Options) defaults() {
	if o.Port == 0 {
		o.Port = 9443
	}
	if o.ServiceName == "" {
		o.ServiceName = DefaultServiceName
	}
	if o.SecretName == "" {
		o.SecretName = DefaultSecretName
	}
	if o.CertPolicy == (certs.Policy{}) {
		o.CertPolicy = certs.DefaultPolicy
	}
	if o.CertCheckInterval == 0 {
		o.CertCheckInterval = time.Hour
	}
	if o.MaxRequestBytes == 0 {
		o.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if o.VeleroSweepInterval == 0 {
		o.VeleroSweepInterval = time.Minute
	}
	if o.VeleroGrace == 0 {
		o.VeleroGrace = 5 * time.Minute
	}
	if o.VeleroBackups && !slices.Contains(o.MutatingConfigs, DefaultVeleroConfig) {
		o.MutatingConfigs = append(o.MutatingConfigs, DefaultVeleroConfig)
	}
	if len(o.JobControllers) == 0 {
		o.JobControllers = admission.DefaultJobControllers
	}
	if o.MetricsAddr == "" {
		o.MetricsAddr = ":8080"
	}
	if o.HealthAddr == "" {
		o.HealthAddr = ":8081"
	}
}

// Hosts are the names the self-managed certificate covers.
func (o *Options) Hosts() certs.Hosts {
	h := certs.Hosts{DNSNames: []string{
		o.ServiceName,
		o.ServiceName + "." + o.Namespace,
		o.ServiceName + "." + o.Namespace + ".svc",
		o.ServiceName + "." + o.Namespace + ".svc.cluster.local",
	}}
	for _, san := range o.ExtraSANs {
		if ip := net.ParseIP(san); ip != nil {
			h.IPs = append(h.IPs, ip)
		} else {
			h.DNSNames = append(h.DNSNames, san)
		}
	}
	return h
}

// Run serves admission until ctx ends.
func Run(ctx context.Context, cfg *rest.Config, o Options) error {
	o.defaults()
	TuneGC()
	if o.Namespace == "" {
		return errors.New("the webhook needs its namespace (--namespace or POD_NAMESPACE) to store its certificate")
	}
	if o.VeleroBackups && o.GlobalVolumePoliciesConfigMap == "" {
		return errors.New("--velero-backups merges the global volume policies into Velero Backups, so it needs --global-backup-volume-policies-configmap")
	}
	if (o.TLSCertFile == "") != (o.TLSKeyFile == "") {
		return errors.New("--tls-cert and --tls-key go together: give both, or neither to let the webhook manage its own certificate")
	}
	sch := scheme.New()
	direct, err := client.New(cfg, client.Options{Scheme: sch})
	if err != nil {
		return fmt.Errorf("build client: %w", err)
	}

	// A global baseline that is missing or invalid stops the webhook here,
	// rather than turning every Snapshot admission into a denial.
	if o.GlobalVolumePoliciesConfigMap != "" {
		startup := &policysource.Resolver{Reader: direct, Namespace: o.Namespace, GlobalName: o.GlobalVolumePoliciesConfigMap}
		doc, ref, ignored, err := startup.Global(ctx)
		if err != nil {
			return fmt.Errorf("--global-backup-volume-policies-configmap: %w", err)
		}
		if len(ignored) > 0 {
			o.Log.Info("WARNING: global backup volume policies ConfigMap contains sections other than volumePolicies; they are ignored, only volumePolicies apply globally",
				"configmap", ref.ConfigMap, "ignored", ignored)
		}
		o.Log.Info("loaded global backup volume policies", "configmap", ref.ConfigMap, "resourceVersion", ref.ResourceVersion, "rules", len(doc.VolumePolicies))
	}

	srvOpts := crwebhook.Options{Host: o.Host, Port: o.Port}
	var self *SelfTLS
	if o.TLSCertFile != "" {
		srvOpts.CertDir = filepath.Dir(o.TLSCertFile)
		srvOpts.CertName = filepath.Base(o.TLSCertFile)
		srvOpts.KeyName = filepath.Base(o.TLSKeyFile)
	} else {
		self = &SelfTLS{
			Client: direct, Namespace: o.Namespace, SecretName: o.SecretName, Hosts: o.Hosts(), Policy: o.CertPolicy,
			MutatingConfigs: o.MutatingConfigs, ValidatingConfigs: o.ValidatingConfigs,
			Interval: o.CertCheckInterval, Log: o.Log.WithName("tls"),
		}
		// Serve only once a certificate exists; a caBundle the configurations
		// do not have yet is retried by the rotation loop.
		if err := self.Ensure(ctx); err != nil {
			if self.Ready() != nil {
				return fmt.Errorf("prepare serving certificate: %w", err)
			}
			o.Log.Error(err, "webhook configurations not updated yet; retrying", "interval", o.CertCheckInterval)
		}
		srvOpts.TLSOpts = []func(*tls.Config){func(c *tls.Config) { c.GetCertificate = self.GetCertificate }}
	}

	mgr, err := ctrl.NewManager(cfg, manager.Options{
		Scheme:                 sch,
		Logger:                 o.Log,
		Metrics:                metricsserver.Options{BindAddress: o.MetricsAddr},
		HealthProbeBindAddress: o.HealthAddr,
		WebhookServer:          crwebhook.NewServer(srvOpts),
	})
	if err != nil {
		return fmt.Errorf("build manager: %w", err)
	}
	lookup := repository.Lookup{Reader: mgr.GetClient(), Live: mgr.GetAPIReader(), System: o.Namespace}
	// ConfigMaps are read live: caching them would mean watching every
	// ConfigMap in the cluster.
	volumePolicies := &policysource.Resolver{Reader: mgr.GetAPIReader(), Namespace: o.Namespace, GlobalName: o.GlobalVolumePoliciesConfigMap}
	controllers, err := controllerUsers(ctx, cfg, o.ControllerUsers)
	if err != nil {
		return err
	}
	o.Log.Info("controller-owned labels and annotations writable by", "users", slices.Sorted(maps.Keys(controllers)))
	srv := mgr.GetWebhookServer()
	for _, kind := range admission.Kinds {
		for _, mutate := range []bool{true, false} {
			h := &Handler{Kind: kind, Mutate: mutate, Lookup: lookup, VolumePolicies: volumePolicies, Controllers: controllers, Log: o.Log.WithName("admission")}
			path := ValidatePath(kind)
			if mutate {
				path = MutatePath(kind)
			}
			srv.Register(path, LimitBody(&crwebhook.Admission{Handler: h, RecoverPanic: ptr.To(true)}, o.MaxRequestBytes))
		}
	}
	jobControllers := map[string]bool{}
	for _, u := range o.JobControllers {
		jobControllers[u] = true
	}
	o.Log.Info("pods labelled as snapflow's may be created by", "users", o.JobControllers)
	movers := LimitBody(&crwebhook.Admission{Handler: &Movers{JobControllers: jobControllers, Controllers: controllers, Log: o.Log.WithName("movers")}, RecoverPanic: ptr.To(true)}, o.MaxRequestBytes)
	srv.Register(MoverPodPath, movers)
	srv.Register(MoverJobPath, movers)
	if o.VeleroBackups {
		v := &VeleroBackups{Client: direct, Policies: &policysource.Resolver{Reader: direct, Namespace: o.Namespace, GlobalName: o.GlobalVolumePoliciesConfigMap}, Log: o.Log.WithName("velero")}
		srv.Register(VeleroMutatePath, LimitBody(&crwebhook.Admission{Handler: v, RecoverPanic: ptr.To(true)}, o.MaxRequestBytes))
		if err := mgr.Add(&VeleroSweeper{Client: direct, Interval: o.VeleroSweepInterval, Grace: o.VeleroGrace, Log: o.Log.WithName("velero-sweeper")}); err != nil {
			return err
		}
	}
	srv.Register("/healthz", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("webhook", srv.StartedChecker()); err != nil {
		return err
	}
	if self != nil {
		if err := mgr.AddReadyzCheck("certificate", func(*http.Request) error { return self.Ready() }); err != nil {
			return err
		}
		if err := mgr.Add(self); err != nil {
			return err
		}
	}
	o.Log.Info("serving admission", "address", net.JoinHostPort(o.Host, strconv.Itoa(o.Port)), "selfManagedTLS", self != nil)
	return mgr.Start(ctx)
}

// controllerUsers is the set of users that may write controller-owned
// metadata: those listed, and the webhook's own identity as the API server
// sees it.
func controllerUsers(ctx context.Context, cfg *rest.Config, listed []string) (map[string]bool, error) {
	users := map[string]bool{}
	for _, u := range listed {
		users[u] = true
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("build clientset: %w", err)
	}
	self, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("find the webhook's own identity (SelfSubjectReview): %w", err)
	}
	users[self.Status.UserInfo.Username] = true
	return users, nil
}

// LimitBody refuses request bodies over max bytes with 413 before they are read.
func LimitBody(h http.Handler, limit int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > limit {
			http.Error(w, fmt.Sprintf("request body of %d bytes exceeds the %d byte limit", r.ContentLength, limit), http.StatusRequestEntityTooLarge)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, limit)
		h.ServeHTTP(w, r)
	})
}
