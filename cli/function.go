package cli

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/snapflow/snapflow/events"
	"github.com/snapflow/snapflow/events/sources/kube"
	"github.com/snapflow/snapflow/events/sources/sink"
	"github.com/snapflow/snapflow/events/sources/tick"
	"github.com/snapflow/snapflow/functions/cleanup"
	"github.com/snapflow/snapflow/functions/host"
	"github.com/snapflow/snapflow/functions/maintenance"
	prunefn "github.com/snapflow/snapflow/functions/prune"
	"github.com/snapflow/snapflow/functions/restore"
	"github.com/snapflow/snapflow/functions/retention"
	"github.com/snapflow/snapflow/functions/schedule"
	"github.com/snapflow/snapflow/functions/snapshot"
	"github.com/snapflow/snapflow/functions/verify"
	"github.com/snapflow/snapflow/internal/egress"
	"github.com/snapflow/snapflow/internal/jobwatch"
	maintkernel "github.com/snapflow/snapflow/internal/maintenance"
	"github.com/snapflow/snapflow/internal/policysource"
	"github.com/snapflow/snapflow/internal/prune/ledger"
	schedulekernel "github.com/snapflow/snapflow/internal/schedule"
	"github.com/snapflow/snapflow/internal/scheme"
	"github.com/snapflow/snapflow/internal/version"
)

// functionFlags are shared by `function` and `dev`.
type functionFlags struct {
	addr, namespace, moverImage, moverSA, sink string
	sinkTokenFile                              string
	globalPolicies                             string
	pruneRecord                                string
	deleteWindow                               time.Duration
	coverageEvery, coverageGrace               time.Duration
	hookDeny, hookAllow                        []string
	workloadExecHooks                          bool
	progress                                   bool
	// local, in `snapflow dev`, delivers emitted events to the in-process functions.
	local   *host.LateSink
	maxJobs int
	devLogs bool
	// maintQuick and maintFull are the crons of default Maintenances.
	maintQuick, maintFull string
	kube                  *kubeFlags
}

func (f *functionFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.addr, "addr", defaultListenAddr(), "listen address (Knative sets $PORT: all interfaces on it; else loopback only, so a laptop's functions are not open to its network)")
	fl.StringVar(&f.namespace, "namespace", envOr("POD_NAMESPACE", "snapflow-system"), "snapflow's install namespace")
	fl.StringVar(&f.moverImage, "mover-image", "snapflow/snapflow:"+version.Version, "image of mover Jobs (point it at your registry's copy of the snapflow image)")
	fl.StringVar(&f.moverSA, "mover-service-account", "", "ServiceAccount of mover pods (granted nothing: a mover reports through its termination message)")
	fl.IntVar(&f.maxJobs, "max-concurrent-jobs", 0, "cluster-wide cap on concurrent mover Jobs (0: unlimited)")
	fl.StringVar(&f.sink, "sink", os.Getenv("K_SINK"), "where emitted events go (Knative SinkBinding sets $K_SINK)")
	fl.StringVar(&f.sinkTokenFile, "sink-token-file", "", "file holding the bearer token sent with emitted events (a projected ServiceAccount token with the audience of a sink that checks senders, such as another function)")
	fl.BoolVar(&f.devLogs, "dev-logs", false, "human-readable logs instead of JSON")
	fl.DurationVar(&f.deleteWindow, "delete-window", 10*time.Second, "cleanup: quiet period after the newest deletion before a repository's deletion batch starts")
	fl.StringArrayVar(&f.hookDeny, "hook-deny-cidr", nil, "snapshot: a range httpRequest hooks may not connect to, beyond those always refused (loopback, link-local, cloud metadata, and the ServiceCIDRs, node pod ranges and node addresses read from the API server); repeatable")
	fl.BoolVar(&f.progress, "progress", true, "snapshot, restore: read running movers' logs (pods/log) into status.progress")
	fl.BoolVar(&f.workloadExecHooks, "workload-exec-hooks", false, "snapshot, restore: run workloadExec hooks, stream sources and streamExec restores (needs pods/exec in every namespace; without it they fail, saying so)")
	fl.StringArrayVar(&f.hookAllow, "hook-allow-cidr", nil, "snapshot: a range httpRequest hooks may connect to despite every refusal (repeatable)")
	fl.StringVar(&f.maintQuick, "default-maintenance-quick", maintkernel.KopiaCadence.Quick, "maintenance: cron of the quick runs of a repository's default Maintenance, when its spec.maintenance.schedule names none (H: a minute stable per repository)")
	fl.StringVar(&f.maintFull, "default-maintenance-full", maintkernel.KopiaCadence.Full, "maintenance: cron of the full runs (garbage collection) of a repository's default Maintenance, when its spec.maintenance.schedule names none")
	fl.StringVar(&f.pruneRecord, "prune-record", ledger.ConfigMap, "ConfigMap in --namespace where the prune function records each BackupRepo's last runs for the exporter (it must exist: the chart creates it)")
	fl.StringVar(&f.globalPolicies, "global-backup-volume-policies-configmap", "", "ConfigMap in --namespace holding the global backup volume policies (checked at startup, re-read for every run)")
	fl.DurationVar(&f.coverageEvery, "coverage-every", schedule.DefaultCoverageEvery, "schedule: how often a tick or resync judges every PVC's coverage, to send dev.snapflow.coverage.unprotected (0: never)")
	fl.DurationVar(&f.coverageGrace, "coverage-grace", schedule.DefaultCoverageGrace, "schedule: how long a PVC is unprotected before dev.snapflow.coverage.unprotected tells it")
}

