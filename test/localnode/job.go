package localnode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// runJob runs a Job's pod until it succeeds or its retries run out.
func (n *Node) runJob(ctx context.Context, j *batchv1.Job) {
	log := n.o.Log.WithValues("job", j.Namespace+"/"+j.Name)
	backoff := int32(6)
	if j.Spec.BackoffLimit != nil {
		backoff = *j.Spec.BackoffLimit
	}
	start := metav1.Now()
	var deadline time.Time
	if d := j.Spec.ActiveDeadlineSeconds; d != nil {
		deadline = start.Add(time.Duration(*d) * time.Second)
	}
	n.updateJob(ctx, j, func(st *batchv1.JobStatus) {
		if st.StartTime == nil {
			st.StartTime = &start
		}
		st.Active = 1
	})
	if !n.awaitServiceAccount(ctx, j, log) {
		return
	}
	var failed int32
	for {
		pctx := ctx
		var cancel context.CancelFunc = func() {}
		if !deadline.IsZero() {
			pctx, cancel = context.WithDeadline(ctx, deadline)
		}
		ok, msg, statuses := n.runPod(pctx, j, log)
		timedOut := errors.Is(pctx.Err(), context.DeadlineExceeded)
		cancel()
		if ctx.Err() != nil {
			return // the node stops or the Job was deleted
		}
		if ok {
			now := metav1.Now()
			n.updateJob(ctx, j, func(st *batchv1.JobStatus) {
				st.Active, st.Succeeded, st.Failed = 0, 1, failed
				st.CompletionTime = &now
				st.Conditions = append(st.Conditions,
					batchv1.JobCondition{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, Reason: "CompletionsReached", LastTransitionTime: now, LastProbeTime: now},
					batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, Reason: "CompletionsReached", LastTransitionTime: now, LastProbeTime: now})
			})
			log.Info("job succeeded")
			return
		}
		failed++
		reason := ""
		rule, ruleMsg := failJobRule(j, statuses)
		switch {
		case timedOut:
			reason, msg = "DeadlineExceeded", "Job was active longer than specified deadline"
		case rule:
			reason, msg = "PodFailurePolicy", ruleMsg
		case failed > backoff:
			reason, msg = "BackoffLimitExceeded", "Job has reached the specified backoff limit: "+msg
		}
		if reason != "" {
			now := metav1.Now()
			n.updateJob(ctx, j, func(st *batchv1.JobStatus) {
				st.Active, st.Failed = 0, failed
				st.Conditions = append(st.Conditions,
					batchv1.JobCondition{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: reason, Message: msg, LastTransitionTime: now, LastProbeTime: now},
					batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: reason, Message: msg, LastTransitionTime: now, LastProbeTime: now})
			})
			log.Info("job failed", "reason", reason, "message", msg)
			return
		}
		n.updateJob(ctx, j, func(st *batchv1.JobStatus) { st.Failed = failed })
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (n *Node) updateJob(ctx context.Context, j *batchv1.Job, mutate func(*batchv1.JobStatus)) {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var live batchv1.Job
		if err := n.o.Client.Get(ctx, client.ObjectKeyFromObject(j), &live); err != nil {
			return err
		}
		mutate(&live.Status)
		return n.o.Client.Status().Update(ctx, &live)
	})
	if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
		n.o.Log.Error(err, "update job status", "job", j.Namespace+"/"+j.Name)
	}
}

