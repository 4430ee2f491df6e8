package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

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
		return err
	}
	var jobs batchv1.JobList
	if err := c.List(ctx, &jobs, client.InNamespace(ns), client.MatchingLabels{label: name}); err != nil {
		return fmt.Errorf("list the run's Jobs: %w", err)
	}
	// Only the Jobs of this object, not of an earlier one of its name.
	owned := jobs.Items[:0]
	for _, j := range jobs.Items {
		if ownedBy(j.OwnerReferences, obj.GetUID()) {
			owned = append(owned, j)
		}
	}
	sort.Slice(owned, func(i, j int) bool { return owned[i].CreationTimestamp.Before(&owned[j].CreationTimestamp) })
	if len(owned) == 0 {
		return noJobs(w, kind, obj)
	}
	var pods []corev1.Pod
	for _, j := range owned {
		var list corev1.PodList
		if err := c.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{"job-name": j.Name}); err != nil {
			return fmt.Errorf("list the pods of Job %s: %w", j.Name, err)
		}
		sort.Slice(list.Items, func(a, b int) bool { return list.Items[a].CreationTimestamp.Before(&list.Items[b].CreationTimestamp) })
		for _, p := range list.Items {
			if ownedBy(p.OwnerReferences, j.UID) {
				pods = append(pods, p)
			}
		}
	}
	if len(pods) == 0 {
		fmt.Fprintf(w, "%s %s/%s has Jobs (%s) but no pods yet\n", kind, ns, name, jobNames(owned))
		return nil
	}
	for i, p := range pods {
		last := i == len(pods)-1
		for _, ct := range p.Spec.Containers {
			fmt.Fprintf(w, "==> job %s, pod %s, container %s (%s)\n", p.Labels["job-name"], p.Name, ct.Name, p.Status.Phase)
			err := streamLog(ctx, w, cs, p, ct.Name, follow && last)
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

func jobNames(jobs []batchv1.Job) string {
	names := make([]string, len(jobs))
	for i, j := range jobs {
		names[i] = j.Name
	}
	return strings.Join(names, ", ")
}