// defaultListenAddr binds all interfaces only where a platform asked for a
// port ($PORT on Knative); manifests pass --addr explicitly anyway.
func defaultListenAddr() string {
	if port := os.Getenv("PORT"); port != "" {
		return ":" + port
	}
	return "127.0.0.1:8080"
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// functionsFor builds the named functions ("all" for every one).
func (f *functionFlags) build(ctx context.Context, log logr.Logger, names []string) ([]host.Function, error) {
	cfg, err := f.kube.restConfig()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	sink, err := host.NewSinkEmitter(f.sink, log.WithName("emit"), f.sinkTokenFile)
	if err != nil {
		return nil, err
	}
	var emitter host.Emitter = sink
	if f.local != nil {
		emitter = host.Fanout{sink, host.Trigger{Types: retention.Subscribes, Emitter: f.local}}
	}
	recorder := func(component string) record.EventRecorder {
		b := record.NewBroadcaster(record.WithContext(ctx))
		b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
		return b.NewRecorder(scheme.New(), corev1.EventSource{Component: component})
	}
	if f.globalPolicies != "" {
		// A missing or invalid baseline stops the process: running without
		// the platform team's rules would back up what they meant to skip.
		r := policysource.Resolver{Reader: c, Namespace: f.namespace, GlobalName: f.globalPolicies}
		_, ref, ignored, err := r.Global(ctx)
		if err != nil {
			return nil, fmt.Errorf("--global-backup-volume-policies-configmap: %w", err)
		}
		if len(ignored) > 0 {
			log.Info("the global ConfigMap carries sections other than volumePolicies; they are ignored", "configmap", ref.ConfigMap, "ignored", ignored)
		}
		log.Info("loaded global backup volume policies", "configmap", ref.ConfigMap, "resourceVersion", ref.ResourceVersion)
	}
	deny, err := egress.ParsePrefixes("--hook-deny-cidr", f.hookDeny)
	if err != nil {
		return nil, err
	}
	allow, err := egress.ParsePrefixes("--hook-allow-cidr", f.hookAllow)
	if err != nil {
		return nil, err
	}
	var logs jobwatch.LogReader
	if f.progress {
		logs = jobwatch.KubeLogs{Pods: cs.CoreV1()}
	}
	var out []host.Function
	for _, n := range names {
		switch n {
		case "snapshot":
			fn := &snapshot.Function{Client: c, Config: cfg, Namespace: f.namespace, MoverImage: f.moverImage, MoverServiceAccount: f.moverSA,
				MaxConcurrentJobs: f.maxJobs, GlobalVolumePoliciesConfigMap: f.globalPolicies, Emitter: emitter, Recorder: recorder("snapflow-snapshot"),
				Access: cs.AuthorizationV1().SubjectAccessReviews(), Logs: logs,
				HookEgress:        egress.Policy{Deny: deny, Allow: allow, Namespace: f.namespace},
				WorkloadExecHooks: f.workloadExecHooks}
			out = append(out, host.Function{Name: n, Handle: fn.Handle, Requests: []string{events.SnapshotRequested}})
		case "schedule":
			if f.coverageGrace <= 0 {
				return nil, fmt.Errorf("--coverage-grace %s: want a positive duration, e.g. 1h", f.coverageGrace)
			}
			every := f.coverageEvery
			if every <= 0 {
				every = -1 // off
			}
			global := ""
			if f.globalPolicies != "" {
				global = f.namespace + "/" + f.globalPolicies
			}
			reader, err := host.InformerReader(ctx, cfg, schedule.Informed()...)
			if err != nil {
				return nil, fmt.Errorf("schedule function: %w", err)
			}
			fn := &schedule.Function{Client: c, Reader: reader, Emitter: emitter, Recorder: recorder("snapflow-schedule"),
				Namespace: f.namespace, GlobalVolumePolicies: global, CoverageEvery: every, CoverageGrace: f.coverageGrace}
			out = append(out, host.Function{Name: n, Handle: fn.Handle})
		case "retention":
			fn := &retention.Function{Client: c, Emitter: emitter, Recorder: recorder("snapflow-retention")}
			out = append(out, host.Function{Name: n, Handle: fn.Handle})
		case "cleanup":
			fn := &cleanup.Function{Client: c, Namespace: f.namespace, MoverImage: f.moverImage, MoverServiceAccount: f.moverSA,
				Window: f.deleteWindow, Emitter: emitter, Recorder: recorder("snapflow-cleanup")}
			out = append(out, host.Function{Name: n, Handle: fn.Handle})
		case "verify":
			fn := &verify.Function{Client: c, Namespace: f.namespace, MoverImage: f.moverImage, MoverServiceAccount: f.moverSA,
				Emitter: emitter, Recorder: recorder("snapflow-verify")}
			out = append(out, host.Function{Name: n, Handle: fn.Handle})
		case "restore":
			fn := &restore.Function{Client: c, Namespace: f.namespace, MoverImage: f.moverImage, MoverServiceAccount: f.moverSA,
				Emitter: emitter, Recorder: recorder("snapflow-restore"), Access: cs.AuthorizationV1().SubjectAccessReviews(),
				Logs: logs, WorkloadExec: f.workloadExecHooks}
			out = append(out, host.Function{Name: n, Handle: fn.Handle, Requests: []string{events.RestoreRequested}})
		case "maintenance":
			for flag, v := range map[string]string{"--default-maintenance-quick": f.maintQuick, "--default-maintenance-full": f.maintFull} {
				if _, err := schedulekernel.Resolve(v, "", "", nil, "flag", "flag"); err != nil {
					return nil, fmt.Errorf("%s %q: %w", flag, v, err)
				}
			}
			fn := &maintenance.Function{Client: c, Namespace: f.namespace, MoverImage: f.moverImage, MoverServiceAccount: f.moverSA,
				Defaults: maintkernel.Defaults{Quick: f.maintQuick, Full: f.maintFull}, Emitter: emitter, Recorder: recorder("snapflow-maintenance")}
			out = append(out, host.Function{Name: n, Handle: fn.Handle})
		case "prune":
			// Configured from KBBACKUP_PRUNE_* variables, like `snapflow prune`.
			settings, err := prunefn.FromEnv(os.Getenv)
			if err != nil {
				return nil, fmt.Errorf("prune function settings: %w", err)
			}
			fn := &prunefn.Function{Client: c, Config: cfg, Settings: settings, Emitter: emitter, Recorder: recorder("snapflow-prune"),
				Writer: c, Namespace: f.namespace, Record: f.pruneRecord}
			out = append(out, host.Function{Name: n, Handle: fn.Handle})
		default:
			return nil, fmt.Errorf("unknown function %q (available: %s)", n, strings.Join(functionNames, ", "))
		}
	}
	return out, nil
}

var functionNames = []string{"snapshot", "cleanup", "retention", "schedule", "restore", "verify", "maintenance", "prune"}

// senderFlags decide who may send events to `snapflow function`.
type senderFlags struct {
	audience  string
	trusted   []string
	triggers  []string
	anySender bool
	kube      *kubeFlags
}

func (s *senderFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&s.audience, "sender-audience", "snapflow-functions", "audience a sender's bearer token must be issued for; each request's token is checked with a TokenReview")
	fl.StringArrayVar(&s.trusted, "trusted-sender", nil, "user (a ServiceAccount as system:serviceaccount:NS:NAME, or a prefix ending in *) that may send any event: snapflow's sources, a Broker (repeatable); other authenticated senders may only send request events, each checked with a SubjectAccessReview")
	fl.StringArrayVar(&s.triggers, "trusted-trigger", nil, "Knative Trigger in --namespace whose deliveries may carry any event: its OIDC ServiceAccount (as Knative Eventing names it) is trusted (repeatable)")
	fl.BoolVar(&s.anySender, "insecure-accept-any-sender", false, "serve every sender without a token (only where the network already limits who reaches the function)")
}

