package harness

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/snapflow/snapflow/events"
	"github.com/snapflow/snapflow/events/sources/kube"
	"github.com/snapflow/snapflow/functions/cleanup"
	"github.com/snapflow/snapflow/functions/host"
	"github.com/snapflow/snapflow/functions/maintenance"
	"github.com/snapflow/snapflow/functions/restore"
	"github.com/snapflow/snapflow/functions/retention"
	"github.com/snapflow/snapflow/functions/schedule"
	"github.com/snapflow/snapflow/functions/snapshot"
	"github.com/snapflow/snapflow/functions/verify"
	"github.com/snapflow/snapflow/internal/egress"
	"github.com/snapflow/snapflow/internal/image"
	"github.com/snapflow/snapflow/internal/jobwatch"
	maintkernel "github.com/snapflow/snapflow/internal/maintenance"
	"github.com/snapflow/snapflow/internal/prune/ledger"
	"github.com/snapflow/snapflow/internal/statemetrics"
	"github.com/snapflow/snapflow/test/localnode"
)

// FunctionsOptions tune StartFunctions.
type FunctionsOptions struct {
	// Resync is the kube source's resync period (short in tests).
	Resync time.Duration
	// MaxConcurrentJobs is the cluster-wide mover cap.
	MaxConcurrentJobs int
	// RepositoryRetry is how soon a Failed repository is first retried, and
	// RepositoryRetryMax the longest it waits as it backs off.
	RepositoryRetry, RepositoryRetryMax time.Duration
	// GlobalVolumePoliciesConfigMap names the global baseline in WebhookNamespace.
	GlobalVolumePoliciesConfigMap string
	// DeleteWindow is the cleanup function's quiet window (short in tests).
	DeleteWindow time.Duration
	// Clock is the schedule function's clock (time.Now when nil).
	Clock func() time.Time
	// Extra adds functions served next to the built-in ones, on /<name>.
	Extra func(Deps) []host.Function
	// RBAC, when set, is applied before the functions start (ServiceAccounts,
	// ClusterRoles and bindings, as the chart renders them), and each
	// built-in function and the kube source then act as the user Identity
	// names for it instead of as the suite's admin.
	RBAC []byte
	// Identity maps "snapshot", ..., "kube-source" to the user to
	// impersonate; an empty name keeps the admin.
	Identity func(component string) string
	// PodsAsServiceAccounts makes the local node run each container as its
	// pod's ServiceAccount (see localnode.Options.AsServiceAccount).
	PodsAsServiceAccounts bool
	// MoverServiceAccount is the ServiceAccount mover Jobs run as ("default"
	// when empty).
	MoverServiceAccount string
	// TenantRBAC, when set, returns what each new namespace gets (its mover
	// ServiceAccount and binding); see provisionTenants.
	TenantRBAC func(namespace string) []byte
	// SenderAudience, when set, makes the functions check every sender's
	// bearer token for it (host.Authenticator), trusting TrustedSenders;
	// the kube source then sends a token of SourceServiceAccount (a
	// ServiceAccount of WebhookNamespace), as the chart's does.
	SenderAudience       string
	TrustedSenders       []string
	SourceServiceAccount string
	// EmitterServiceAccount is whose token the snapshot function's events
	// to retention carry (a ServiceAccount of WebhookNamespace).
	EmitterServiceAccount string
}

// Deps are what an Extra function gets from the harness.
type Deps struct {
	// Client is the suite's admin; As is the client of a component's
	// Identity, its requests recorded in Functions.Access.
	Client   client.Client
	As       func(component string) client.Client
	Emitter  host.Emitter
	Recorder func(component string) record.EventRecorder
}

// Functions is the local stack behind a backup: the local node (standing in
// for a kubelet and CSI driver), the functions served over HTTP, and the
// kube source posting events to them.
type Functions struct {
	// URL is the snapshot function's endpoint; Base serves every function on /<name>.
	URL     string
	Base    string
	Node    *localnode.Node
	Emitted *EventLog
	LogPath string
	// MetricsURL is the exporter's /metrics (the gauges derived from the
	// objects), running as the exporter's Identity.
	MetricsURL string
	// SenderAudience is the audience senders' tokens need ("" when the
	// functions serve anyone).
	SenderAudience string
	// Access records the API requests of every component acting as its
	// Identity (the functions and the kube source).
	Access AccessLog
	as     func(component string) (*rest.Config, client.Client)
	cs     kubernetes.Interface
	stop   context.CancelFunc
	wg     sync.WaitGroup
}

