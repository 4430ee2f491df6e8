// Package doctor judges whether a snapflow installation works, from facts
// the CLI gathers: each check says what it found and, when something is
// wrong, what to do about it. It reads no cluster and no clock of its own.
package doctor

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
)

// Status is a check's verdict.
type Status string

// Verdicts, from best to worst.
const (
	OK   Status = "OK"
	Warn Status = "WARN"
	Fail Status = "FAIL"
)

// Check is one finding.
type Check struct {
	Name   string `json:"name"`
	Status Status `json:"status"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

// Report is every check, in the order they ran.
type Report struct {
	Checks []Check `json:"checks"`
	Failed int     `json:"failed"`
	Warned int     `json:"warned"`
}

func (r *Report) add(c Check) {
	r.Checks = append(r.Checks, c)
	switch c.Status {
	case Fail:
		r.Failed++
	case Warn:
		r.Warned++
	}
}

// Resources are the plural names of snapflow's kinds, whose
// CustomResourceDefinitions are named <plural>.<group>.
var Resources = []string{"clusterrepositories", "maintenances", "repositories", "restores", "snapshotpolicies", "snapshots", "snapshotschedules"}

// CRD is what the doctor needs of one CustomResourceDefinition.
type CRD struct {
	Name        string
	Found       bool
	Established bool
	// Served are the versions the API server serves.
	Served []string
}

// WebhookConfig is one admission configuration holding snapflow's webhooks.
type WebhookConfig struct {
	Kind string // ValidatingWebhookConfiguration or MutatingWebhookConfiguration
	Name string
	// CABundles are the caBundle of each of its snapflow webhooks.
	CABundles [][]byte
}

// Workload is one deployed component: a function (a Deployment or a
// Knative Service) or an event source (the kube or S3 source Deployment,
// an ApiServerSource or PingSource).
type Workload struct {
	Kind, Namespace, Name string
	Ready                 bool
	// Why says what is not ready.
	Why string
	// ServiceAccount it runs as ("" for Knative's own sources); RBAC says
	// what is wrong with that account's bindings, "" when each binding
	// names a role that exists and there is at least one.
	ServiceAccount string
	RBAC           string
}

// Facts are what the CLI read.
type Facts struct {
	// Now is the API server's time when it was read, else this machine's;
	// LocalTime is this machine's when they differ.
	Now        time.Time
	LocalTime  *time.Time
	ServerTime *time.Time
	// Grace is how long an object may wait for a function before the
	// doctor calls it unhandled.
	Grace time.Duration

	CRDs     []CRD
	Webhooks []WebhookConfig
	// WebhooksSkipped says why the webhook configurations were not read.
	WebhooksSkipped string
	// Unread names what the user may not read; the checks that need it
	// judge only what was read.
	Unread []string
	// Probe is the API server's answer to a dry-run create the webhook must
	// refuse; ProbeNamespace is where it was tried. ProbeSkipped says why
	// it was not tried.
	Probe          error
	ProbeNamespace string
	ProbeSkipped   string
	// ProbeIgnored: snapflow's validating webhook for SnapshotPolicies
	// has failurePolicy Ignore, so an unreachable webhook admits the probe.
	ProbeIgnored bool
	// Functions and event sources found in the cluster; the Skipped
	// fields say why they were not read.
	Functions        []Workload
	FunctionsSkipped string
	Sources          []Workload
	SourcesSkipped   string
	// RBACSkipped says why the components' bindings were not read.
	RBACSkipped string

	Repositories        []snapv1.Repository
	ClusterRepositories []snapv1.ClusterRepository
	Schedules           []snapv1.SnapshotSchedule
	Snapshots           []snapv1.Snapshot
	Restores            []snapv1.Restore
	// Unprotected counts PVCs no policy backs up and no rule excludes;
	// nil when coverage was not read.
	Unprotected *int
}

// ProbeMarker is a phrase of the refusal the webhook gives the probe (a
// SnapshotPolicy naming another namespace's Repository): the webhook, and
// nothing before it, refuses with it.
const ProbeMarker = "serves only its own namespace"

// Run judges the facts.
func Run(f Facts) Report {
	var r Report
	if len(f.Unread) > 0 {
		r.add(Check{Name: "access", Status: Warn, Detail: "not read, so not judged: " + strings.Join(f.Unread, "; "),
			Fix: "run the doctor as a user who may read snapflow's objects there (an administrator, or with -n a namespace you may read)"})
	}
	r.add(crds(f.CRDs))
	if f.WebhooksSkipped != "" {
		r.add(Check{Name: "webhook-ca", Status: Warn, Detail: "not read: " + f.WebhooksSkipped,
			Fix: "run the doctor as a user who may list Mutating and ValidatingWebhookConfigurations; the webhook probe still tells whether admission works"})
	} else {
		r.add(caBundles(f.Webhooks, f.Now))
	}
	r.add(probe(f))
	r.add(functions(f))
	r.add(sources(f))
	r.add(rbac(f))
	r.add(handled(f))
	r.add(schedules(f))
	r.add(repositories(f))
	r.add(clock(f))
	if f.Unprotected != nil {
		c := Check{Name: "coverage", Status: OK, Detail: "every PVC is backed up or excluded by a named rule"}
		if n := *f.Unprotected; n > 0 {
			c = Check{Name: "coverage", Status: Warn, Detail: fmt.Sprintf("%d PVC(s) are backed up by no policy and excluded by no rule", n),
				Fix: "run `snapflow coverage -A` to list them; add a SnapshotPolicy, or annotate the PVC or namespace snapflow.dev/backup-not-required=true"}
		}
		r.add(c)
	}
	return r
}

func crds(found []CRD) Check {
	byName := map[string]CRD{}
	for _, c := range found {
		byName[c.Name] = c
	}
	var missing, unready, unserved []string
	for _, res := range Resources {
		name := res + "." + snapv1.GroupVersion.Group
		c, ok := byName[name]
		switch {
		case !ok || !c.Found:
			missing = append(missing, name)
		case !c.Established:
			unready = append(unready, name)
		case !slices.Contains(c.Served, snapv1.GroupVersion.Version):
			unserved = append(unserved, fmt.Sprintf("%s (serves %s)", name, strings.Join(c.Served, ", ")))
		}
	}
	switch {
	case len(missing) > 0:
		return Check{Name: "crds", Status: Fail, Detail: "missing: " + strings.Join(missing, ", "),
			Fix: "install the CRDs: helm upgrade --install with the snapflow chart (its crds/ directory), or kubectl apply -f config/crd/bases"}
	case len(unready) > 0:
		return Check{Name: "crds", Status: Fail, Detail: "not established: " + strings.Join(unready, ", "),
			Fix: "kubectl describe crd NAME shows why the API server has not accepted it (a name conflict, an invalid schema)"}
	case len(unserved) > 0:
		return Check{Name: "crds", Status: Fail, Detail: "version " + snapv1.GroupVersion.Version + " not served: " + strings.Join(unserved, ", "),
			Fix: "apply the CRDs of this snapflow version"}
	}
	return Check{Name: "crds", Status: OK, Detail: fmt.Sprintf("all %d kinds installed and serving %s", len(Resources), snapv1.GroupVersion.Version)}
}

// caBundles checks that every snapflow webhook carries a CA that can
// still verify a serving certificate.
func caBundles(configs []WebhookConfig, now time.Time) Check {
	if len(configs) == 0 {
		return Check{Name: "webhook-ca", Status: Fail, Detail: "no admission configuration holds snapflow's webhooks (*.snapflow.dev): nothing validates or defaults snapflow's objects",
			Fix: "install the chart (or config/webhook) so the Mutating and ValidatingWebhookConfigurations exist"}
	}
	var bad []string
	soonest := time.Time{}
	for _, c := range configs {
		for i, b := range c.CABundles {
			until, err := bundleValidUntil(b, now)
			if err != nil {
				bad = append(bad, fmt.Sprintf("%s %s webhook %d: %v", c.Kind, c.Name, i, err))
				continue
			}
			if soonest.IsZero() || until.Before(soonest) {
				soonest = until
			}
		}
	}
	if len(bad) > 0 {
		return Check{Name: "webhook-ca", Status: Fail, Detail: strings.Join(bad, "; "),
			Fix: "the API server cannot trust the webhook: with webhook.tls.mode self restart the webhook so it writes its CA again; with cert-manager check its CA injector; with manual set webhook.tls.manual.ca"}
	}
	left := soonest.Sub(now)
	if left < 14*24*time.Hour {
		return Check{Name: "webhook-ca", Status: Warn, Detail: fmt.Sprintf("a webhook CA expires in %s", duration.HumanDuration(left)),
			Fix: "rotate the webhook's CA before it expires, or admission of snapflow's objects stops"}
	}
	return Check{Name: "webhook-ca", Status: OK, Detail: fmt.Sprintf("%d configuration(s), CA valid for %s", len(configs), duration.HumanDuration(left))}
}

// bundleValidUntil is when the last certificate of a PEM bundle that is
// valid now expires.
func bundleValidUntil(b []byte, now time.Time) (time.Time, error) {
	if len(strings.TrimSpace(string(b))) == 0 {
		return time.Time{}, fmt.Errorf("caBundle is empty")
	}
	var until time.Time
	var certs, expired int
	for rest := b; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return time.Time{}, fmt.Errorf("caBundle holds a certificate that does not parse: %w", err)
		}
		certs++
		if now.Before(cert.NotBefore) || now.After(cert.NotAfter) {
			expired++
			continue
		}
		if cert.NotAfter.After(until) {
			until = cert.NotAfter
		}
	}
	switch {
	case certs == 0:
		return time.Time{}, fmt.Errorf("caBundle holds no PEM certificate")
	case until.IsZero():
		return time.Time{}, fmt.Errorf("every certificate of the caBundle (%d) is expired or not yet valid", expired)
	}
	return until, nil
}

func probe(f Facts) Check {
	c := Check{Name: "webhook"}
	switch {
	case f.ProbeSkipped != "":
		c.Status, c.Detail = Warn, "not probed: "+f.ProbeSkipped
		c.Fix = "run the doctor as a user who may create SnapshotPolicies (a server-side dry run: nothing is stored), with --probe-namespace naming a namespace the webhook covers (not snapflow's own)"
		return c
	case f.Probe == nil && f.ProbeIgnored:
		c.Status = Fail
		c.Detail = fmt.Sprintf("a dry-run SnapshotPolicy the webhook must refuse was accepted in namespace %q; its failurePolicy is Ignore, so the webhook is most likely unreachable and objects are admitted unchecked", f.ProbeNamespace)
		c.Fix = "check the webhook's pods and Service (kubectl get pods,svc -l app.kubernetes.io/component=webhook in snapflow's namespace)"
		return c
	case f.Probe == nil:
		c.Status = Fail
		c.Detail = fmt.Sprintf("a dry-run SnapshotPolicy the webhook must refuse was accepted in namespace %q: the webhook did not see it", f.ProbeNamespace)
		c.Fix = "check that snapflow's ValidatingWebhookConfiguration exists and that its rules cover snapshotpolicies"
		return c
	}
	msg := f.Probe.Error()
	lower := strings.ToLower(msg)
	// Another webhook (a policy engine, say) may be the one that failed.
	ours := strings.Contains(lower, "failed calling webhook") && strings.Contains(lower, `.snapflow.dev"`)
	switch {
	case strings.Contains(msg, ProbeMarker):
		c.Status, c.Detail = OK, fmt.Sprintf("answered in namespace %q, refusing a dry-run SnapshotPolicy as it should", f.ProbeNamespace)
	case ours && (strings.Contains(lower, "x509") || strings.Contains(lower, "certificate")):
		c.Status, c.Detail = Fail, "the API server does not trust the webhook's certificate: "+msg
		c.Fix = "the caBundle does not match the webhook's serving certificate: with webhook.tls.mode self restart the webhook so it writes its CA again; with cert-manager check the Certificate and the CA injector"
	case ours:
		c.Status, c.Detail = Fail, "the API server cannot reach the webhook: "+msg
		c.Fix = "check the webhook's pods and Service (kubectl get pods,svc -l app.kubernetes.io/component=webhook in snapflow's namespace) and any NetworkPolicy in front of it"
	default:
		c.Status, c.Detail = Warn, "the dry run was refused, but not by snapflow's webhook: "+msg
		c.Fix = "read the message: the CRD schema or another admission controller refused the probe first"
	}
	return c
}

