package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
)

func newLogsCmd(kube *kubeFlags) *cobra.Command {
	var namespace string
	var follow bool
	cmd := &cobra.Command{
		Use:   "logs [snapshot|restore] NAME",
		Short: "Print the logs of a backup's or restore's Jobs (its mover and hooks)",
		Long: `Print the logs of the Jobs a Snapshot or Restore ran: its mover (every
attempt, oldest first) and, for a Snapshot, its runJob hooks. Each pod's
log comes under a header naming the Job, the pod and the container. With
-f it follows the newest pod until it ends.

A finished run's Jobs are removed after their TTL; the run's status keeps
the end of a failed mover's output, which is printed instead.`,
		Example: `  snapflow logs nightly-20261207020000
  snapflow logs restore back -n app
  snapflow logs app-data-manual-x7k2p -f`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, name := "snapshot", args[0]
			if len(args) == 2 {
				kind, name = strings.ToLower(args[0]), args[1]
			}
			if kind != "snapshot" && kind != "restore" {
				return fmt.Errorf("%q: logs are kept for a snapshot or a restore (snapflow logs [snapshot|restore] NAME)", args[0])
			}
			ns, err := kube.namespace(namespace)
			if err != nil {
				return err
			}
			cfg, err := kube.restConfig()
			if err != nil {
				return err
			}
			c, err := kube.client()
			if err != nil {
				return err
			}
			cs, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return err
			}
			return printRunLogs(cmd.Context(), cmd.OutOrStdout(), c, cs, kind, ns, name, follow)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&namespace, "namespace", "n", "", "namespace (default: the kubeconfig's)")
	f.BoolVarP(&follow, "follow", "f", false, "follow the newest pod's log until it ends")
	return cmd
}

// printRunLogs prints the logs of every Job the run owns, oldest first.
func printRunLogs(ctx context.Context, w io.Writer, c client.Client, cs kubernetes.Interface, kind, ns, name string, follow bool) error {
	var obj client.Object = &snapv1.Snapshot{}
	label := wellknown.LabelSnapshot
	if kind == "restore" {
		obj, label = &snapv1.Restore{}, wellknown.LabelRestore
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("%s %s/%s not found (pass -n for another namespace)", kind, ns, name)
		}
		return fmt.Errorf("read %s %s/%s: %w", kind, ns, name, err)
	}
	var pods []runPod
	for {
		var err error
		if pods, err = runPods(ctx, c, ns, label, name, obj.GetUID()); err != nil {
			return err
		}
		// With -f, wait for a pod whose log can be read: a run just
		// created has no Job yet, a new pod no started container. A run
		// that has ended gets no new pod: nothing to wait for.
		if !follow || runEnded(obj) || (len(pods) > 0 && started(pods[len(pods)-1].pod)) {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
	if len(pods) == 0 {
		return noJobs(w, kind, obj)
	}
	clean := controlFilter{w: w}
	for i, rp := range pods {
		p := rp.pod
		last := i == len(pods)-1
		for _, ct := range p.Spec.Containers {
			fmt.Fprintf(w, "==> job %s (%s), pod %s, container %s (%s)\n", rp.job.Name, opOf(rp.job), p.Name, ct.Name, p.Status.Phase)
			err := streamLog(ctx, clean, cs, p, ct.Name, follow && last)
			switch {
			case err == nil:
			case apierrors.IsBadRequest(err) && p.Status.Phase == corev1.PodPending:
				fmt.Fprintln(w, "(not started yet)")
			default:
				fmt.Fprintf(w, "(no log: %v)\n", err)
			}
		}
	}
	return nil
}

// runPod is a pod of one of the run's Jobs.
type runPod struct {
	job *batchv1.Job
	pod corev1.Pod
}

// runPods lists the pods of the Jobs the run owns (by UID, so not an
// earlier object of its name), oldest Job and pod first.
func runPods(ctx context.Context, c client.Client, ns, label, name string, uid types.UID) ([]runPod, error) {
	var jobs batchv1.JobList
	if err := c.List(ctx, &jobs, client.InNamespace(ns), client.MatchingLabels{label: name}); err != nil {
		return nil, fmt.Errorf("list the run's Jobs: %w", err)
	}
	var owned []*batchv1.Job
	for i := range jobs.Items {
		if ownedBy(jobs.Items[i].OwnerReferences, uid) {
			owned = append(owned, &jobs.Items[i])
		}
	}
	sort.SliceStable(owned, func(i, j int) bool {
		a, b := owned[i].CreationTimestamp, owned[j].CreationTimestamp
		return a.Before(&b) || a.Equal(&b) && owned[i].Name < owned[j].Name
	})
	var out []runPod
	for _, j := range owned {
		var list corev1.PodList
		if err := c.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{"controller-uid": string(j.UID)}); err != nil {
			return nil, fmt.Errorf("list the pods of Job %s: %w", j.Name, err)
		}
		sort.SliceStable(list.Items, func(a, b int) bool {
			x, y := list.Items[a].CreationTimestamp, list.Items[b].CreationTimestamp
			return x.Before(&y) || x.Equal(&y) && list.Items[a].Name < list.Items[b].Name
		})
		for _, p := range list.Items {
			if metav1.IsControlledBy(&p, j) {
				out = append(out, runPod{job: j, pod: p})
			}
		}
	}
	return out, nil
}

