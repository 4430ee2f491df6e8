package harness

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// GCS is a fake-gcs-server (the Google Cloud Storage JSON API, in memory)
// on a loopback port. The Google client reaches it when
// STORAGE_EMULATOR_HOST names Host.
type GCS struct {
	Host string // host:port
	cmd  *exec.Cmd
	log  *syncBuffer
	done chan struct{}
}

// StartGCS starts the emulator with the given buckets, empty.
func StartGCS(buckets ...string) (*GCS, error) {
	bin, err := Tool("fake-gcs-server")
	if err != nil {
		return nil, err
	}
	data, err := os.MkdirTemp("", "snapflow-gcs-")
	if err != nil {
		return nil, fmt.Errorf("create gcs seed dir: %w", err)
	}
	defer os.RemoveAll(data) // read once at start: a directory per bucket
	for _, b := range buckets {
		if err := os.MkdirAll(filepath.Join(data, b), 0o755); err != nil {
			return nil, fmt.Errorf("seed bucket %s: %w", b, err)
		}
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	g := &GCS{Host: fmt.Sprintf("127.0.0.1:%d", port), log: &syncBuffer{}, done: make(chan struct{})}
	g.cmd = exec.Command(bin, "-scheme", "http", "-host", "127.0.0.1", "-port", fmt.Sprint(port), "-backend", "memory",
		"-data", data, "-public-host", g.Host, "-log-level", "warn")
	g.cmd.Stdout, g.cmd.Stderr = g.log, g.log
	g.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := g.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start fake-gcs-server: %w", err)
	}
	go func() { _ = g.cmd.Wait(); close(g.done) }()
	deadline := time.Now().Add(Timeout(20 * time.Second))
	for {
		// Ready once it lists the seeded buckets.
		resp, err := http.Get("http://" + g.Host + "/storage/v1/b")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return g, nil
			}
		}
		select {
		case <-g.done:
			return nil, fmt.Errorf("fake-gcs-server exited before serving on %s: %s", g.Host, g.log.String())
		default:
		}
		if time.Now().After(deadline) {
			g.Stop()
			return nil, fmt.Errorf("fake-gcs-server did not serve on %s within %s: %s", g.Host, Timeout(20*time.Second), g.log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop kills the emulator.
func (g *GCS) Stop() {
	if g.cmd != nil && g.cmd.Process != nil {
		_ = g.cmd.Process.Kill()
		<-g.done
	}
}