// runPod records a Pod for one attempt, runs its containers in order and
// reports whether all succeeded, with the termination message.
func (n *Node) runPod(ctx context.Context, j *batchv1.Job, log interface{ Info(string, ...any) }) (bool, string, []corev1.ContainerStatus) {
	spec := j.Spec.Template.Spec
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: j.Namespace, Name: j.Name + "-" + rand.String(5),
			Labels:          mergeLabels(j.Spec.Template.Labels, map[string]string{"job-name": j.Name, "batch.kubernetes.io/job-name": j.Name, "controller-uid": string(j.UID), "batch.kubernetes.io/controller-uid": string(j.UID)}),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: j.Name, UID: j.UID, Controller: ptr(true)}},
		},
		Spec: *spec.DeepCopy(),
	}
	pod.Spec.NodeName = NodeName
	if err := n.o.JobController.Create(ctx, pod); err != nil {
		return false, "create pod: " + err.Error(), nil
	}
	// As a kubelet waits for attach and mount, the pod stays Pending until
	// each claim it mounts is bound: a provisioner may still be filling it.
	if err := n.awaitClaims(ctx, j.Namespace, spec.Volumes); err != nil {
		msg := "volumes: " + err.Error()
		n.setPod(context.WithoutCancel(ctx), pod, corev1.PodFailed, []corev1.ContainerStatus{terminated("setup", 1, msg)})
		return false, msg, nil
	}
	if err := n.awaitConfig(ctx, pod); err != nil {
		msg := "config: " + err.Error()
		n.setPod(context.WithoutCancel(ctx), pod, corev1.PodFailed, []corev1.ContainerStatus{terminated("setup", 1, msg)})
		return false, msg, nil
	}
	n.setPod(ctx, pod, corev1.PodRunning, nil)

	work, err := os.MkdirTemp(n.o.Root, "pod-")
	if err != nil {
		return false, err.Error(), nil
	}
	defer os.RemoveAll(work)
	if n.o.RunAsPodUser {
		// Its processes may not run as root: they must reach their
		// volumes under it, though not list it.
		if err := os.Chmod(work, 0o711); err != nil {
			return false, err.Error(), nil
		}
	}
	mounts, err := n.volumes(ctx, pod, work)
	if err != nil {
		msg := "volumes: " + err.Error()
		n.setPod(ctx, pod, corev1.PodFailed, []corev1.ContainerStatus{terminated("setup", 1, msg)})
		return false, msg, nil
	}
	var statuses []corev1.ContainerStatus
	ok, msg := true, ""
	for _, c := range append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...) {
		code, out := n.runContainer(ctx, j, pod, c, mounts, work)
		statuses = append(statuses, terminated(c.Name, code, out))
		log.Info("container finished", "container", c.Name, "exitCode", code, "message", out)
		if code != 0 {
			ok, msg = false, out
			break
		}
		msg = out
	}
	phase := corev1.PodSucceeded
	if !ok {
		phase = corev1.PodFailed
	}
	n.setPod(context.WithoutCancel(ctx), pod, phase, statuses)
	return ok, msg, statuses
}