// authenticator is nil only when the operator turned authentication off.
func (s *senderFlags) authenticator(log logr.Logger, namespace string) (*host.Authenticator, error) {
	if s.anySender {
		log.Info("sender authentication is off (--insecure-accept-any-sender): anyone who reaches this function can drive it")
		return nil, nil
	}
	if s.audience == "" {
		return nil, fmt.Errorf("--sender-audience is empty: set the audience senders' tokens are issued for, or pass --insecure-accept-any-sender")
	}
	cfg, err := s.kube.restConfig()
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	trusted := slices.Clone(s.trusted)
	for _, t := range s.triggers {
		trusted = append(trusted, host.KnativeTriggerSender(namespace, t))
	}
	return &host.Authenticator{Reviewer: cs.AuthenticationV1().TokenReviews(), Audience: s.audience, Trusted: trusted}, nil
}

func newFunctionCmd(kf *kubeFlags) *cobra.Command {
	f := functionFlags{kube: kf}
	senders := senderFlags{kube: kf}
	cmd := &cobra.Command{
		Use:       "function NAME",
		Short:     "Serve one snapflow function as a CloudEvents receiver (a Knative Service runs this)",
		Args:      cobra.ExactArgs(1),
		ValidArgs: functionNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			log := zap.New(zap.UseDevMode(f.devLogs)).WithName(args[0])
			ctrl.SetLogger(log)
			auth, err := senders.authenticator(log, f.namespace)
			if err != nil {
				return err
			}
			fns, err := f.build(cmd.Context(), log, args)
			if err != nil {
				return err
			}
			return host.Serve(cmd.Context(), host.Options{Addr: f.addr, Functions: fns, Log: log, Auth: auth})
		},
	}
	f.register(cmd)
	senders.register(cmd)
	return cmd
}