func functions(f Facts) Check {
	c := Check{Name: "functions"}
	if f.FunctionsSkipped != "" {
		c.Status, c.Detail = Warn, "not read: "+f.FunctionsSkipped
		return c
	}
	if len(f.Functions) == 0 {
		c.Status, c.Detail = Warn, "no Deployment or Knative Service labelled snapflow.dev/function was found; if the functions run outside the cluster, the events check below tells whether they work"
		c.Fix = "install the chart; with knative.enabled the functions are Knative Services, otherwise Deployments"
		return c
	}
	if down := notReady(f.Functions); len(down) > 0 {
		c.Status, c.Detail = Fail, "not ready: "+strings.Join(down, "; ")
		c.Fix = "kubectl describe the named object and its pods; a function that is down handles no events, so backups, restores or deletions wait"
		return c
	}
	c.Status, c.Detail = OK, fmt.Sprintf("%d function(s) ready", len(f.Functions))
	return c
}

func notReady(ws []Workload) []string {
	var down []string
	for _, w := range ws {
		if !w.Ready {
			down = append(down, fmt.Sprintf("%s %s/%s (%s)", w.Kind, w.Namespace, w.Name, w.Why))
		}
	}
	return down
}

// sources checks what feeds the functions events: without them nothing
// starts a backup, however healthy the functions are.
func sources(f Facts) Check {
	c := Check{Name: "sources"}
	switch {
	case f.SourcesSkipped != "":
		c.Status, c.Detail = Warn, "not read: "+f.SourcesSkipped
		return c
	case len(f.Sources) == 0 && len(f.Functions) > 0:
		c.Status, c.Detail = Fail, "the functions run in the cluster, but no event source does (an ApiServerSource and PingSources with Knative, the kube source Deployment without): nothing sends them events"
		c.Fix = "install the chart with its sources (knative.enabled, or kubeSource), or run `snapflow source kube` with --sink pointing at the functions"
		return c
	case len(f.Sources) == 0:
		c.Status, c.Detail = Warn, "no event source was found in the cluster; if they run outside it, the events check tells whether events arrive"
		return c
	}
	if down := notReady(f.Sources); len(down) > 0 {
		c.Status, c.Detail = Fail, "not ready: "+strings.Join(down, "; ")
		c.Fix = "kubectl describe the named source: a source that is not ready sends no events, so Snapshots stay Pending and schedules do not fire"
		return c
	}
	c.Status, c.Detail = OK, fmt.Sprintf("%d source(s) ready", len(f.Sources))
	return c
}

