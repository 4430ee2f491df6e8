// Package localnode stands in for a kubelet and a CSI driver on the local
// control plane, which has no nodes. It runs each Job's real container
// command as a local process, with the Job's volumes mapped to directories
// (a PVC is <root>/pvc/<namespace>/<name>), and writes back Job and Pod status
// the way the Job controller and kubelet would. It also cuts VolumeSnapshots
// (a copy of the PVC's directory) and provisions PVCs whose dataSource is a
// VolumeSnapshot or another PVC, so copyMethod Snapshot and Clone work.
//
// The Job spec it runs is the one a cluster gets; only the process isolation
// differs: container paths in command, args and environment values are
// rewritten to the host directories backing them, since there is no mount
// namespace.
package localnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Options configure a Node.
type Options struct {
	Client client.Client
	// JobController, when set, creates the Jobs' pods, as the Job
	// controller's identity does on a cluster: snapflow's admission lets
	// only that identity create pods labelled as snapflow's.
	JobController client.Client
	// Root holds the volumes' directories.
	Root string
	// Kubeconfig is handed to containers as KUBECONFIG, standing in for the
	// in-cluster service account credentials.
	Kubeconfig string
	// AsServiceAccount makes each container act as its pod's ServiceAccount
	// (impersonated through Kubeconfig's admin user), as the token a kubelet
	// mounts would; otherwise containers act as that admin user.
	AsServiceAccount bool
	// Binaries maps a container command's base name (e.g. "snapflow") to a
	// local executable, standing in for the image's filesystem.
	Binaries map[string]string
	// RunAsPodUser runs each container's process as the user and groups its
	// security context names, and applies a pod's fsGroup to the read-write
	// volumes it mounts, as a container runtime and kubelet do, so a mover
	// reads and writes only what its identity may. The node must run as
	// root for it.
	RunAsPodUser bool
	// Runtime, when set, runs the containers of its images under runc
	// instead of as host processes; it needs RunAsPodUser (root).
	Runtime *Runtime
	// Interval is how often the node looks for work (default 100ms).
	Interval time.Duration
	Log      logr.Logger
}

// Node is a running stand-in kubelet.
type Node struct {
	o       Options
	mu      sync.Mutex
	running map[types.UID]context.CancelFunc
	// claims counts running pods per namespace/claim, for pvc-protection.
	claims map[string]int
	done   map[types.UID]bool
	// writing holds the log files of running containers.
	writing map[string]bool
	// runtimeEnv is what SetRuntimeEnv adds to every container.
	runtimeEnv map[string]string
	wg         sync.WaitGroup
}

// SetRuntimeEnv adds name=value to the environment of every container
// started from now on, after the pod's own; an empty value removes it.
// A test uses it to point clients at an emulator where a cluster would
// reach the real service (STORAGE_EMULATOR_HOST for Google Cloud
// Storage): the Job spec stays the one a cluster gets.
func (n *Node) SetRuntimeEnv(name, value string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.runtimeEnv == nil {
		n.runtimeEnv = map[string]string{}
	}
	if value == "" {
		delete(n.runtimeEnv, name)
		return
	}
	n.runtimeEnv[name] = value
}

// New prepares a node; Run starts it.
func New(o Options) *Node {
	if o.Interval == 0 {
		o.Interval = 100 * time.Millisecond
	}
	if o.JobController == nil {
		o.JobController = o.Client
	}
	return &Node{o: o, running: map[types.UID]context.CancelFunc{}, done: map[types.UID]bool{}, claims: map[string]int{}}
}

// RootDir holds everything the stand-in writes: volumes, pod work
// directories and container logs.
func (n *Node) RootDir() string { return n.o.Root }

// PVCDir is the directory backing a PVC.
func (n *Node) PVCDir(namespace, name string) string {
	return filepath.Join(n.o.Root, "pvc", namespace, name)
}

// NFSDir is the directory standing in for an NFS export: a pod volume
// nfs{server, path} is mounted from it (the node has no NFS client).
func (n *Node) NFSDir(server, path string) string {
	return filepath.Join(n.o.Root, "nfs", server, filepath.Clean("/"+path))
}

// Run works until ctx ends, then stops every running container.
func (n *Node) Run(ctx context.Context) {
	t := time.NewTicker(n.o.Interval)
	defer t.Stop()
	for {
		n.syncJobs(ctx)
		n.syncGroups(ctx)
		n.syncStorage(ctx)
		select {
		case <-ctx.Done():
			n.mu.Lock()
			for _, cancel := range n.running {
				cancel()
			}
			n.mu.Unlock()
			n.wg.Wait()
			return
		case <-t.C:
		}
	}
}

func (n *Node) syncJobs(ctx context.Context) {
	var jobs batchv1.JobList
	if err := n.o.Client.List(ctx, &jobs); err != nil {
		if ctx.Err() == nil {
			n.o.Log.Error(err, "list jobs")
		}
		return
	}
	live := map[types.UID]bool{}
	for i := range jobs.Items {
		j := &jobs.Items[i]
		live[j.UID] = true
		if j.DeletionTimestamp != nil || finished(j) || (j.Spec.Suspend != nil && *j.Spec.Suspend) {
			continue
		}
		n.mu.Lock()
		busy := n.running[j.UID] != nil || n.done[j.UID]
		if !busy && !schedulable(j) {
			// As a scheduler would: the pod exists but never starts.
			n.done[j.UID] = true
			n.mu.Unlock()
			n.pendingPod(ctx, j)
			continue
		}
		if !busy {
			jctx, cancel := context.WithCancel(ctx)
			n.running[j.UID] = cancel
			n.wg.Add(1)
			go func(j batchv1.Job) {
				defer n.wg.Done()
				n.hold(&j, 1)
				n.runJob(jctx, &j)
				n.hold(&j, -1)
				n.mu.Lock()
				delete(n.running, j.UID)
				n.done[j.UID] = true
				n.mu.Unlock()
				cancel()
			}(*j.DeepCopy())
		}
		n.mu.Unlock()
	}
	// A deleted Job's process is stopped, as the kubelet kills its pod.
	n.mu.Lock()
	for uid, cancel := range n.running {
		if !live[uid] {
			cancel()
		}
	}
	n.mu.Unlock()
}

func (n *Node) inUse(ns, claim string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.claims[ns+"/"+claim] > 0
}

// hold marks the Job's claims in use while its pods run.
func (n *Node) hold(j *batchv1.Job, delta int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, v := range j.Spec.Template.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			n.claims[j.Namespace+"/"+v.PersistentVolumeClaim.ClaimName] += delta
		}
	}
}

// NodeLabels are the labels of the one local node.
var NodeLabels = map[string]string{"kubernetes.io/hostname": NodeName, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}

// self is the local node as a scheduler matches pods against it.
var self = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: NodeName, Labels: NodeLabels}}

// schedulable says whether a scheduler could bind j's pods here: their
// node selector and required node affinity (by label or by node name).
func schedulable(j *batchv1.Job) bool {
	pod := &corev1.Pod{Spec: j.Spec.Template.Spec}
	fits, err := nodeaffinity.GetRequiredNodeAffinity(pod).Match(self)
	return err == nil && fits
}

func finished(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == "True" {
			return true
		}
	}
	return false
}

func ensureDir(p string) error {
	if err := os.MkdirAll(p, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", p, err)
	}
	return nil
}

// RunsAsPodUsers says whether containers run as the users their security
// contexts name (Options.RunAsPodUser).
func (n *Node) RunsAsPodUsers() bool { return n.o.RunAsPodUser }
