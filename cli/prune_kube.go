package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/snapflow/snapflow/internal/prune"
	"github.com/snapflow/snapflow/internal/prune/kubeinv"
	"github.com/snapflow/snapflow/internal/prune/s3store"
	"github.com/snapflow/snapflow/internal/scheme"
)

// Kubernetes connection modes of --kube-mode.
const (
	kubeModeAuto       = "auto"
	kubeModeKubeconfig = "kubeconfig"
	kubeModeInCluster  = "in-cluster"
)

func kubeModeOf(s string) (string, error) {
	switch m := strings.ToLower(strings.TrimSpace(s)); m {
	case "", kubeModeAuto:
		return kubeModeAuto, nil
	case kubeModeKubeconfig, kubeModeInCluster:
		return m, nil
	}
	return "", fmt.Errorf("invalid --kube-mode %q: use auto, kubeconfig or in-cluster", s)
}

// resolveKubeMode picks in-cluster or kubeconfig: auto uses the
// service account when the service variables are set and no --kubeconfig
// was given.
func resolveKubeMode(mode, kubeconfigFlag string, getenv func(string) string) string {
	m, _ := kubeModeOf(mode)
	if m == kubeModeAuto {
		if kubeconfigFlag == "" && getenv("KUBERNETES_SERVICE_HOST") != "" && getenv("KUBERNETES_SERVICE_PORT") != "" {
			return kubeModeInCluster
		}
		return kubeModeKubeconfig
	}
	return m
}

func pruneRestConfig(o *pruneOptions) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if resolveKubeMode(o.kubeMode, o.kube.kubeconfig(), os.Getenv) == kubeModeInCluster {
		if cfg, err = rest.InClusterConfig(); err != nil {
			return nil, fmt.Errorf("in-cluster Kubernetes config (--kube-mode=in-cluster): %w", err)
		}
	} else {
		if cfg, err = o.kube.loader().ClientConfig(); err != nil {
			return nil, fmt.Errorf("load kubeconfig (pass --kubeconfig or --kube-mode=in-cluster): %w", err)
		}
	}
	cfg.Timeout = o.requestTimeout
	cfg.QPS, cfg.Burst = 20, 40
	cfg.UserAgent = "snapflow-prune"
	return cfg, nil
}

func pruneKubeClient(cfg *rest.Config) (client.Client, error) {
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, fmt.Errorf("build the Kubernetes client: %w", err)
	}
	return c, nil
}

// debugWriter is stderr for --debug (and io.Discard otherwise). Every
// write is scrubbed of the credential values as a last line of defence:
// nothing upstream should print them in the first place.
type debugWriter struct {
	mu      sync.Mutex
	w       io.Writer
	secrets []string
}

func newDebugWriter(stderr io.Writer, enabled bool, secrets []string) *debugWriter {
	d := &debugWriter{w: io.Discard}
	if enabled {
		d.w = stderr
	}
	for _, s := range secrets {
		if len(s) >= 4 {
			d.secrets = append(d.secrets, s)
		}
	}
	// Longest first, so a secret containing another is removed whole.
	sort.Slice(d.secrets, func(i, j int) bool { return len(d.secrets[i]) > len(d.secrets[j]) })
	return d
}

func (d *debugWriter) Write(p []byte) (int, error) {
	s := string(p)
	for _, v := range d.secrets {
		s = strings.ReplaceAll(s, v, "<redacted>")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, err := io.WriteString(d.w, s); err != nil {
		return 0, err
	}
	return len(p), nil
}

// debugSettings writes the redacted --debug settings lines before the first
// S3 request.
func debugSettings(w io.Writer, o *pruneOptions, s kubeinv.S3Settings, inv prune.Inventory) {
	lines := s.DebugLines()
	lines = append(lines,
		"bucket_versioning_mode="+string(o.versioningMode),
		"scan_prefix="+orNone(prune.CleanKey(o.run.Prefix)),
		fmt.Sprintf("repository_object_prefixes=%d", len(inv.Mapping)))
	if len(inv.Mapping) == 1 {
		for ns, root := range inv.Mapping {
			lines = append(lines, "repository_object_prefix_namespace="+ns, "repository_object_prefix="+root)
		}
	}
	for _, l := range lines {
		fmt.Fprintf(w, "debug: %s\n", l)
	}
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// pruneProgress prints a throttled progress line on stderr, so a long scan
// or prune shows it is alive without flooding short runs.
type pruneProgress struct {
	mu      sync.Mutex
	w       io.Writer
	every   time.Duration
	start   time.Time
	last    time.Time
	printed bool
	lists   int
	objects int
}

func newPruneProgress(w io.Writer, every time.Duration) *pruneProgress {
	now := time.Now()
	return &pruneProgress{w: w, every: every, start: now, last: now}
}

func (p *pruneProgress) maybe(format string, args ...any) {
	if time.Since(p.last) < p.every {
		return
	}
	p.last, p.printed = time.Now(), true
	fmt.Fprintf(p.w, "progress: "+format+" (%s)\n", append(args, time.Since(p.start).Round(time.Second))...)
}

func (p *pruneProgress) listed(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lists++
	p.objects += n
	p.maybe("scanned %d objects in %d listings", p.objects, p.lists)
}

func (p *pruneProgress) candidates(done, total int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.maybe("%d/%d candidates processed", done, total)
}

// done ends a phase; a final line is printed only when progress was shown.
func (p *pruneProgress) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.printed {
		fmt.Fprintf(p.w, "progress: done, %d objects in %d listings (%s)\n", p.objects, p.lists, time.Since(p.start).Round(time.Second))
		p.printed = false
	}
}

// progressStore counts listings for the progress line.
type progressStore struct {
	*s3store.Store
	p *pruneProgress
}

func (s *progressStore) ListLevel(ctx context.Context, p string, versions bool) ([]prune.Object, []string, error) {
	objs, dirs, err := s.Store.ListLevel(ctx, p, versions)
	s.p.listed(len(objs))
	return objs, dirs, err
}

func (s *progressStore) WalkAll(ctx context.Context, p string, versions bool, fn func([]prune.Object) error) error {
	n := 0
	err := s.Store.WalkAll(ctx, p, versions, func(objs []prune.Object) error {
		n += len(objs)
		return fn(objs)
	})
	s.p.listed(n)
	return err
}

func (s *progressStore) ListAll(ctx context.Context, p string, versions bool) ([]prune.Object, error) {
	objs, err := s.Store.ListAll(ctx, p, versions)
	s.p.listed(len(objs))
	return objs, err
}