// EventLog collects what the functions emit.
type EventLog struct {
	mu     sync.Mutex
	All    []string // "type subject id"
	events []event.Event
}

// Find returns the last emitted event of typ about subject.
func (l *EventLog) Find(typ, subject string) (event.Event, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := len(l.events) - 1; i >= 0; i-- {
		if e := l.events[i]; e.Type() == typ && e.Subject() == subject {
			return e.Clone(), true
		}
	}
	return event.Event{}, false
}

// Types lists the emitted events as "type subject".
func (l *EventLog) Types() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.All...)
}

// Events returns a copy of every emitted event.
func (l *EventLog) Events() []event.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]event.Event, len(l.events))
	for i, e := range l.events {
		out[i] = e.Clone()
	}
	return out
}

// Emit records e; it is the functions' emitter in tests.
func (l *EventLog) Emit(_ context.Context, e event.Event) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.All = append(l.All, e.Type()+" "+e.Subject()+" "+e.ID())
	l.events = append(l.events, e.Clone())
	return nil
}

// applyRBAC applies the chart's ServiceAccounts, roles and bindings.
func (cp *ControlPlane) applyRBAC(ctx context.Context, rbac []byte) error {
	res, err := cp.Kubectl(ctx, rbac, "apply", "-f", "-")
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("exit %d: %s", res.ExitCode, res.Stderr)
	}
	if err != nil {
		return fmt.Errorf("apply the chart's RBAC: %w", err)
	}
	return nil
}