// awaitClaims returns once every PersistentVolumeClaim among vols is bound
// (a claim that does not exist is left to volumes to report), or when ctx
// ends.
func (n *Node) awaitClaims(ctx context.Context, ns string, vols []corev1.Volume) error {
	for _, v := range vols {
		if v.PersistentVolumeClaim == nil {
			continue
		}
		for {
			var pvc corev1.PersistentVolumeClaim
			err := n.o.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: v.PersistentVolumeClaim.ClaimName}, &pvc)
			if apierrors.IsNotFound(err) || (err == nil && pvc.Status.Phase == corev1.ClaimBound) {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("PVC %s was not bound before the pod's deadline: %w", v.PersistentVolumeClaim.ClaimName, ctx.Err())
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

// awaitConfig holds a pod whose Secrets or ConfigMaps are missing in
// Pending, as a kubelet does, and returns once they are all there, or an
// error when ctx ends or a reference cannot work at all. Containers wait
// with CreateContainerConfigError for their environment, and with
// ContainerCreating for a volume that cannot be mounted.
func (n *Node) awaitConfig(ctx context.Context, pod *corev1.Pod) error {
	last := ""
	for {
		reason, problem, err := n.configProblem(ctx, pod)
		if err != nil {
			return err
		}
		if problem == "" {
			return nil
		}
		if problem != last {
			waiting := func(cs []corev1.Container) []corev1.ContainerStatus {
				var out []corev1.ContainerStatus
				for _, c := range cs {
					out = append(out, corev1.ContainerStatus{Name: c.Name, Image: c.Image,
						State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: problem}}})
				}
				return out
			}
			n.setPodWaiting(ctx, pod, waiting(pod.Spec.InitContainers), waiting(pod.Spec.Containers))
			last = problem
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s, until the pod's deadline: %w", problem, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// configProblem is what keeps pod's containers from being created for now
// (a reason and a message), or an error for a reference no wait can fix.
func (n *Node) configProblem(ctx context.Context, pod *corev1.Pod) (string, string, error) {
	for _, v := range pod.Spec.Volumes {
		var err error
		switch {
		case v.Secret != nil && (v.Secret.Optional == nil || !*v.Secret.Optional):
			err = n.o.Client.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: v.Secret.SecretName}, &corev1.Secret{})
		case v.ConfigMap != nil && (v.ConfigMap.Optional == nil || !*v.ConfigMap.Optional):
			err = n.o.Client.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: v.ConfigMap.Name}, &corev1.ConfigMap{})
		}
		if apierrors.IsNotFound(err) {
			return "ContainerCreating", fmt.Sprintf("MountVolume.SetUp failed for volume %q: %v", v.Name, err), nil
		} else if err != nil {
			return "", "", err
		}
	}
	for _, c := range append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
		_, err := n.env(ctx, pod, c)
		var missing *missingKey
		switch {
		case apierrors.IsNotFound(err) || errors.As(err, &missing):
			return "CreateContainerConfigError", err.Error(), nil
		case err != nil:
			return "", "", err
		}
	}
	return "", "", nil
}

// failJobRule says whether a failed pod's container statuses match a
// FailJob rule of j's pod failure policy on exit codes (the only rules
// snapflow's Jobs use), with a message like the Job controller's.
func failJobRule(j *batchv1.Job, statuses []corev1.ContainerStatus) (bool, string) {
	if j.Spec.PodFailurePolicy == nil {
		return false, ""
	}
	for i, r := range j.Spec.PodFailurePolicy.Rules {
		req := r.OnExitCodes
		if r.Action != batchv1.PodFailurePolicyActionFailJob || req == nil {
			continue
		}
		for _, cs := range statuses {
			t := cs.State.Terminated
			if t == nil || t.ExitCode == 0 || (req.ContainerName != nil && *req.ContainerName != cs.Name) {
				continue
			}
			if slices.Contains(req.Values, t.ExitCode) == (req.Operator == batchv1.PodFailurePolicyOnExitCodesOpIn) {
				return true, fmt.Sprintf("Container %s for pod %s/%s failed with exit code %d matching FailJob rule at index %d", cs.Name, j.Namespace, j.Name, t.ExitCode, i)
			}
		}
	}
	return false, ""
}

// pendingPod records an unschedulable pod for j, the way the scheduler
// reports one that fits no node.
func (n *Node) pendingPod(ctx context.Context, j *batchv1.Job) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: j.Namespace, Name: j.Name + "-" + rand.String(5),
			Labels:          mergeLabels(j.Spec.Template.Labels, map[string]string{"job-name": j.Name, "batch.kubernetes.io/job-name": j.Name, "controller-uid": string(j.UID), "batch.kubernetes.io/controller-uid": string(j.UID)}),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: j.Name, UID: j.UID, Controller: ptr(true)}}},
		Spec: *j.Spec.Template.Spec.DeepCopy(),
	}
	if err := n.o.JobController.Create(ctx, pod); err != nil {
		return
	}
	pod.Status.Phase = corev1.PodPending
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable",
		Message: "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector.", LastTransitionTime: metav1.Now()}}
	_ = n.o.Client.Status().Update(ctx, pod)
	n.updateJob(ctx, j, func(st *batchv1.JobStatus) { st.Active = 1 })
}