// rbac checks that each component's account is bound to roles that exist:
// a deleted binding or role leaves a running pod that fails every call.
func rbac(f Facts) Check {
	if f.RBACSkipped != "" {
		return Check{Name: "rbac", Status: Warn, Detail: "not read: " + f.RBACSkipped}
	}
	var bad []string
	n := 0
	for _, w := range append(append([]Workload{}, f.Functions...), f.Sources...) {
		if w.ServiceAccount == "" {
			continue
		}
		n++
		if w.RBAC != "" {
			bad = append(bad, fmt.Sprintf("%s %s/%s runs as %s, which %s", w.Kind, w.Namespace, w.Name, w.ServiceAccount, w.RBAC))
		}
	}
	switch {
	case len(bad) > 0:
		sort.Strings(bad)
		return Check{Name: "rbac", Status: Fail, Detail: strings.Join(bad, "; "),
			Fix: "helm upgrade the release (or kubectl apply config/) to restore the chart's Roles and bindings"}
	case n == 0:
		return Check{Name: "rbac", Status: OK, Detail: "no component running in the cluster to check"}
	}
	return Check{Name: "rbac", Status: OK, Detail: fmt.Sprintf("the accounts of %d component(s) are bound to roles that exist", n)}
}

// handled finds Snapshots and Restores no function has looked at: a
// function writes status on its first event, so an object older than
// the grace period with none means its events do not arrive.
func handled(f Facts) Check {
	var stale []string
	var oldest time.Time
	note := func(kind string, m metav1.ObjectMeta) {
		if f.Now.Sub(m.CreationTimestamp.Time) <= f.Grace || m.DeletionTimestamp != nil {
			return
		}
		stale = append(stale, kind+" "+m.Namespace+"/"+m.Name)
		if oldest.IsZero() || m.CreationTimestamp.Time.Before(oldest) {
			oldest = m.CreationTimestamp.Time
		}
	}
	for i := range f.Snapshots {
		// A Snapshot of no policy (discovered, adopted or replicated) is
		// never run, so it never gets a phase.
		if s := &f.Snapshots[i]; s.Status.Phase == "" && s.Spec.PolicyRef != nil {
			note("Snapshot", s.ObjectMeta)
		}
	}
	for i := range f.Restores {
		if rs := &f.Restores[i]; rs.Status.Phase == "" {
			note("Restore", rs.ObjectMeta)
		}
	}
	if len(stale) == 0 {
		return Check{Name: "events", Status: OK, Detail: fmt.Sprintf("every Snapshot and Restore older than %s has been picked up by a function", f.Grace)}
	}
	sort.Strings(stale)
	return Check{Name: "events", Status: Fail,
		Detail: fmt.Sprintf("%d object(s) never picked up, the oldest created %s ago: %s", len(stale), duration.HumanDuration(f.Now.Sub(oldest)), list(stale)),
		Fix:    "the snapshot or restore function is not receiving events, or fails before its first status write: check the functions and their logs, and the ApiServerSource (Knative) or the kube source (snapflow source kube) that feeds them"}
}

