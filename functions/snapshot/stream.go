package snapshot

import (
	"context"
	"fmt"
	"slices"
	"strings"

	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/mover"
)

const (
	// ReasonNoWorkload is the Ready reason of a stream run waiting for a
	// pod to run its command in.
	ReasonNoWorkload = "WaitingForWorkload"
	// ReasonExecNotGranted: a stream run may not exec into its workload
	// (its author may not, or its grant could not be made).
	ReasonExecNotGranted = "ExecNotGranted"
)

// StreamsOff explains a stream source in an installation without pods/exec.
const StreamsOff = "stream sources are off in this installation: the mover runs the command through pods/exec, which snapflow may grant a run only when the operator sets the chart value functions.snapshot.workloadExecHooks=true (flag --workload-exec-hooks); meanwhile dump into a PVC with a beforeSnapshot runJob hook and back that up"

// planStream plans the run of a stream source: the mover runs the command
// in the workload through pods/exec and uploads its output as one file.
// The command acts with the rights of the user who wrote the source, so
// that user must be allowed to exec into the namespace's pods; the pod is
// resolved now, and the run's mover may exec into it alone.
func (f *Function) planStream(ctx context.Context, s *snapv1.Snapshot, p *runPlan) (*runPlan, *gate, error) {
	fatal := func(reason, format string, args ...any) (*runPlan, *gate, error) {
		return nil, &gate{cond: wellknown.ConditionReady, reason: reason, message: fmt.Sprintf(format, args...), fatal: true}, nil
	}
	st := p.src.Stream
	if !f.WorkloadExecHooks {
		return fatal(ReasonInvalidSpec, "%s", StreamsOff)
	}
	if p.policy.Namespace != s.Namespace {
		return fatal(ReasonInvalidSpec, "SnapshotPolicy %s/%s has a stream source, which runs its command in the policy's own namespace; a Snapshot in namespace %s cannot run it", p.policy.Namespace, p.policy.Name, s.Namespace)
	}
	if msg, err := f.authorMay(ctx, p.policy, authzv1.ResourceAttributes{Namespace: s.Namespace, Verb: "create", Resource: "pods", Subresource: "exec"}); err != nil {
		return nil, nil, err
	} else if msg != "" {
		return fatal(ReasonExecNotGranted, "the stream source's command was %s", strings.Replace(msg, "a hook acts", "it acts", 1))
	}
	pod, container, why, err := WorkloadPod(ctx, f.Client, s.Namespace, st.WorkloadExec.PodSelector, st.WorkloadExec.Container)
	if err != nil {
		return nil, nil, err
	}
	if why != "" {
		return nil, &gate{cond: wellknown.ConditionReady, reason: ReasonNoWorkload, message: why + "; this Snapshot starts once one runs"}, nil
	}
	if g, err := f.planIdentity(ctx, s, p); g != nil || err != nil {
		return nil, g, err
	}
	timeout, err := mover.ExecTimeoutSeconds(st.WorkloadExec.Timeout)
	if err != nil {
		return fatal(ReasonInvalidSpec, "stream.workloadExec.timeout %q: %v", st.WorkloadExec.Timeout, err)
	}
	p.exec = &mover.ExecWork{Namespace: s.Namespace, Pod: pod, Container: container, Command: st.WorkloadExec.Command,
		FileName: st.FileName, TimeoutSeconds: timeout}
	// Nothing is mounted or staged: the mover reads the command's output.
	p.copyMethod = snapv1.CopyDirect
	p.decision = snapv1.VolumePolicyDecision{CopyMethod: p.copyMethod, Message: "a stream source has no volume: volume policies do not apply"}
	p.mover = p.policy.Spec.Mover
	p.settleMover()
	return p, nil, nil
}

// WorkloadPod picks the pod a workload command runs in: of the running
// pods selector matches in ns, the first by name, so that deliveries of one
// run agree; container defaults to its first. why says why none was found.
func WorkloadPod(ctx context.Context, c client.Client, ns string, selector metav1.LabelSelector, container string) (pod, ctr, why string, err error) {
	sel, err := metav1.LabelSelectorAsSelector(&selector)
	if err != nil {
		return "", "", "podSelector: " + err.Error(), nil
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return "", "", "", fmt.Errorf("list the pods of the workload: %w", err)
	}
	slices.SortFunc(pods.Items, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	lacking := ""
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
			continue
		}
		ctr = container
		if ctr == "" {
			ctr = p.Spec.Containers[0].Name
		}
		if !slices.ContainsFunc(p.Spec.Containers, func(x corev1.Container) bool { return x.Name == ctr }) {
			lacking = fmt.Sprintf(" (pod %s runs but has no container %s)", p.Name, ctr)
			continue
		}
		return p.Name, ctr, "", nil
	}
	return "", "", fmt.Sprintf("no running pod in namespace %s matches the podSelector %s%s", ns, sel, lacking), nil
}