func terminated(name string, code int32, msg string) corev1.ContainerStatus {
	reason := "Completed"
	if code != 0 {
		reason = "Error"
	}
	return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: code, Reason: reason, Message: msg, FinishedAt: metav1.Now()}}}
}

func (n *Node) setPod(ctx context.Context, pod *corev1.Pod, phase corev1.PodPhase, statuses []corev1.ContainerStatus) {
	n.updatePod(ctx, pod, func(st *corev1.PodStatus) {
		st.Phase = phase
		if st.StartTime == nil {
			now := metav1.Now()
			st.StartTime = &now
		}
		if phase == corev1.PodRunning {
			st.InitContainerStatuses = nil // a running pod waits no more
		}
		if statuses != nil || phase == corev1.PodRunning {
			st.ContainerStatuses = statuses
		}
	})
}

// setPodWaiting records a Pending pod whose containers wait.
func (n *Node) setPodWaiting(ctx context.Context, pod *corev1.Pod, initStatuses, statuses []corev1.ContainerStatus) {
	n.updatePod(ctx, pod, func(st *corev1.PodStatus) {
		st.Phase = corev1.PodPending
		st.InitContainerStatuses, st.ContainerStatuses = initStatuses, statuses
	})
}

// updatePod applies mutate to pod's live status.
func (n *Node) updatePod(ctx context.Context, pod *corev1.Pod, mutate func(*corev1.PodStatus)) {
	_ = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var live corev1.Pod
		if err := n.o.Client.Get(ctx, client.ObjectKeyFromObject(pod), &live); err != nil {
			return err
		}
		mutate(&live.Status)
		return n.o.Client.Status().Update(ctx, &live)
	})
}

// mount maps a container path to the host path backing it.
type mount struct {
	container, host string
	readOnly        bool
}

// runContainer runs one container's command as a local process.
func (n *Node) runContainer(ctx context.Context, j *batchv1.Job, pod *corev1.Pod, c corev1.Container, vols map[string]string, work string) (int32, string) {
	var mounts []mount
	for _, m := range c.VolumeMounts {
		host, ok := vols[m.Name]
		if !ok {
			return 1, fmt.Sprintf("volume mount %q names no volume", m.Name)
		}
		if m.SubPath != "" {
			host = filepath.Join(host, m.SubPath)
			if err := ensureDir(host); err != nil {
				return 1, err.Error()
			}
		}
		mounts = append(mounts, mount{container: filepath.Clean(m.MountPath), host: host, readOnly: m.ReadOnly || volumeReadOnly(pod, m.Name)})
	}
	termPath := c.TerminationMessagePath
	if termPath == "" {
		termPath = "/dev/termination-log"
	}
	termHost := filepath.Join(work, c.Name+".termination-log")
	mounts = append(mounts, mount{container: termPath, host: termHost})
	// Longest first, so /data/sub maps before /data.
	sort.Slice(mounts, func(a, b int) bool { return len(mounts[a].container) > len(mounts[b].container) })
	rewrite := func(s string) string { return rewritePaths(s, mounts) }

	rootfs, contained := n.rootfs(c.Image)
	argv := append(append([]string{}, c.Command...), c.Args...)
	if len(argv) == 0 {
		return 1, "the container has no command: the local node cannot run an image's entrypoint"
	}
	if contained {
		return n.runContained(ctx, pod, c, mounts, rootfs, work, termHost)
	}
	for i := range argv {
		argv[i] = rewrite(argv[i])
	}
	bin := argv[0]
	if local, ok := n.o.Binaries[filepath.Base(bin)]; ok {
		bin = local
	}
	env, err := n.env(ctx, pod, c)
	if err != nil {
		return 1, err.Error()
	}
	home := filepath.Join(work, "home-"+c.Name)
	if err := ensureDir(home); err != nil {
		return 1, err.Error()
	}
	cred := n.credential(pod, c)
	if cred != nil {
		// As a runtime makes the termination log file and the container's
		// writable layer its user's.
		if err := os.WriteFile(termHost, nil, 0o644); err != nil {
			return 1, err.Error()
		}
		for _, p := range []string{home, termHost} {
			if err := os.Chown(p, int(cred.Uid), int(cred.Gid)); err != nil {
				return 1, err.Error()
			}
		}
	}
	kubeconfig, err := n.kubeconfigFor(ctx, pod, work)
	if err != nil {
		return 1, err.Error()
	}
	cmdEnv := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "TMPDIR=" + home,
		"HOSTNAME=" + pod.Name, "KUBERNETES_NAMESPACE=" + pod.Namespace}
	if kubeconfig != "" {
		cmdEnv = append(cmdEnv, "KUBECONFIG="+kubeconfig)
	}
	for _, e := range env {
		cmdEnv = append(cmdEnv, e.Name+"="+rewrite(e.Value))
	}
	n.mu.Lock()
	for k, v := range n.runtimeEnv {
		cmdEnv = append(cmdEnv, k+"="+v)
	}
	n.mu.Unlock()
	cmd := exec.CommandContext(ctx, bin, argv[1:]...)
	cmd.Env = cmdEnv
	cmd.Dir = home
	if c.WorkingDir != "" {
		cmd.Dir = rewrite(c.WorkingDir)
	}
	var out bytes.Buffer
	logf, err := n.openLog(pod.Namespace, pod.Name, c.Name)
	if err != nil {
		return 1, "container log: " + err.Error()
	}
	defer n.closeLog(logf)
	w := io.MultiWriter(&out, bestEffort{logf})
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: cred}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	err = cmd.Run()
	msg := terminationMessage(termHost, c, out.String(), err != nil)
	if code, ended := exitCode(err); ended {
		return code, msg
	}
	return 127, fmt.Sprintf("start %s: %v", bin, err)
}

