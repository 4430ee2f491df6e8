package harness

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// S3Options tunes the versitygw server.
type S3Options struct {
	// Dir holds the bucket data and versions; a fresh temp dir when empty.
	Dir string
	// Versioning enables bucket versioning support (--versioning-dir).
	Versioning bool
	// EventWebhookURL receives S3 event notifications.
	EventWebhookURL string
	// TLSCert and TLSKey, when set, are PEM files: the gateway serves
	// HTTPS with them.
	TLSCert, TLSKey string
}

// S3 is a running versitygw posix gateway on a loopback port.
type S3 struct {
	// Endpoint is host:port, URL the http:// (https:// with TLS) URL.
	Endpoint  string
	URL       string
	AccessKey string
	SecretKey string
	Region    string
	// DataDir holds one directory per bucket; objects are plain files in it,
	// so a test can back-date one with os.Chtimes.
	DataDir string

	cmd    *exec.Cmd
	log    *syncBuffer
	ownDir string
	done   chan struct{}
}

// FreePort asks the kernel for an unused loopback TCP port.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// FreePorts returns n distinct free loopback ports.
func FreePorts(n int) ([]int, error) {
	ports := make([]int, n)
	for i := range ports {
		p, err := FreePort()
		if err != nil {
			return nil, err
		}
		ports[i] = p
	}
	return ports, nil
}

// StartS3 starts versitygw with a fresh data directory and waits until it accepts connections.
func StartS3(opts S3Options) (*S3, error) {
	bin, err := Tool("versitygw")
	if err != nil {
		return nil, err
	}
	s := &S3{AccessKey: "snapflow-test", SecretKey: "snapflow-test-secret-key", Region: "us-east-1", log: &syncBuffer{}, done: make(chan struct{})}
	base := opts.Dir
	if base == "" {
		if base, err = os.MkdirTemp("", "snapflow-s3-"); err != nil {
			return nil, fmt.Errorf("create s3 dir: %w", err)
		}
		s.ownDir = base
	}
	s.DataDir = filepath.Join(base, "data")
	if err := os.MkdirAll(s.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("create s3 data dir: %w", err)
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	s.Endpoint = fmt.Sprintf("127.0.0.1:%d", port)
	s.URL = "http://" + s.Endpoint

	args := []string{"--port", s.Endpoint}
	if opts.TLSCert != "" {
		args = append(args, "--cert", opts.TLSCert, "--key", opts.TLSKey)
		s.URL = "https://" + s.Endpoint
	}
	if opts.EventWebhookURL != "" {
		args = append(args, "--event-webhook-url", opts.EventWebhookURL)
	}
	args = append(args, "posix")
	if opts.Versioning {
		vdir := filepath.Join(base, "versions")
		if err := os.MkdirAll(vdir, 0o755); err != nil {
			return nil, fmt.Errorf("create s3 versioning dir: %w", err)
		}
		args = append(args, "--versioning-dir", vdir)
	}
	args = append(args, s.DataDir)

	s.cmd = exec.Command(bin, args...)
	s.cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID="+s.AccessKey, "ROOT_SECRET_ACCESS_KEY="+s.SecretKey)
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	// The gateway dies with the test process even if the test panics.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start versitygw: %w", err)
	}
	go func() { _ = s.cmd.Wait(); close(s.done) }()

	deadline := time.Now().Add(Timeout(20 * time.Second))
	for {
		c, err := net.DialTimeout("tcp", s.Endpoint, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return s, nil
		}
		select {
		case <-s.done:
			return nil, fmt.Errorf("versitygw exited before listening on %s: %s", s.Endpoint, s.log.String())
		default:
		}
		if time.Now().After(deadline) {
			_ = s.Stop()
			return nil, fmt.Errorf("versitygw did not listen on %s within %s: %s", s.Endpoint, Timeout(20*time.Second), s.log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Log returns what the gateway printed so far.
func (s *S3) Log() string { return s.log.String() }

// Stop kills the gateway and removes the data dir it created.
func (s *S3) Stop() error {
	if s.cmd != nil && s.cmd.Process != nil {
		select {
		case <-s.done:
		default:
			_ = s.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-s.done:
			case <-time.After(5 * time.Second):
				_ = s.cmd.Process.Kill()
				<-s.done
			}
		}
	}
	if s.ownDir != "" && os.Getenv("SNAPFLOW_KEEP_WORKDIR") == "" {
		return os.RemoveAll(s.ownDir)
	}
	return nil
}

// syncBuffer collects a child's output while tests read it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