func newDevCmd(kf *kubeFlags) *cobra.Command {
	f := functionFlags{kube: kf}
	var resync time.Duration
	var sources bool
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run every function in one process, with the kube source feeding them (local use)",
		Long: `dev serves each function on /<name> of one listener and, with --sources
(the default), runs snapflow's kube source against the same cluster, posting
ApiServerSource-shaped events and a periodic resync to the functions.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			log := zap.New(zap.UseDevMode(f.devLogs)).WithName("dev")
			ctrl.SetLogger(log)
			f.local = &host.LateSink{}
			fns, err := f.build(ctx, log, functionNames)
			if err != nil {
				return err
			}
			listening := make(chan string, 1)
			errc := make(chan error, 2)
			go func() {
				errc <- host.Serve(ctx, host.Options{Addr: f.addr, Functions: fns, Log: log.WithName("functions"), Listening: listening})
			}()
			var addr string
			select {
			case addr = <-listening:
			case err := <-errc:
				return err
			}
			// Without a broker, results go straight to the retention function.
			if err := f.local.Set("http://" + loopback(addr) + "/retention"); err != nil {
				return err
			}
			if sources {
				cfg, err := kf.restConfig()
				if err != nil {
					return err
				}
				var sinks []string
				for _, fn := range fns {
					sinks = append(sinks, "http://"+loopback(addr)+"/"+fn.Name)
				}
				go func() {
					errc <- kube.Run(ctx, kube.Options{Config: cfg, Scheme: scheme.New(), Sinks: sinks, Resync: resync, Progress: kube.DefaultProgress, Log: log.WithName("kube-source")})
				}()
			}
			select {
			case <-ctx.Done():
				return nil
			case err := <-errc:
				return err
			}
		},
	}
	f.register(cmd)
	cmd.Flags().DurationVar(&resync, "resync", 30*time.Second, "how often the kube source sends a resync event")
	cmd.Flags().BoolVar(&sources, "sources", true, "run the kube source in-process")
	return cmd
}

func newSourceCmd(kf *kubeFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "source", Short: "Event sources for clusters without Knative"}
	var sinks []string
	var resync, progress time.Duration
	var devLogs, onlyProgress bool
	var tokenFile string
	kubeCmd := &cobra.Command{
		Use:   "kube",
		Short: "Watch snapflow's kinds and mover Jobs and POST ApiServerSource-shaped CloudEvents to the sinks",
		Long: `Watch snapflow's kinds and mover Jobs and POST ApiServerSource-shaped
CloudEvents to the sinks, with a periodic resync and a resend of every running
backup or restore mover Job (--progress), so its run's status.progress
refreshes.

With --only-progress it sends the resends alone: run it beside a Knative
ApiServerSource (which sends the rest) with the Broker as its sink. With no
--sink it sends to $K_SINK, as a Knative SinkBinding sets it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(sinks) == 0 {
				if k := os.Getenv("K_SINK"); k != "" {
					sinks = []string{k}
				}
			}
			if len(sinks) == 0 {
				return fmt.Errorf("--sink is required: the URL of a function or broker (repeat for several), or $K_SINK")
			}
			log := zap.New(zap.UseDevMode(devLogs)).WithName("kube-source")
			ctrl.SetLogger(log)
			cfg, err := kf.restConfig()
			if err != nil {
				return err
			}
			return kube.Run(cmd.Context(), kube.Options{Config: cfg, Scheme: scheme.New(), Sinks: sinks, Resync: resync, Progress: progress, OnlyProgress: onlyProgress, Log: log, TokenFile: tokenFile})
		},
	}
	kubeCmd.Flags().StringArrayVar(&sinks, "sink", nil, "URL to POST events to (repeatable)")
	kubeCmd.Flags().DurationVar(&resync, "resync", 5*time.Minute, "how often to send a resync event (0: never)")
	kubeCmd.Flags().DurationVar(&progress, "progress", kube.DefaultProgress, "how often to send each running mover Job again, so its run's status.progress refreshes (0: never)")
	kubeCmd.Flags().BoolVar(&onlyProgress, "only-progress", false, "send only the resends of running mover Jobs (beside a Knative ApiServerSource); watches Jobs alone")
	kubeCmd.Flags().BoolVar(&devLogs, "dev-logs", false, "human-readable logs instead of JSON")
	kubeCmd.Flags().StringVar(&tokenFile, "token-file", "", tokenFileHelp)
	var schedule, data string
	tickCmd := &cobra.Command{
		Use:   "tick",
		Short: "POST a PingSource-shaped tick to the sinks on a cron schedule (every minute by default)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(sinks) == 0 {
				return fmt.Errorf("--sink is required: the URL of a function or broker (repeat for several)")
			}
			log := zap.New(zap.UseDevMode(devLogs)).WithName("tick-source")
			to, err := sink.New(sinks, log, tokenFile)
			if err != nil {
				return err
			}
			return tick.Run(cmd.Context(), tick.Options{Schedule: schedule, Data: data, Log: log}, to)
		},
	}
	tickCmd.Flags().StringArrayVar(&sinks, "sink", nil, "URL to POST ticks to (repeatable)")
	tickCmd.Flags().StringVar(&schedule, "schedule", "* * * * *", "5-field cron (UTC) of the ticks")
	tickCmd.Flags().StringVar(&data, "data", "", "JSON payload of each tick")
	tickCmd.Flags().BoolVar(&devLogs, "dev-logs", false, "human-readable logs instead of JSON")
	tickCmd.Flags().StringVar(&tokenFile, "token-file", "", tokenFileHelp)
	cmd.AddCommand(kubeCmd, tickCmd, newSourceS3Cmd())
	return cmd
}

const tokenFileHelp = "file holding the bearer token sent with every event (a projected ServiceAccount token with the functions' --sender-audience; re-read as it rotates)"

// loopback turns a listen address like [::]:8080 into one a local client can dial.
func loopback(addr string) string {
	if i := strings.LastIndex(addr, ":"); i >= 0 {
		host := addr[:i]
		if host == "" || host == "[::]" || host == "0.0.0.0" || host == "::" {
			return "127.0.0.1" + addr[i:]
		}
	}
	return addr
}