func schedules(f Facts) Check {
	var late, held []string
	active := 0
	for i := range f.Schedules {
		s := &f.Schedules[i]
		if s.Spec.Schedule.Suspend || meta.IsStatusConditionTrue(s.Status.Conditions, wellknown.ConditionStalled) {
			continue
		}
		active++
		// A schedule that says why it does not fire (no policy, an invalid
		// cron, a firing refused, a replacement held) is handled: its
		// events arrive, and the condition names the fault.
		if c := meta.FindStatusCondition(s.Status.Conditions, wellknown.ConditionReplacementHeld); c != nil && c.Status == metav1.ConditionTrue {
			held = append(held, fmt.Sprintf("%s/%s: %s", s.Namespace, s.Name, c.Message))
			continue
		}
		if c := meta.FindStatusCondition(s.Status.Conditions, wellknown.ConditionReady); c != nil && c.Status == metav1.ConditionFalse {
			held = append(held, fmt.Sprintf("%s/%s: %s: %s", s.Namespace, s.Name, c.Reason, c.Message))
			continue
		}
		next := s.Status.NextSchedule
		switch {
		case next == nil || next.At == nil:
			if f.Now.Sub(s.CreationTimestamp.Time) > f.Grace {
				late = append(late, fmt.Sprintf("%s/%s never handled", s.Namespace, s.Name))
			}
		case f.Now.Sub(next.At.Time) > f.Grace:
			late = append(late, fmt.Sprintf("%s/%s overdue by %s", s.Namespace, s.Name, duration.HumanDuration(f.Now.Sub(next.At.Time))))
		}
	}
	if len(late) > 0 {
		sort.Strings(late)
		return Check{Name: "schedules", Status: Fail, Detail: list(late),
			Fix: "the schedule function is not getting ticks: check the PingSource (Knative) or the kube source, and the schedule function; without Knative slots fire on the kube source's resync (kubeSource.resync), so give --grace more than that"}
	}
	if len(held) > 0 {
		sort.Strings(held)
		return Check{Name: "schedules", Status: Fail, Detail: "not firing: " + list(held),
			Fix: "each schedule's Ready or ReplacementHeld condition says why; fix its policy or cron, or release the held replacement"}
	}
	return Check{Name: "schedules", Status: OK, Detail: fmt.Sprintf("%d active schedule(s) firing on time", active)}
}

