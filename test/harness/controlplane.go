package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/snapflow/snapflow/internal/scheme"
)

// Options selects what Start brings up beside the control plane.
type Options struct {
	// ExternalCRDs are installed after snapflow's own CRDs.
	ExternalCRDs []ExternalCRDs
	// WorkDir holds the kubeconfig and S3 data; a fresh temp dir when empty.
	WorkDir string
}

// ControlPlane is a running kube-apiserver and etcd with snapflow's CRDs.
type ControlPlane struct {
	Config     *rest.Config
	Client     client.Client
	Scheme     *runtime.Scheme
	Kubeconfig string
	WorkDir    string

	env     *envtest.Environment
	kubectl string
	ownDir  bool
}

// StartControlPlane starts etcd and kube-apiserver from bin/, installs
// snapflow's CRDs and the requested external ones, and writes a kubeconfig
// with cluster-admin rights for kubectl.
func StartControlPlane(opts Options) (*ControlPlane, error) {
	binDir, err := BinDir()
	if err != nil {
		return nil, err
	}
	for _, t := range []string{"kube-apiserver", "etcd", "kubectl"} {
		if _, err := Tool(t); err != nil {
			return nil, err
		}
	}
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	crdPaths := []string{filepath.Join(root, "config", "crd", "bases")}
	for _, ext := range opts.ExternalCRDs {
		p, err := ext.Paths()
		if err != nil {
			return nil, err
		}
		crdPaths = append(crdPaths, p...)
	}

	cp := &ControlPlane{WorkDir: opts.WorkDir, Scheme: scheme.New()}
	if cp.WorkDir == "" {
		d, err := os.MkdirTemp("", "snapflow-e2e-")
		if err != nil {
			return nil, fmt.Errorf("create work dir: %w", err)
		}
		cp.WorkDir, cp.ownDir = d, true
	}
	cp.kubectl = filepath.Join(binDir, "kubectl")

	cp.env = &envtest.Environment{
		BinaryAssetsDirectory: binDir,
		CRDDirectoryPaths:     crdPaths,
		ErrorIfCRDPathMissing: true,
		Scheme:                cp.Scheme,
		// envtest's own limits (20 s to start, 10 s for the CRDs to be
		// served) fail a busy machine's run before any test: scale them
		// like every other wait.
		ControlPlaneStartTimeout: Timeout(60 * time.Second),
		ControlPlaneStopTimeout:  Timeout(30 * time.Second),
		CRDInstallOptions:        envtest.CRDInstallOptions{MaxTime: Timeout(60 * time.Second)},
	}
	cfg, err := cp.env.Start()
	if err != nil {
		// A start that failed part way (the CRDs not served in time)
		// leaves etcd and kube-apiserver running: stop them, or they
		// outlive the test binary and slow everything after it.
		_ = cp.env.Stop()
		cp.cleanupDir()
		return nil, fmt.Errorf("start control plane: %w", err)
	}
	cp.Config = cfg

	fail := func(err error) (*ControlPlane, error) {
		_ = cp.Stop()
		return nil, err
	}
	user, err := cp.env.AddUser(envtest.User{Name: "snapflow-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return fail(fmt.Errorf("add admin user: %w", err))
	}
	kc, err := user.KubeConfig()
	if err != nil {
		return fail(fmt.Errorf("render kubeconfig: %w", err))
	}
	cp.Kubeconfig = filepath.Join(cp.WorkDir, "kubeconfig")
	if err := os.WriteFile(cp.Kubeconfig, kc, 0o600); err != nil {
		return fail(fmt.Errorf("write kubeconfig: %w", err))
	}
	cp.Client, err = client.New(cfg, client.Options{Scheme: cp.Scheme})
	if err != nil {
		return fail(fmt.Errorf("build client: %w", err))
	}
	return cp, nil
}

// Stop stops the control plane and removes the work dir it created.
func (cp *ControlPlane) Stop() error {
	var err error
	if cp.env != nil {
		err = cp.env.Stop()
	}
	cp.cleanupDir()
	return err
}

func (cp *ControlPlane) cleanupDir() {
	if cp.ownDir && os.Getenv("SNAPFLOW_KEEP_WORKDIR") == "" {
		_ = os.RemoveAll(cp.WorkDir)
	}
}

// KubectlResult is what one kubectl run printed.
type KubectlResult struct {
	Stdout, Stderr string
	ExitCode       int
}

// Kubectl runs the built kubectl against the control plane. stdin may be nil.
// A non-zero exit is reported in the result, not as an error: tests assert on it.
func (cp *ControlPlane) Kubectl(ctx context.Context, stdin []byte, args ...string) (KubectlResult, error) {
	ctx, cancel := context.WithTimeout(ctx, Timeout(2*time.Minute))
	defer cancel()
	cmd := exec.CommandContext(ctx, cp.kubectl, append([]string{"--kubeconfig", cp.Kubeconfig}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	err := cmd.Run()
	res := KubectlResult{Stdout: stdout.String(), Stderr: stderr.String()}
	var exitErr *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exitErr):
		res.ExitCode = exitErr.ExitCode()
	default:
		return res, fmt.Errorf("run kubectl %s: %w", strings.Join(args, " "), err)
	}
	return res, nil
}
