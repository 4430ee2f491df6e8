package localnode

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	remotecommandconsts "k8s.io/apimachinery/pkg/util/remotecommand"
	clientremotecommand "k8s.io/client-go/tools/remotecommand"
	"k8s.io/kubelet/pkg/cri/streaming/remotecommand"
	utilexec "k8s.io/utils/exec"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/go-logr/logr"
)

// NodeName is the Node object the stand-in registers; its Pods carry it.
const NodeName = "localnode"

// PodDir is the working directory of commands exec'd into a pod's
// containers: the stand-in has no container filesystem to enter.
func (n *Node) PodDir(namespace, pod string) string {
	return filepath.Join(n.o.Root, "exec", namespace, pod)
}

// ServeExec makes pods/exec and pods/log work against pods bound to NodeName. It listens
// for the API server's kubelet connections on loopback (HTTPS, a
// self-signed certificate: the API server skips verification when it has no
// kubelet CA), registers the Node with that endpoint, and answers
// /exec/<namespace>/<pod>/<container> with kubelet's own remotecommand
// server, running the command as a local process in PodDir. Clients go
// through the real API server and streaming protocol; only the process
// isolation differs from a kubelet.
func (n *Node) ServeExec(ctx context.Context) error {
	cert, err := selfSigned()
	if err != nil {
		return err
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	if err != nil {
		return fmt.Errorf("listen for exec: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/exec/", n.serveExec)
	mux.HandleFunc("/containerLogs/", n.serveLogs)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	go func() { <-ctx.Done(); _ = srv.Close() }()
	port := int32(ln.Addr().(*net.TCPAddr).Port)
	if err := n.register(ctx, port); err != nil {
		_ = srv.Close()
		return err
	}
	return nil
}

// PodCIDR is the stand-in node's pod range.
const PodCIDR = "10.244.0.0/24"

// register creates or refreshes the Node and points its kubelet endpoint at port.
func (n *Node) register(ctx context.Context, port int32) error {
	// A real node's pod range is assigned by the controller manager; the
	// stand-in carries one so what reads it (hook egress) sees a cluster.
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: NodeName, Labels: NodeLabels},
		Spec: corev1.NodeSpec{PodCIDR: PodCIDR, PodCIDRs: []string{PodCIDR}}}
	if err := n.o.Client.Create(ctx, node); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("register node %s: %w", NodeName, err)
	}
	if err := n.o.Client.Get(ctx, client.ObjectKey{Name: NodeName}, node); err != nil {
		return err
	}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}
	node.Status.DaemonEndpoints.KubeletEndpoint.Port = port
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		Message: "snapflow's local stand-in kubelet", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	if err := n.o.Client.Status().Update(ctx, node); err != nil {
		return fmt.Errorf("set node %s status: %w", NodeName, err)
	}
	return nil
}

func (n *Node) serveExec(w http.ResponseWriter, req *http.Request) {
	parts := strings.Split(strings.TrimPrefix(req.URL.Path, "/exec/"), "/")
	if len(parts) != 3 {
		http.Error(w, "want /exec/<namespace>/<pod>/<container>", http.StatusNotFound)
		return
	}
	ns, pod, container := parts[0], parts[1], parts[2]
	opts, err := remotecommand.NewOptions(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	cmd := req.URL.Query()[corev1.ExecCommandParam]
	n.o.Log.Info("exec", "pod", ns+"/"+pod, "container", container, "command", cmd)
	remotecommand.ServeExec(w, req, execer{dir: n.PodDir(ns, pod), log: n.o.Log}, pod, "", container, cmd, opts,
		time.Minute, 30*time.Second, remotecommandconsts.SupportedStreamingProtocols)
}

// execer runs exec'd commands as local processes.
type execer struct {
	dir string
	log logr.Logger
}

// countingWriter counts what a command wrote, for the node's log.
type countingWriter struct {
	w io.Writer
	n int
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += n
	return n, err
}

func (e execer) ExecInContainer(ctx context.Context, _ string, _ types.UID, _ string, cmd []string, in io.Reader, out, errw io.WriteCloser, _ bool, _ <-chan clientremotecommand.TerminalSize, timeout time.Duration) error {
	if len(cmd) == 0 {
		return errors.New("no command")
	}
	if err := os.MkdirAll(e.dir, 0o755); err != nil {
		return err
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	c := exec.CommandContext(ctx, cmd[0], cmd[1:]...)
	c.Dir = e.dir
	c.WaitDelay = 5 * time.Second
	if in != nil {
		c.Stdin = in
	}
	var counted *countingWriter
	if out != nil {
		counted = &countingWriter{w: out}
		c.Stdout = counted
	}
	if errw != nil {
		c.Stderr = errw
	}
	err := c.Run()
	if counted != nil {
		e.log.Info("exec finished", "command", cmd, "stdoutBytes", counted.n, "err", fmt.Sprint(err))
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		// The kubelet reports a command's exit code to the client this way.
		return utilexec.CodeExitError{Err: err, Code: ee.ExitCode()}
	}
	return err
}

func selfSigned() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: NodeName},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