// exitCode is a process's exit code as a kubelet reports it (137 for a
// kill); ended is false when the process never started.
func exitCode(err error) (code int32, ended bool) {
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, true
	case errors.As(err, &exit):
		if code = int32(exit.ExitCode()); code < 0 {
			code = 137
		}
		return code, true
	}
	return 127, false
}

// terminationMessage is what a kubelet reports of a container that ended:
// its termination log, else the tail of its output when its policy asks
// for it on failure.
func terminationMessage(termHost string, c corev1.Container, out string, failed bool) string {
	fallback := c.TerminationMessagePolicy == corev1.TerminationMessageFallbackToLogsOnError
	b, err := os.ReadFile(termHost)
	if err != nil {
		if fallback || failed {
			return lastLines(out, 20)
		}
		return ""
	}
	// A kubelet keeps the first 4 KiB of the file, and falls back to the
	// log only for a container that failed leaving it empty.
	msg := strings.TrimSpace(string(b[:min(len(b), maxTerminationMessage)]))
	if msg == "" && fallback && failed {
		return lastLines(out, 20)
	}
	return msg
}

// maxTerminationMessage is what a kubelet keeps of a termination message.
const maxTerminationMessage = 4096

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// rewritePaths replaces container paths in s (at path-token boundaries) with
// the host paths backing them.
func rewritePaths(s string, mounts []mount) string {
	for _, m := range mounts {
		if m.container == "/" {
			continue
		}
		re := regexp.MustCompile(`(^|[\s"'=:,(])` + regexp.QuoteMeta(m.container) + `(/|$|[\s"';,)])`)
		repl := "${1}" + strings.ReplaceAll(m.host, "$", "$$") + "${2}"
		// Twice: adjacent occurrences share a boundary character.
		s = re.ReplaceAllString(re.ReplaceAllString(s, repl), repl)
	}
	return s
}

func mergeLabels(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

func ptr[T any](v T) *T { return &v }
