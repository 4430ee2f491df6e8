package snapshot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	authzv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/functions/host"
	"github.com/snapflow/snapflow/internal/egress"
	"github.com/snapflow/snapflow/internal/jobwatch"
	"github.com/snapflow/snapflow/internal/moverjob"
	"github.com/snapflow/snapflow/internal/podexec"
	"github.com/snapflow/snapflow/internal/privilege"
	"github.com/snapflow/snapflow/internal/validate"
)

// Hook lists, as recorded in status.hooks.results.
const (
	ListBefore = "beforeSnapshot"
	ListAfter  = "afterSnapshot"
	// DefaultHookTimeout bounds a hook without its own timeout.
	DefaultHookTimeout = 5 * time.Minute
	reasonHookFailed   = "HookFailed"
)

// hookOutcome is where a hook list stands.
type hookOutcome struct {
	done    bool   // every hook finished (or failed with continueOnFailure)
	failed  string // a hook failed and aborts: why
	pending string // a runJob hook is still running: which
}

// runHooks runs the hooks of list that have no recorded result yet, in
// order. Each hook is first claimed on status with an optimistic lock, so
// of two functions handling the same Snapshot only one runs it. Synchronous
// hooks (httpRequest, workloadExec) run here; a runJob hook is started and
// checked on later events.
func (f *Function) runHooks(ctx context.Context, s *snapv1.Snapshot, pol *snapv1.SnapshotPolicy, list string, hooks []snapv1.Hook) (hookOutcome, error) {
	for i, h := range hooks {
		if r := hookResult(s, list, i); r != nil && !r.Running {
			if !r.Succeeded && !continueOnFailure(h) {
				return hookOutcome{failed: fmt.Sprintf("%s[%d] (%s): %s", list, i, r.Kind, r.Message)}, nil
			}
			continue
		} else if r != nil && r.Running && r.Kind != "runJob" {
			if f.now().Sub(r.At.Time) < hookTimeout(timeoutOf(h))+time.Minute {
				return hookOutcome{pending: fmt.Sprintf("%s[%d] (%s) is running", list, i, r.Kind)}, nil
			}
			// Its runner stopped before reporting: count it as failed.
			if err := f.recordHook(ctx, s, snapv1.HookResult{List: list, Index: int32(i), Kind: r.Kind, Message: "the function running this hook stopped before reporting its result", At: metav1.NewTime(f.now())}); err != nil {
				return hookOutcome{}, err
			}
			if !continueOnFailure(h) {
				return hookOutcome{failed: fmt.Sprintf("%s[%d] (%s): its runner stopped before reporting", list, i, r.Kind)}, nil
			}
			continue
		}
		kind := hookKind(h)
		if kind != "runJob" {
			claimed, err := f.claimHook(ctx, s, list, i, kind)
			if err != nil {
				return hookOutcome{}, err
			}
			if !claimed {
				return hookOutcome{pending: fmt.Sprintf("%s[%d] (%s) is running elsewhere", list, i, kind)}, nil
			}
		}
		ok, msg, pending, err := f.runHook(ctx, s, pol, list, i, h)
		if err != nil {
			return hookOutcome{}, err
		}
		if pending {
			if kind == "runJob" && hookResult(s, list, i) == nil {
				// Its Job is running: mark it, so the run counts as frozen
				// (it keeps its slot) and its afterSnapshot hooks thaw it
				// however it ends.
				if _, err := f.claimHook(ctx, s, list, i, kind); err != nil {
					return hookOutcome{}, err
				}
			}
			return hookOutcome{pending: fmt.Sprintf("%s[%d] (%s) is running", list, i, kind)}, nil
		}
		if err := f.recordHook(ctx, s, snapv1.HookResult{List: list, Index: int32(i), Kind: kind, Succeeded: ok, Message: msg, At: metav1.NewTime(f.now())}); err != nil {
			return hookOutcome{}, err
		}
		if !ok && !continueOnFailure(h) {
			return hookOutcome{failed: fmt.Sprintf("%s[%d] (%s): %s", list, i, kind, msg)}, nil
		}
	}
	return hookOutcome{done: true}, nil
}

func hookKind(h snapv1.Hook) string {
	switch {
	case h.WorkloadExec != nil:
		return "workloadExec"
	case h.RunJob != nil:
		return "runJob"
	case h.HTTPRequest != nil:
		return "httpRequest"
	}
	return "unknown"
}

func timeoutOf(h snapv1.Hook) string {
	switch {
	case h.WorkloadExec != nil:
		return h.WorkloadExec.Timeout
	case h.RunJob != nil:
		return h.RunJob.Timeout
	case h.HTTPRequest != nil:
		return h.HTTPRequest.Timeout
	}
	return ""
}