// runEnded says whether the run is over, as it was read.
func runEnded(obj client.Object) bool {
	switch o := obj.(type) {
	case *snapv1.Snapshot:
		return o.Status.Phase.IsTerminal()
	case *snapv1.Restore:
		return o.Status.Phase.IsTerminal()
	}
	return false
}

// started says whether any container of p has a log to read.
func started(p corev1.Pod) bool {
	for _, st := range p.Status.ContainerStatuses {
		if st.State.Running != nil || st.State.Terminated != nil {
			return true
		}
	}
	return false
}

func opOf(j *batchv1.Job) string {
	if op := j.Labels[wellknown.LabelOp]; op != "" {
		return op
	}
	return "mover"
}

// controlFilter drops control characters other than newline and tab: a
// log carries file names a tenant chose, and is printed to a terminal.
type controlFilter struct{ w io.Writer }

func (f controlFilter) Write(p []byte) (int, error) {
	out := make([]byte, 0, len(p))
	for _, b := range p {
		if b >= 0x20 && b != 0x7f || b == '\n' || b == '\t' {
			out = append(out, b)
		}
	}
	if _, err := f.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

func streamLog(ctx context.Context, w io.Writer, cs kubernetes.Interface, p corev1.Pod, container string, follow bool) error {
	rc, err := cs.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: container, Follow: follow}).Stream(ctx)
	if err != nil {
		return err
	}
	defer rc.Close()
	if _, err := io.Copy(w, rc); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// noJobs says why there is no log, and prints what status kept.
func noJobs(w io.Writer, kind string, obj client.Object) error {
	var phase string
	var failure *snapv1.Failure
	switch o := obj.(type) {
	case *snapv1.Snapshot:
		phase, failure = string(o.Status.Phase), o.Status.Failure
	case *snapv1.Restore:
		phase, failure = string(o.Status.Phase), o.Status.Failure
	}
	var tail string
	if failure != nil {
		tail = strings.TrimSpace(strings.Join([]string{failure.Class + ": " + failure.Message, failure.StderrTail}, "\n"))
	}
	key := obj.GetNamespace() + "/" + obj.GetName()
	if tail == "" {
		return fmt.Errorf("%s %s (%s) has no Jobs: none started yet, or they were removed after their TTL, and its status keeps no output", kind, key, phaseOr(phase))
	}
	fmt.Fprintf(w, "%s %s (%s) has no Jobs any more (removed after their TTL); its status keeps the end of the mover's output:\n%s\n", kind, key, phaseOr(phase), tail)
	return nil
}

func phaseOr(p string) string {
	if p == "" {
		return "no phase yet"
	}
	return p
}

func ownedBy(refs []metav1.OwnerReference, uid types.UID) bool {
	for _, r := range refs {
		if r.UID == uid {
			return true
		}
	}
	return false
}
