package cli

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/internal/coverage"
	"github.com/snapflow/snapflow/internal/doctor"
	"github.com/snapflow/snapflow/internal/validate"
)

// functionLabel marks the chart's function Deployments and Knative Services.
const functionLabel = "snapflow.dev/function"

func newDoctorCmd(kube *kubeFlags) *cobra.Command {
	var namespace, probeNamespace, output, global string
	var all bool
	grace := 5 * time.Minute
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check a snapflow installation end to end and say how to fix what is wrong",
		Long: `Check that snapflow works in this cluster: its CRDs are installed and
served; its webhooks carry a CA that is still valid, and the webhook
answers (a server-side dry run of a SnapshotPolicy it must refuse, in the
namespace of -n: nothing is stored); its functions are ready; every
Snapshot and Restore was picked up by a function and every schedule fires
on time (so events arrive, wherever the functions run); every repository
is connected with its stored credentials; this machine's clock agrees with
the API server's; and how many PVCs nothing protects.

The object checks read the namespace of -n (the kubeconfig's by default)
and the ClusterRepositories its policies use, or with -A every namespace
and every ClusterRepository. Each check prints OK, WARN or FAIL, and for
what is wrong, the fix. The exit code is 3 when any check fails. What the
user may not read is reported as a warning, not a failure.`,
		Example: `  snapflow doctor -n apps
  snapflow doctor -A -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			if grace <= 0 {
				return usage(fmt.Errorf("--grace %s: give a positive duration, e.g. 5m", grace))
			}
			scope, err := kube.scope(namespace, all)
			if err != nil {
				return err
			}
			probeNS := probeNamespace
			switch {
			case probeNS != "":
			case all:
				if probeNS, err = kube.namespace(""); err != nil {
					return err
				}
			default:
				probeNS = scope
			}
			cfg, err := kube.restConfig()
			if err != nil {
				return err
			}
			c, err := kube.client()
			if err != nil {
				return err
			}
			facts, err := gatherFacts(cmd.Context(), cfg, c, scope, probeNS, global, grace)
			if err != nil {
				return err
			}
			rep := doctor.Run(facts)
			if output != OutputTable {
				if err := printStructured(cmd.OutOrStdout(), output, rep); err != nil {
					return err
				}
			} else {
				printDoctor(cmd.OutOrStdout(), rep)
			}
			if rep.Failed > 0 {
				return exitError{code: 3, msg: fmt.Sprintf("%d check(s) failed", rep.Failed)}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&namespace, "namespace", "n", "", "namespace whose objects to check (default: the kubeconfig's)")
	f.StringVar(&probeNamespace, "probe-namespace", "", "namespace to probe the webhook in (default: -n, or the kubeconfig's with -A); snapflow's own namespace is skipped by its webhook")
	f.BoolVarP(&all, "all-namespaces", "A", false, "check the objects of every namespace and every ClusterRepository (the webhook is probed in the kubeconfig's namespace)")
	f.StringVarP(&output, "output", "o", OutputTable, "output format: table, json or yaml")
	f.DurationVar(&grace, "grace", grace, "how long an object may wait for a function, or a schedule stay overdue, before it counts as a failure")
	f.StringVar(&global, "global-volume-policies", "", "the global volume-policy ConfigMap as NAMESPACE/NAME, so its skip rules count as exclusions in the coverage check")
	return cmd
}

// gatherFacts reads what the checks judge; scope is the namespace whose
// objects are read ("" for all): with one namespace, the
// ClusterRepositories its policies use. What the user may not read is
// recorded as unread, and its checks warn instead of judging.
func gatherFacts(ctx context.Context, cfg *rest.Config, c client.Client, scope, ns, global string, grace time.Duration) (doctor.Facts, error) {
	f := doctor.Facts{Now: time.Now(), Grace: grace, ProbeNamespace: ns}
	crds, err := servedKinds(cfg)
	if err != nil {
		return f, err
	}
	f.CRDs = crds
	var probeHook *admissionv1.ValidatingWebhook
	if f.Webhooks, probeHook, err = webhookConfigs(ctx, c); apierrors.IsForbidden(err) {
		f.WebhooksSkipped = fmt.Sprintf("you may not list webhook configurations (%v)", err)
	} else if err != nil {
		return f, err
	}
	f.ProbeSkipped, f.ProbeIgnored = probeCovered(ctx, c, ns, probeHook)
	if f.ProbeSkipped == "" {
		f.Probe, f.ProbeSkipped = probeWebhook(ctx, c, ns)
	}
	f.Functions, f.FunctionsSkipped = deployedFunctions(ctx, c)
	f.Sources, f.SourcesSkipped = deployedSources(ctx, c)
	f.RBACSkipped = checkBindings(ctx, c, f.Functions, f.Sources)
	// Ages and deadlines are judged on the API server's clock, which the
	// functions share; the clock check says how far this machine's is off.
	if f.ServerTime = serverTime(ctx, cfg); f.ServerTime != nil {
		local := f.Now
		f.Now = *f.ServerTime
		f.LocalTime = &local
	}

	lists := []struct {
		what string
		list client.ObjectList
	}{
		{"Repositories", &snapv1.RepositoryList{}}, {"ClusterRepositories", &snapv1.ClusterRepositoryList{}},
		{"SnapshotSchedules", &snapv1.SnapshotScheduleList{}}, {"Snapshots", &snapv1.SnapshotList{}}, {"Restores", &snapv1.RestoreList{}},
		{"SnapshotPolicies", &snapv1.SnapshotPolicyList{}},
	}
	where := "in namespace " + scope
	if scope == "" {
		where = "in every namespace"
	}
	for _, l := range lists {
		err := c.List(ctx, l.list, client.InNamespace(scope))
		switch {
		case apierrors.IsForbidden(err):
			f.Unread = append(f.Unread, l.what+" "+where)
		case err != nil && !meta.IsNoMatchError(err):
			return f, fmt.Errorf("list %s %s: %w", l.what, where, err)
		}
	}
	f.Repositories = lists[0].list.(*snapv1.RepositoryList).Items
	f.ClusterRepositories = lists[1].list.(*snapv1.ClusterRepositoryList).Items
	f.Schedules = lists[2].list.(*snapv1.SnapshotScheduleList).Items
	f.Snapshots = lists[3].list.(*snapv1.SnapshotList).Items
	f.Restores = lists[4].list.(*snapv1.RestoreList).Items
	if scope != "" {
		f.ClusterRepositories = usedClusterRepositories(f.ClusterRepositories, lists[5].list.(*snapv1.SnapshotPolicyList).Items)
	}

	if in, _, err := coverage.Read(ctx, c, scope, global, coverage.ReadOptions{}); err != nil {
		f.Unread = append(f.Unread, fmt.Sprintf("PVCs and policies for the coverage check (%v)", err))
	} else {
		n := coverage.Counts(coverage.Verdicts(in))[coverage.Unprotected]
		f.Unprotected = &n
	}
	return f, nil
}

// usedClusterRepositories keeps the ClusterRepositories pols write to.
func usedClusterRepositories(crs []snapv1.ClusterRepository, pols []snapv1.SnapshotPolicy) []snapv1.ClusterRepository {
	used := map[string]bool{}
	for i := range pols {
		for _, ref := range validate.PolicyRefs(&pols[i]) {
			if ref.Kind == snapv1.KindClusterRepository {
				used[ref.Name] = true
			}
		}
	}
	var out []snapv1.ClusterRepository
	for _, cr := range crs {
		if used[cr.Name] {
			out = append(out, cr)
		}
	}
	return out
}

// servedKinds reads which of snapflow's kinds the API server serves, from
// discovery: a CRD that is not established is not served.
func servedKinds(cfg *rest.Config) ([]doctor.CRD, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("discovery client: %w", err)
	}
	served := map[string][]string{}
	groups, err := dc.ServerGroups()
	if err != nil {
		return nil, fmt.Errorf("read the API server's groups: %w", err)
	}
	for _, g := range groups.Groups {
		if g.Name != snapv1.GroupVersion.Group {
			continue
		}
		for _, v := range g.Versions {
			res, err := dc.ServerResourcesForGroupVersion(v.GroupVersion)
			if err != nil {
				return nil, fmt.Errorf("read the resources of %s: %w", v.GroupVersion, err)
			}
			for _, r := range res.APIResources {
				if !strings.Contains(r.Name, "/") {
					served[r.Name] = append(served[r.Name], v.Version)
				}
			}
		}
	}
	out := make([]doctor.CRD, 0, len(doctor.Resources))
	for _, r := range doctor.Resources {
		v, ok := served[r]
		out = append(out, doctor.CRD{Name: r + "." + snapv1.GroupVersion.Group, Found: ok, Established: ok, Served: v})
	}
	return out, nil
}

// webhookConfigs are the admission configurations holding a *.snapflow.dev
// webhook, and the webhook the probe must meet (nil when none is registered).
func webhookConfigs(ctx context.Context, c client.Client) ([]doctor.WebhookConfig, *admissionv1.ValidatingWebhook, error) {
	var vs admissionv1.ValidatingWebhookConfigurationList
	if err := c.List(ctx, &vs); err != nil {
		return nil, nil, fmt.Errorf("list ValidatingWebhookConfigurations: %w", err)
	}
	var ms admissionv1.MutatingWebhookConfigurationList
	if err := c.List(ctx, &ms); err != nil {
		return nil, nil, fmt.Errorf("list MutatingWebhookConfigurations: %w", err)
	}
	var probeHook *admissionv1.ValidatingWebhook
	for i := range vs.Items {
		for j := range vs.Items[i].Webhooks {
			if vs.Items[i].Webhooks[j].Name == probeValidatingWebhook {
				probeHook = &vs.Items[i].Webhooks[j]
			}
		}
	}
	var out []doctor.WebhookConfig
	add := func(kind, name string, hooks map[string][]byte) {
		cfg := doctor.WebhookConfig{Kind: kind, Name: name}
		for _, h := range slices.Sorted(maps.Keys(hooks)) {
			if strings.HasSuffix(h, ".snapflow.dev") {
				cfg.CABundles = append(cfg.CABundles, hooks[h])
			}
		}
		if len(cfg.CABundles) > 0 {
			out = append(out, cfg)
		}
	}
	for _, v := range vs.Items {
		hooks := map[string][]byte{}
		for _, w := range v.Webhooks {
			hooks[w.Name] = w.ClientConfig.CABundle
		}
		add("ValidatingWebhookConfiguration", v.Name, hooks)
	}
	for _, m := range ms.Items {
		hooks := map[string][]byte{}
		for _, w := range m.Webhooks {
			hooks[w.Name] = w.ClientConfig.CABundle
		}
		add("MutatingWebhookConfiguration", m.Name, hooks)
	}
	return out, probeHook, nil
}

// probeValidatingWebhook is the webhook the probe must meet.
const probeValidatingWebhook = "snapshotpolicies.validate.snapflow.dev"

// probeCovered says why the probe cannot tell anything in namespace ns
// (it does not exist, or snapflow's webhook leaves it out: snapflow's own
// namespace always is), and whether that webhook admits on failure.
func probeCovered(ctx context.Context, c client.Client, ns string, hook *admissionv1.ValidatingWebhook) (skipped string, ignored bool) {
	if hook == nil {
		return "", false
	}
	ignored = hook.FailurePolicy != nil && *hook.FailurePolicy == admissionv1.Ignore
	var nsObj corev1.Namespace
	switch err := c.Get(ctx, client.ObjectKey{Name: ns}, &nsObj); {
	case apierrors.IsNotFound(err):
		return fmt.Sprintf("namespace %q does not exist", ns), ignored
	case err != nil:
		return "", ignored // the probe's own answer will say more
	}
	if sel := hook.NamespaceSelector; sel != nil {
		if s, err := metav1.LabelSelectorAsSelector(sel); err == nil && !s.Matches(labels.Set(nsObj.Labels)) {
			return fmt.Sprintf("namespace %q is left out by %s's namespaceSelector (snapflow's own namespace always is), so the webhook never sees objects there", ns, probeValidatingWebhook), ignored
		}
	}
	return "", ignored
}

// probeWebhook asks the API server to dry-run a SnapshotPolicy only the
// webhook refuses (it names another namespace's Repository); the answer
// tells whether the webhook is reachable and trusted.
func probeWebhook(ctx context.Context, c client.Client, ns string) (answer error, skipped string) { //nolint:staticcheck // the error is the finding, not a failure of the probe
	p := &snapv1.SnapshotPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "snapflow-doctor-probe"},
		Spec: snapv1.SnapshotPolicySpec{
			Repository: &snapv1.RepositoryRef{Kind: snapv1.KindRepository, Name: "snapflow-doctor-probe", Namespace: ns + "-snapflow-doctor-elsewhere"},
			Sources:    []snapv1.Source{{PVC: &snapv1.LocalObjectRef{Name: "snapflow-doctor-probe"}}},
		},
	}
	err := c.Create(ctx, p, client.DryRunAll)
	switch {
	case apierrors.IsForbidden(err) && !strings.Contains(err.Error(), doctor.ProbeMarker):
		return nil, fmt.Sprintf("you may not create SnapshotPolicies in namespace %q (%v)", ns, err)
	case meta.IsNoMatchError(err):
		return nil, "the SnapshotPolicy kind is not installed"
	case apierrors.IsAlreadyExists(err):
		return nil, fmt.Sprintf("a SnapshotPolicy named %s already exists in namespace %q", p.Name, ns)
	}
	return err, ""
}

// serverTime reads the API server's clock from the Date header of /version.
func serverTime(ctx context.Context, cfg *rest.Config) *time.Time {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+"/version", http.NoBody)
	if err != nil {
		return nil
	}
	res, err := hc.Do(req)
	if err != nil {
		return nil
	}
	_ = res.Body.Close()
	t, err := http.ParseTime(res.Header.Get("Date"))
	if err != nil {
		return nil
	}
	return &t
}

func printDoctor(w io.Writer, rep doctor.Report) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tSTATUS\tDETAIL")
	for _, c := range rep.Checks {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Name, c.Status, c.Detail)
	}
	_ = tw.Flush()
	for _, c := range rep.Checks {
		if c.Fix != "" && c.Status != doctor.OK {
			fmt.Fprintf(w, "\n%s (%s): %s\n", c.Name, c.Status, c.Fix)
		}
	}
	fmt.Fprintf(w, "\n%d failed, %d warned, %d checks\n", rep.Failed, rep.Warned, len(rep.Checks))
}