// claimHook records that this function runs hook (list, i); false when
// another already claimed or finished it.
func (f *Function) claimHook(ctx context.Context, s *snapv1.Snapshot, list string, i int, kind string) (bool, error) {
	claimed := false
	err := f.updateStatus(ctx, s, func(st *snapv1.SnapshotStatus, _ int64) {
		claimed = false
		if st.Hooks == nil {
			st.Hooks = &snapv1.HookStamps{}
		}
		for _, r := range st.Hooks.Results {
			if r.List == list && int(r.Index) == i {
				return
			}
		}
		st.Hooks.Results = append(st.Hooks.Results, snapv1.HookResult{List: list, Index: int32(i), Kind: kind, Running: true, Message: "running", At: metav1.NewTime(f.now())})
		claimed = true
	})
	return claimed, err
}

func hookResult(s *snapv1.Snapshot, list string, i int) *snapv1.HookResult {
	if s.Status.Hooks == nil {
		return nil
	}
	for k := range s.Status.Hooks.Results {
		if r := &s.Status.Hooks.Results[k]; r.List == list && int(r.Index) == i {
			return r
		}
	}
	return nil
}

func continueOnFailure(h snapv1.Hook) bool {
	switch {
	case h.WorkloadExec != nil:
		return h.WorkloadExec.ContinueOnFailure
	case h.RunJob != nil:
		return h.RunJob.ContinueOnFailure
	case h.HTTPRequest != nil:
		return h.HTTPRequest.ContinueOnFailure
	}
	return false
}

func hookTimeout(v string) time.Duration {
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return d
	}
	return DefaultHookTimeout
}

func (f *Function) recordHook(ctx context.Context, s *snapv1.Snapshot, r snapv1.HookResult) error {
	return f.updateStatus(ctx, s, func(st *snapv1.SnapshotStatus, gen int64) {
		if st.Hooks == nil {
			st.Hooks = &snapv1.HookStamps{}
		}
		replaced := false
		for k := range st.Hooks.Results {
			if e := &st.Hooks.Results[k]; e.List == r.List && e.Index == r.Index {
				if !e.Running {
					return // already recorded by another delivery
				}
				*e, replaced = r, true
			}
		}
		if !replaced {
			st.Hooks.Results = append(st.Hooks.Results, r)
		}
		status, reason := metav1.ConditionTrue, "HookSucceeded"
		if !r.Succeeded {
			status, reason = metav1.ConditionFalse, reasonHookFailed
		} else if c := meta.FindStatusCondition(st.Conditions, wellknown.ConditionHooksSucceeded); c != nil && c.Status == metav1.ConditionFalse {
			return // a failure stays visible; later successes do not hide it
		}
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: wellknown.ConditionHooksSucceeded, Status: status, Reason: reason,
			Message: fmt.Sprintf("%s[%d] (%s): %s", r.List, r.Index, r.Kind, r.Message), ObservedGeneration: gen})
	})
}

// WorkloadExecOff is why a workloadExec hook fails where the operator has
// not turned them on.
const WorkloadExecOff = "workloadExec hooks are off in this installation: they need pods/exec in every namespace, which the snapshot function is granted only when the operator sets the chart value functions.snapshot.workloadExecHooks=true (flag --workload-exec-hooks); use a runJob hook meanwhile"

// runHook runs one hook; pending means a runJob hook has not finished yet.
func (f *Function) runHook(ctx context.Context, s *snapv1.Snapshot, pol *snapv1.SnapshotPolicy, list string, i int, h snapv1.Hook) (ok bool, msg string, pending bool, err error) {
	switch {
	case h.HTTPRequest != nil:
		ok, msg = f.httpHook(ctx, h.HTTPRequest)
		return ok, msg, false, nil
	case h.WorkloadExec != nil:
		if !f.WorkloadExecHooks {
			return false, WorkloadExecOff, false, nil
		}
		if msg, err := f.authorMay(ctx, pol, authzv1.ResourceAttributes{Namespace: s.Namespace, Verb: "create", Resource: "pods", Subresource: "exec"}); msg != "" || err != nil {
			return false, msg, false, err
		}
		ok, msg = f.execHook(ctx, s.Namespace, h.WorkloadExec)
		return ok, msg, false, nil
	case h.RunJob != nil:
		return f.jobHook(ctx, s, pol, list, i, h.RunJob)
	}
	return false, "the hook names no action", false, nil
}

