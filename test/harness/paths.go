// Package harness runs the real parts snapflow's tests and demo need: a
// kube-apiserver with etcd (through controller-runtime's envtest, using the
// binaries `make tools` builds into bin/), kubectl against it, the CRDs of the
// systems snapflow integrates with read from the Go module cache, and a
// versitygw S3 server on a loopback port.
package harness

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

const modulePath = "github.com/snapflow/snapflow"

// RepoRoot finds the snapflow checkout by walking up from the working
// directory to the go.mod that declares the module.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find repository root: %w", err)
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(bytes.TrimSpace(b), []byte("module "+modulePath+"\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("find repository root: no go.mod for " + modulePath + " above the working directory")
		}
		dir = parent
	}
}

// BinDir is where `make tools` puts kube-apiserver, etcd, kubectl and the rest.
func BinDir() (string, error) {
	if d := os.Getenv("SNAPFLOW_BIN_DIR"); d != "" {
		return d, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "bin"), nil
}

// Tool returns the path of a built tool, or an error telling how to build it.
func Tool(name string) (string, error) {
	dir, err := BinDir()
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, name)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s is not built at %s: run `make tools` first", name, p)
	}
	return p, nil
}

// External CRD sources, pinned to the versions snapflow integrates with.
// They are read from the module cache at test time, never copied into the repo.
var (
	KubeBlocksCRDs  = ExternalCRDs{Module: "github.com/apecloud/kubeblocks", Version: "v1.0.2", Dirs: []string{"config/crd/bases"}}
	VeleroCRDs      = ExternalCRDs{Module: "github.com/vmware-tanzu/velero", Version: "v1.18.3", Dirs: []string{"config/crd/v1/bases"}}
	SnapshotterCRDs = ExternalCRDs{Module: "github.com/kubernetes-csi/external-snapshotter/client/v8", Version: "v8.6.0", Dirs: []string{"config/crd"}}
	KnativeServing  = ExternalCRDs{Module: "knative.dev/serving", Version: "v0.50.0", Dirs: []string{"config/core/300-resources"}}
	KnativeEventing = ExternalCRDs{Module: "knative.dev/eventing", Version: "v0.50.0", Dirs: []string{"config/core/resources"}}

	// AllExternalCRDs is everything the e2e suites install next to snapflow's own CRDs.
	AllExternalCRDs = []ExternalCRDs{KubeBlocksCRDs, VeleroCRDs, SnapshotterCRDs, KnativeServing, KnativeEventing}
)

// ExternalCRDs names CRD directories inside one Go module version.
type ExternalCRDs struct {
	Module  string
	Version string
	Dirs    []string
}

var (
	moduleDirMu    sync.Mutex
	moduleDirCache = map[string]string{}
)

// ModuleDir returns the module cache directory of mod@version, downloading it
// when needed. It runs outside any module so snapflow's go.mod is untouched.
func ModuleDir(mod, version string) (string, error) {
	key := mod + "@" + version
	moduleDirMu.Lock()
	defer moduleDirMu.Unlock()
	if d, ok := moduleDirCache[key]; ok {
		return d, nil
	}
	cmd := exec.Command("go", "mod", "download", "-json", key)
	cmd.Dir = os.TempDir()
	cmd.Env = append(os.Environ(), "GO111MODULE=on", "GOFLAGS=-mod=mod")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var info struct {
		Dir   string
		Error string
	}
	if jerr := json.Unmarshal(out, &info); jerr == nil && info.Error != "" {
		return "", fmt.Errorf("download %s: %s", key, info.Error)
	}
	if err != nil {
		return "", fmt.Errorf("download %s: %w: %s", key, err, strings.TrimSpace(stderr.String()))
	}
	if info.Dir == "" {
		return "", fmt.Errorf("download %s: go mod download reported no directory", key)
	}
	moduleDirCache[key] = info.Dir
	return info.Dir, nil
}

// Paths resolves the CRD directories of e in the module cache.
func (e ExternalCRDs) Paths() ([]string, error) {
	dir, err := ModuleDir(e.Module, e.Version)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(e.Dirs))
	for _, d := range e.Dirs {
		p := filepath.Join(dir, d)
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("%s@%s has no CRD directory %s: %w", e.Module, e.Version, d, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// RequireToolsEnv, when set (make test sets it), turns a missing tool into
// a failure instead of a skip, so the full suite never tests less than it
// says.
const RequireToolsEnv = "SNAPFLOW_REQUIRE_TOOLS"

// RequireTool is the path of a tool from bin/ for a test that needs it.
// Without the tool the test is skipped, saying how to build it (`make
// test-unit` on a fresh checkout), unless RequireToolsEnv is set.
func RequireTool(t testing.TB, name string) string {
	t.Helper()
	p, err := Tool(name)
	if err != nil {
		if os.Getenv(RequireToolsEnv) != "" {
			t.Fatal(err)
		}
		t.Skipf("skipped: %v", err)
	}
	return p
}