// StartFunctions starts the local node, the functions and the kube source.
// Mover Jobs run bin/snapflow, so `make build` must have run.
func (cp *ControlPlane) StartFunctions(o FunctionsOptions) (*Functions, error) {
	snapflowBin, err := Tool("snapflow")
	if err != nil {
		return nil, err
	}
	if o.Resync == 0 {
		o.Resync = 2 * time.Second
	}
	ctx, stop := context.WithCancel(context.Background())
	f := &Functions{stop: stop, Emitted: &EventLog{}, LogPath: filepath.Join(cp.WorkDir, "functions.log")}
	logFile, err := os.Create(f.LogPath)
	if err != nil {
		stop()
		return nil, err
	}
	var mu sync.Mutex
	log := logr.Logger(funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintln(logFile, time.Now().Format("15:04:05.000"), prefix, args)
	}, funcr.Options{Verbosity: 1}))

	nodeRoot := filepath.Join(cp.WorkDir, "node")
	for _, d := range []string{nodeRoot, filepath.Join(nodeRoot, "logs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			stop()
			return nil, err
		}
	}
	// Containers run as their users when the node may switch users, so a
	// mover reads only what its identity may; the work directory above
	// the node's must then be passable (not readable) by them.
	asUsers := os.Geteuid() == 0
	if asUsers {
		if err := os.Chmod(cp.WorkDir, 0o711); err != nil {
			stop()
			return nil, err
		}
	}
	var moverRT *localnode.Runtime
	if asUsers {
		if moverRT, err = moverRuntime(snapflowBin, filepath.Join(nodeRoot, "image")); err != nil {
			stop()
			return nil, err
		}
	}
	// The node creates the Jobs' pods as the Job controller does on a
	// cluster (kube-controller-manager with service account credentials),
	// with the rights the API server's bootstrap RBAC gives it: the webhook
	// refuses snapflow-labelled pods from anyone else.
	jobController, err := cp.ClientAs(JobControllerUser)
	if err != nil {
		stop()
		return nil, err
	}
	f.Node = localnode.New(localnode.Options{Client: cp.Client, JobController: jobController, Root: nodeRoot, Kubeconfig: cp.Kubeconfig, AsServiceAccount: o.PodsAsServiceAccounts, RunAsPodUser: asUsers,
		Binaries: map[string]string{"snapflow": snapflowBin}, Runtime: moverRT, Log: log.WithName("node")})
	if err := f.Node.ServeExec(ctx); err != nil {
		stop()
		return nil, err
	}
	f.wg.Add(1)
	go func() { defer f.wg.Done(); f.Node.Run(ctx) }()

	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		stop()
		return nil, err
	}
	// The functions' events reach the retention function as a broker would
	// deliver them; the test log sees them too.
	toRetention := &host.LateSink{}
	if len(o.RBAC) > 0 {
		if err := cp.applyRBAC(ctx, o.RBAC); err != nil {
			stop()
			return nil, err
		}
	}
	if o.TenantRBAC != nil {
		if err := provisionTenants(ctx, cs, cp.Client, o.TenantRBAC, log.WithName("tenants")); err != nil {
			stop()
			return nil, err
		}
	}
	as := func(component string) (*rest.Config, client.Client) {
		user := ""
		if o.Identity != nil {
			user = o.Identity(component)
		}
		if user == "" {
			return cp.Config, cp.Client
		}
		cfg := rest.CopyConfig(cp.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
		cfg.Wrap(f.Access.Wrap(component))
		c, err := client.New(cfg, client.Options{Scheme: cp.Scheme})
		if err != nil {
			panic(fmt.Sprintf("client for %s: %v", user, err)) // only a malformed config gets here
		}
		return cfg, c
	}
	f.as = as
	// Each component writes its Events as itself, as its pod would.
	recorder := func(component string) record.EventRecorder {
		cfg, _ := as(strings.TrimPrefix(component, "snapflow-"))
		ecs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			panic(fmt.Sprintf("clientset for %s: %v", component, err)) // only a malformed config gets here
		}
		b := record.NewBroadcaster(record.WithContext(ctx))
		b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: ecs.CoreV1().Events("")})
		return b.NewRecorder(cp.Scheme, corev1.EventSource{Component: component})
	}
	snapCfg, snapClient := as("snapshot")
	_, cleanupClient := as("cleanup")
	_, retentionClient := as("retention")
	scheduleCfg, scheduleClient := as("schedule")
	restoreCfg, restoreClient := as("restore")
	_, verifyClient := as("verify")
	_, maintenanceClient := as("maintenance")
	sourceCfg, _ := as("kube-source")
	f.SenderAudience, f.cs = o.SenderAudience, cs
	var auth *host.Authenticator
	tokenFile := ""
	if o.SenderAudience != "" {
		// One server holds every function here, so one identity reviews
		// the tokens for all of them: the snapshot function's.
		reviewer, err := kubernetes.NewForConfig(snapCfg)
		if err != nil {
			stop()
			return nil, err
		}
		auth = &host.Authenticator{Reviewer: reviewer.AuthenticationV1().TokenReviews(), Audience: o.SenderAudience, Trusted: o.TrustedSenders}
		if tokenFile, err = f.tokenFile(ctx, cp.WorkDir, o.SourceServiceAccount); err != nil {
			stop()
			return nil, err
		}
		// The snapshot function's results reach retention as the chart
		// sends them: with the snapshot function's own token.
		if o.EmitterServiceAccount != "" {
			if toRetention.TokenFile, err = f.tokenFile(ctx, cp.WorkDir, o.EmitterServiceAccount); err != nil {
				stop()
				return nil, err
			}
		}
	}
	access := func(cfg *rest.Config) host.AccessReviewer {
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			panic(fmt.Sprintf("clientset: %v", err)) // only a malformed config gets here
		}
		return cs.AuthorizationV1().SubjectAccessReviews()
	}
	logs := func(cfg *rest.Config) jobwatch.LogReader {
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			panic(fmt.Sprintf("clientset: %v", err))
		}
		return jobwatch.KubeLogs{Pods: cs.CoreV1()}
	}
	fn := &snapshot.Function{Client: snapClient, Config: snapCfg, Namespace: WebhookNamespace, MoverImage: MoverImage, MoverServiceAccount: o.MoverServiceAccount,
		// The tests' hook receivers listen on loopback, which a cluster refuses.
		HookEgress: egress.Policy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}},
		// As the e2e chart renders it (functions.snapshot.workloadExecHooks).
		WorkloadExecHooks: true,
		Access:            access(snapCfg), Logs: logs(snapCfg), MaxConcurrentJobs: o.MaxConcurrentJobs, RepositoryRetry: o.RepositoryRetry, RepositoryRetryMax: o.RepositoryRetryMax, GlobalVolumePoliciesConfigMap: o.GlobalVolumePoliciesConfigMap,
		Emitter: host.Fanout{f.Emitted, host.Trigger{Types: retention.Subscribes, Emitter: toRetention}}, Recorder: recorder("snapflow-snapshot")}
	if o.DeleteWindow == 0 {
		o.DeleteWindow = time.Second
	}
	cleanupFn := &cleanup.Function{Client: cleanupClient, Namespace: WebhookNamespace, MoverImage: MoverImage, MoverServiceAccount: o.MoverServiceAccount, Window: o.DeleteWindow,
		Emitter: f.Emitted, Recorder: recorder("snapflow-cleanup")}
	retentionFn := &retention.Function{Client: retentionClient, Emitter: f.Emitted, Recorder: recorder("snapflow-retention")}
	// The global baseline as the functions name it: NAMESPACE/NAME.
	global := ""
	if o.GlobalVolumePoliciesConfigMap != "" {
		global = WebhookNamespace + "/" + o.GlobalVolumePoliciesConfigMap
	}
	// The schedule function reads through informers as deployed, under its
	// chart RBAC.
	scheduleReader, err := host.InformerReader(ctx, scheduleCfg, schedule.Informed()...)
	if err != nil {
		stop()
		return nil, err
	}
	scheduleFn := &schedule.Function{Client: scheduleClient, Reader: scheduleReader, Now: o.Clock, Emitter: f.Emitted, Recorder: recorder("snapflow-schedule"),
		Namespace: WebhookNamespace, GlobalVolumePolicies: global}
	restoreFn := &restore.Function{Access: access(restoreCfg), Logs: logs(restoreCfg), Client: restoreClient, Namespace: WebhookNamespace, MoverImage: MoverImage, MoverServiceAccount: o.MoverServiceAccount, Now: o.Clock,
		Emitter: f.Emitted, Recorder: recorder("snapflow-restore"), WorkloadExec: true}
	verifyFn := &verify.Function{Client: verifyClient, Namespace: WebhookNamespace, MoverImage: MoverImage, MoverServiceAccount: o.MoverServiceAccount, Now: o.Clock,
		Emitter: f.Emitted, Recorder: recorder("snapflow-verify")}
	maintenanceFn := &maintenance.Function{Client: maintenanceClient, Namespace: WebhookNamespace, MoverImage: MoverImage, MoverServiceAccount: o.MoverServiceAccount, Now: o.Clock,
		// Every test's repositories get their default Maintenance, but
		// on a cron that never fires during a run: the suite drives
		// maintenance through run requests, not the wall clock.
		Defaults: maintkernel.Defaults{Quick: "0 0 29 2 *", Full: "0 0 29 2 *"},
		Emitter:  f.Emitted, Recorder: recorder("snapflow-maintenance")}
	fns := []host.Function{{Name: "snapshot", Handle: fn.Handle, Requests: []string{events.SnapshotRequested}}, {Name: "cleanup", Handle: cleanupFn.Handle},
		{Name: "retention", Handle: retentionFn.Handle}, {Name: "schedule", Handle: scheduleFn.Handle},
		{Name: "restore", Handle: restoreFn.Handle, Requests: []string{events.RestoreRequested}},
		{Name: "verify", Handle: verifyFn.Handle}, {Name: "maintenance", Handle: maintenanceFn.Handle}}
	if o.Extra != nil {
		// Functions the harness cannot import (they import packages whose
		// own tests use the harness) are built by the test binary.
		fns = append(fns, o.Extra(Deps{Client: cp.Client, As: f.As, Emitter: f.Emitted,
			Recorder: recorder})...)
	}
	listening := make(chan string, 1)
	errc := make(chan error, 1)
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		errc <- host.Serve(ctx, host.Options{Addr: "127.0.0.1:0", Listening: listening, Auth: auth, Log: log.WithName("functions"), Functions: fns})
	}()
	var sinks []string
	select {
	case addr := <-listening:
		f.Base = "http://" + addr
		f.URL = f.Base + "/snapshot"
		for _, fn := range fns {
			// As in the chart: the prune function is no sink of the kube
			// source, as each of its ticks plans a whole bucket (and lists
			// every claim, volume and VolumeSnapshot of the cluster).
			if fn.Name != "prune" {
				sinks = append(sinks, f.Base+"/"+fn.Name)
			}
		}
		if err := toRetention.Set(f.Base + "/retention"); err != nil {
			stop()
			return nil, err
		}
	case err := <-errc:
		stop()
		return nil, fmt.Errorf("start functions: %w", err)
	}
	// The chart creates the prune function's record; so does the harness,
	// for the demo (the e2e suite applies the chart's).
	record := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: WebhookNamespace, Name: ledger.ConfigMap}}
	if err := cp.Client.Create(ctx, record); err != nil && !apierrors.IsAlreadyExists(err) {
		stop()
		return nil, fmt.Errorf("create the prune record: %w", err)
	}
	exporterCfg, _ := as("exporter")
	exporterAddr := make(chan string, 1)
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		if err := statemetrics.Serve(ctx, statemetrics.Options{Config: exporterCfg, Scheme: cp.Scheme, Addr: "127.0.0.1:0",
			Log: log.WithName("exporter"), Listening: func(a string) { exporterAddr <- a }, Coverage: true, GlobalVolumePolicies: global,
			PruneRecord: WebhookNamespace + "/" + ledger.ConfigMap}); err != nil {
			log.Error(err, "exporter stopped")
		}
	}()
	select {
	case a := <-exporterAddr:
		f.MetricsURL = "http://" + a + "/metrics"
	case <-time.After(30 * time.Second):
		stop()
		return nil, fmt.Errorf("the exporter did not listen within 30s")
	}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		if err := kube.Run(ctx, kube.Options{Config: sourceCfg, Scheme: cp.Scheme, Sinks: sinks, Resync: o.Resync,
			Progress: 5 * time.Second, Log: log.WithName("kube-source"), TokenFile: tokenFile}); err != nil {
			log.Error(err, "kube source stopped")
		}
	}()
	return f, nil
}

