// Package podexec runs a command in a container of a running pod through
// the API server's pods/exec subresource, as kubectl exec does. The
// snapshot function's workloadExec hooks and the mover's stream sources and
// streamExec restores share it, so one code path decides protocols and
// exit codes.
package podexec

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
)

// Request is one command in one container.
type Request struct {
	Namespace, Pod, Container string
	Command                   []string
	// Stdin, when set, is copied to the command's standard input, which is
	// closed at its end.
	Stdin io.Reader
	// Stdout and Stderr receive the command's output; a nil one is not
	// requested.
	Stdout, Stderr io.Writer
	// NoFallback uses the WebSocket protocol only. Data paths set it: over
	// SPDY a dropped connection can read as exit 0, and a cut stream would
	// pass for a whole one.
	NoFallback bool
}

// Run runs r and returns when the command has ended and its output has
// been delivered: nil only for exit code 0. A non-zero exit comes back as
// an error ExitCode reads.
func Run(ctx context.Context, cfg *rest.Config, r Request) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("pods/exec client: %w", err)
	}
	req := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(r.Namespace).Name(r.Pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: r.Container, Command: r.Command,
			Stdin: r.Stdin != nil, Stdout: r.Stdout != nil, Stderr: r.Stderr != nil}, scheme.ParameterCodec)
	// WebSocket first, as kubectl does: its protocol closes each stream
	// explicitly, so no output is lost when the command ends; SPDY for API
	// servers that cannot upgrade.
	ws, err := remotecommand.NewWebSocketExecutor(cfg, http.MethodGet, req.URL().String())
	if err != nil {
		return err
	}
	opts := remotecommand.StreamOptions{Stdin: r.Stdin, Stdout: r.Stdout, Stderr: r.Stderr}
	if r.NoFallback {
		return ws.StreamWithContext(ctx, opts)
	}
	spdy, err := remotecommand.NewSPDYExecutor(cfg, http.MethodPost, req.URL())
	if err != nil {
		return err
	}
	exec, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return err
	}
	return exec.StreamWithContext(ctx, opts)
}

// ExitCode is the exit code of a command Run reports as failed, when the
// container runtime reported one.
func ExitCode(err error) (int, bool) {
	var e utilexec.ExitError
	if errors.As(err, &e) && e.Exited() {
		return e.ExitStatus(), true
	}
	return 0, false
}