// hookClient calls hook URLs: no proxy (it would dial for us, unchecked),
// every dialled address checked against the egress policy after DNS, no
// redirects (one could lead anywhere), no connection reuse between hooks.
func hookClient(pol egress.Policy) *http.Client {
	d := &net.Dialer{Timeout: 30 * time.Second, Control: func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("hooks may not connect to %s: not an IP address and port", address)
		}
		return pol.CheckAddr(ap.Addr())
	}}
	return &http.Client{
		Transport: &http.Transport{Proxy: nil, DialContext: d.DialContext, DisableKeepAlives: true,
			TLSHandshakeTimeout: 30 * time.Second, ResponseHeaderTimeout: egress.MaxTimeout},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// hookEgress is the operator's egress policy with snapflow's namespace
// filled in and the cluster's own networks added. Hooks are refused while
// those cannot be read: the safe side of not knowing them.
func (f *Function) hookEgress(ctx context.Context) (egress.Policy, error) {
	p := f.HookEgress
	if p.Namespace == "" {
		p.Namespace = f.Namespace
	}
	if f.Client == nil {
		return p, nil // no cluster to discover (unit tests)
	}
	found, err := f.clusterDeny(ctx)
	if err != nil {
		return p, fmt.Errorf("httpRequest hooks are refused until snapflow can read the cluster's networks: %w", err)
	}
	p.Deny = append(slices.Clip(p.Deny), found...)
	return p, nil
}

func (f *Function) httpHook(ctx context.Context, h *snapv1.HTTPRequestHook) (bool, string) {
	timeout := hookTimeout(h.Timeout)
	if timeout > egress.MaxTimeout {
		timeout = egress.MaxTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	u, err := url.Parse(h.URL)
	if err != nil {
		return false, "invalid url: " + err.Error()
	}
	pol, err := f.hookEgress(ctx)
	if err != nil {
		return false, err.Error()
	}
	if err := pol.CheckHost(u.Hostname()); err != nil {
		return false, fmt.Sprintf("%s: %v", u.Redacted(), err)
	}
	user := u.User
	u.User = nil
	method := h.Method
	if method == "" {
		method = http.MethodPost
	}
	var body io.Reader
	if h.Body != "" {
		body = strings.NewReader(h.Body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return false, err.Error()
	}
	if user != nil {
		pass, _ := user.Password()
		req.SetBasicAuth(user.Username(), pass)
	}
	for _, hd := range h.Headers {
		req.Header.Set(hd.Name, hd.Value)
	}
	resp, err := hookClient(pol).Do(req)
	if err != nil {
		// The URL may carry credentials: report it without them.
		return false, fmt.Sprintf("%s %s: %v", method, u.Redacted(), unwrapURLError(err))
	}
	// The body is drained, never reported: status is readable by more
	// people than the hook's receiver meant to answer.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	_ = resp.Body.Close()
	switch {
	case resp.StatusCode >= 300 && resp.StatusCode <= 399:
		return false, fmt.Sprintf("%s %s answered %s: redirects are not followed; point the hook at the final URL", method, u.Redacted(), resp.Status)
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return false, fmt.Sprintf("%s %s answered %s", method, u.Redacted(), resp.Status)
	}
	return true, fmt.Sprintf("%s %s answered %s", method, u.Redacted(), resp.Status)
}

func unwrapURLError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

// execHook runs a command in the first running pod the selector matches,
// through the API server's pods/exec.
func (f *Function) execHook(ctx context.Context, ns string, h *snapv1.WorkloadExecHook) (bool, string) {
	if f.Config == nil {
		return false, "workloadExec needs the function's REST config to reach pods/exec"
	}
	sel, err := metav1.LabelSelectorAsSelector(&h.PodSelector)
	if err != nil {
		return false, "podSelector: " + err.Error()
	}
	var pods corev1.PodList
	if err := f.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return false, "list pods: " + err.Error()
	}
	var pod *corev1.Pod
	for i := range pods.Items {
		if pods.Items[i].Status.Phase == corev1.PodRunning && pods.Items[i].DeletionTimestamp == nil {
			pod = &pods.Items[i]
			break
		}
	}
	if pod == nil {
		return false, fmt.Sprintf("no running pod in %s matches %s", ns, sel)
	}
	container := h.Container
	if container == "" {
		container = pod.Spec.Containers[0].Name
	}
	ctx, cancel := context.WithTimeout(ctx, hookTimeout(h.Timeout))
	defer cancel()
	// stdout and stderr are copied by two goroutines into one buffer.
	var out lockedBuffer
	err = podexec.Run(ctx, f.Config, podexec.Request{Namespace: ns, Pod: pod.Name, Container: container, Command: h.Command, Stdout: &out, Stderr: &out})
	tail := lastBytes(out.String(), 400)
	if err != nil {
		return false, fmt.Sprintf("%s in %s/%s: %v; output: %s", strings.Join(h.Command, " "), pod.Name, container, err, tail)
	}
	return true, fmt.Sprintf("ran in %s/%s: %s", pod.Name, container, tail)
}

// lockedBuffer is a bytes.Buffer safe for concurrent writers: unguarded,
// a write on one stream could drop what the other had just written.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func lastBytes(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// jobHook starts the hook's Job (owned by the Snapshot) and reports its end.
// authorMay checks that the user who set pol's hooks may do attrs
// themselves, so a hook never lends the function's rights: "" when they
// may, otherwise why the hook was not run.
func (f *Function) authorMay(ctx context.Context, pol *snapv1.SnapshotPolicy, attrs authzv1.ResourceAttributes) (string, error) {
	a, err := validate.ParseHooksAuthor(pol)
	if err != nil {
		return "not run: " + err.Error(), nil
	}
	if a.InstallAccount(f.Namespace) {
		return fmt.Sprintf("not run: the policy was written by %s, an account of snapflow itself, whose rights are never lent; apply the policy yourself", a.Username), nil
	}
	err = host.Review(ctx, f.Access, authzv1.SubjectAccessReviewSpec{User: a.Username, UID: a.UID, Groups: a.Groups}, attrs)
	if errors.Is(err, host.ErrForbidden) {
		return fmt.Sprintf("not run: a hook acts with the rights of the user who set it (%s), and %v", a.Username, err), nil
	}
	return "", err
}

func (f *Function) jobHook(ctx context.Context, s *snapv1.Snapshot, pol *snapv1.SnapshotPolicy, list string, i int, h *snapv1.RunJobHook) (ok bool, msg string, pending bool, err error) {
	short := "pre"
	if list == ListAfter {
		short = "post"
	}
	name := hookJobName(s, short, i)
	var j batchv1.Job
	err = f.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: name}, &j)
	if apierrors.IsNotFound(err) {
		j = batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.Namespace, OwnerReferences: []metav1.OwnerReference{ownerRef(s)},
				Labels: map[string]string{wellknown.LabelManagedBy: wellknown.ManagedByValue, wellknown.LabelSnapshot: s.Name, wellknown.LabelOp: "hook"}},
			Spec: *h.JobSpec.DeepCopy(),
		}
		if j.Spec.Template.Spec.RestartPolicy == "" {
			j.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
		}
		if j.Spec.ManualSelector == nil || !*j.Spec.ManualSelector {
			// Its pods then count as snapflow's (admission keeps them
			// the Job controller's), so a failure can quote their output.
			if j.Spec.Template.Labels == nil {
				j.Spec.Template.Labels = map[string]string{}
			}
			j.Spec.Template.Labels[wellknown.LabelManagedBy] = wellknown.ManagedByValue
		}
		if j.Spec.ActiveDeadlineSeconds == nil {
			d := int64(hookTimeout(h.Timeout) / time.Second)
			j.Spec.ActiveDeadlineSeconds = &d
		}
		if msg, err := f.authorMay(ctx, pol, authzv1.ResourceAttributes{Namespace: s.Namespace, Verb: "create", Group: "batch", Resource: "jobs"}); msg != "" || err != nil {
			return false, "runJob hook " + name + " was " + msg, false, err
		}
		// snapflow creates the Job, so it passes the gate every mover does.
		if err := host.Permit(ctx, f.Client, s.Namespace, privilege.RunJob(&j.Spec.Template)); errors.Is(err, privilege.ErrNotPermitted) {
			return false, "runJob hook " + name + " was not created: " + err.Error(), false, nil
		} else if err != nil {
			return false, "", false, err
		}
		if err := f.Client.Create(ctx, &j); err != nil && !apierrors.IsAlreadyExists(err) {
			return false, "", false, fmt.Errorf("create hook job %s: %w", name, err)
		}
		return false, "", true, nil
	}
	if err != nil {
		return false, "", false, err
	}
	for _, c := range j.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			return true, "job " + name + " completed", false, nil
		case batchv1.JobFailed:
			return false, fmt.Sprintf("job %s failed (%s): %s %s", name, c.Reason, c.Message, jobwatch.PodMessage(ctx, f.Client, &j)), false, nil
		}
	}
	if f.now().Sub(j.CreationTimestamp.Time) > hookTimeout(h.Timeout)+time.Minute {
		_ = f.Client.Delete(ctx, &j, client.PropagationPolicy(metav1.DeletePropagationBackground))
		return false, fmt.Sprintf("job %s did not finish within %s", name, hookTimeout(h.Timeout)), false, nil
	}
	return false, "", true, nil
}

// hookJobName names s's i-th runJob hook of a list (short "pre" or
// "post"). It has its own hash key: moverjob.Name cuts a long base, so
// with the Snapshot's UID alone a hook of a long-named Snapshot would take
// the mover Job's name, and be read as the mover.
func hookJobName(s *snapv1.Snapshot, short string, i int) string {
	return moverjob.Name(fmt.Sprintf("%s-%s-%d", moverjob.Prefix(s.Name, 40), short, i), fmt.Sprintf("%s/%s/%d", s.UID, short, i))
}