// As is a client acting as component's Identity (the suite's admin
// without one), its requests recorded in Access.
func (f *Functions) As(component string) client.Client {
	_, c := f.as(component)
	return c
}

// Token mints a token of ServiceAccount namespace/name for the functions'
// audience, as a projected volume would give a pod of it.
func (f *Functions) Token(ctx context.Context, namespace, name string) (string, error) {
	return f.TokenFor(ctx, namespace, name, f.SenderAudience)
}

// tokenFile writes a token of WebhookNamespace's ServiceAccount sa into
// dir, as a projected token volume holds one, and returns its path.
func (f *Functions) tokenFile(ctx context.Context, dir, sa string) (string, error) {
	token, err := f.Token(ctx, WebhookNamespace, sa)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, sa+".token")
	return path, os.WriteFile(path, []byte(token), 0o600)
}

// TokenFor mints a token of namespace/name for audience.
func (f *Functions) TokenFor(ctx context.Context, namespace, name, audience string) (string, error) {
	exp := int64(12 * 3600)
	tr, err := f.cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authnv1.TokenRequest{
		Spec: authnv1.TokenRequestSpec{Audiences: []string{audience}, ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token of %s/%s: %w", namespace, name, err)
	}
	return tr.Status.Token, nil
}

// Stop stops the source, the functions and the node.
func (f *Functions) Stop() {
	f.stop()
	f.wg.Wait()
}

// Log returns what the functions, the node and the source logged.
func (f *Functions) Log() string {
	b, _ := os.ReadFile(f.LogPath)
	return string(b)
}

// MoverImage is the image the functions give mover Jobs in tests and the
// demo; the local node runs it from an image root built from bin/snapflow.
const MoverImage = "snapflow:e2e"

// moverRuntime writes the mover image's root filesystem from the snapflow
// binary into dir and returns the runtime that runs it under runc. runc is
// required: movers must meet a read-only root, their user and their mounts
// as on a node, not run as host processes instead.
//
// SNAPFLOW_LOCALNODE_RUNTIME=process runs them as host processes instead,
// for a root that cannot run containers (an unprivileged container); the
// tests then do not see what a read-only root or a mount namespace does.
func moverRuntime(snapflowBin, dir string) (*localnode.Runtime, error) {
	if os.Getenv("SNAPFLOW_LOCALNODE_RUNTIME") == "process" {
		fmt.Fprintln(os.Stderr, "harness: SNAPFLOW_LOCALNODE_RUNTIME=process: mover containers run as host processes, not under runc")
		return nil, nil
	}
	runc, err := exec.LookPath("runc")
	if err != nil {
		return nil, fmt.Errorf("runc is missing: the local node runs mover containers with it; run `make tools` as root (it installs runc), or `apt-get install runc` (SNAPFLOW_LOCALNODE_RUNTIME=process runs them as host processes instead)")
	}
	bin, err := os.ReadFile(snapflowBin)
	if err != nil {
		return nil, err
	}
	if err := image.WriteRoot(dir, bin); err != nil {
		return nil, err
	}
	rt := &localnode.Runtime{Runc: runc, Images: map[string]string{MoverImage: dir}, User: [2]uint32{image.UID, image.GID}, Env: image.Env}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := rt.Probe(ctx, MoverImage, filepath.Join(filepath.Dir(dir), "probe"), []string{image.Binary, "version"}); err != nil {
		return nil, fmt.Errorf("%w; SNAPFLOW_LOCALNODE_RUNTIME=process runs movers as host processes instead", err)
	}
	return rt, nil
}