func repositories(f Facts) Check {
	var bad, waiting []string
	judge := func(key string, created metav1.Time, conds []metav1.Condition, suspended bool) {
		if suspended {
			waiting = append(waiting, key+" suspended")
			return
		}
		ready := meta.FindStatusCondition(conds, wellknown.ConditionReady)
		stalled := meta.FindStatusCondition(conds, wellknown.ConditionStalled)
		switch {
		case stalled != nil && stalled.Status == metav1.ConditionTrue:
			bad = append(bad, fmt.Sprintf("%s: %s", key, stalled.Message))
		case ready != nil && ready.Status == metav1.ConditionTrue:
		case f.Now.Sub(created.Time) <= f.Grace:
			waiting = append(waiting, key+" still connecting")
		case ready == nil:
			bad = append(bad, key+": never connected (no Ready condition)")
		default:
			bad = append(bad, fmt.Sprintf("%s: %s", key, ready.Message))
		}
	}
	for i := range f.Repositories {
		r := &f.Repositories[i]
		judge("Repository "+r.Namespace+"/"+r.Name, r.CreationTimestamp, r.Status.Conditions, r.Spec.Suspend)
	}
	for i := range f.ClusterRepositories {
		r := &f.ClusterRepositories[i]
		judge("ClusterRepository "+r.Name, r.CreationTimestamp, r.Status.Conditions, r.Spec.Suspend)
	}
	n := len(f.Repositories) + len(f.ClusterRepositories)
	switch {
	case len(bad) > 0:
		sort.Strings(bad)
		return Check{Name: "repositories", Status: Fail, Detail: strings.Join(bad, "; "),
			Fix: "each message says what failed; a wrong password or key shows as an authentication error: fix the Secret the repository names, and the next connect retries"}
	case len(waiting) > 0:
		sort.Strings(waiting)
		return Check{Name: "repositories", Status: Warn, Detail: list(waiting)}
	}
	return Check{Name: "repositories", Status: OK, Detail: fmt.Sprintf("%d repositor(ies) connected", n)}
}

// clock compares this machine's clock with the API server's: schedules,
// retention ages and "next run" times are computed on both sides.
func clock(f Facts) Check {
	if f.ServerTime == nil {
		return Check{Name: "clock", Status: Warn, Detail: "the API server sent no Date header to compare with"}
	}
	local := f.Now
	if f.LocalTime != nil {
		local = *f.LocalTime
	}
	skew := local.Sub(*f.ServerTime)
	if skew < 0 {
		skew = -skew
	}
	// The Date header has a resolution of one second.
	if skew > 30*time.Second {
		return Check{Name: "clock", Status: Warn, Detail: fmt.Sprintf("this machine's clock is %s off the API server's", skew.Round(time.Second)),
			Fix: "synchronise clocks (NTP): times this CLI shows for next runs and ages are off by as much"}
	}
	return Check{Name: "clock", Status: OK, Detail: fmt.Sprintf("within %s of the API server", skew.Round(time.Second)+time.Second)}
}

func list(items []string) string {
	const most = 5
	if len(items) <= most {
		return strings.Join(items, ", ")
	}
	return strings.Join(items[:most], ", ") + fmt.Sprintf(" and %d more", len(items)-most)
}
