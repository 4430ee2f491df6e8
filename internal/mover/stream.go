package mover

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/snapflow/snapflow/internal/kopia"
	"github.com/snapflow/snapflow/internal/podexec"
)

// stderrTail is how much of a command's stderr a failure quotes.
const stderrTail = 1024

// execRun is a command running in a workload container, its output or
// input a pipe the upload or restore drains or fills.
type execRun struct {
	work   *ExecWork
	cancel context.CancelFunc
	done   chan struct{}
	err    error
	stderr tailWriter
}

// startStream runs the stream command and returns its stdout as a kopia
// stream. The reader ends with EOF only once the command has exited 0;
// closing it early stops the command.
func startStream(ctx context.Context, o Options, w *ExecWork) (*kopia.Stream, error) {
	pr, pw := io.Pipe()
	r, err := startExec(ctx, o, w, podexec.Request{Stdout: pw}, func(err error) { pw.CloseWithError(err) })
	if err != nil {
		return nil, err
	}
	rd := &stopOnClose{PipeReader: pr, stop: r.cancel}
	result := func() error {
		err := r.result()
		if err == nil && !rd.eof.Load() {
			// Exit 0, but the upload stopped before the end of the output.
			err = errors.New("the upload stopped before the end of the command's output")
		}
		return err
	}
	return &kopia.Stream{Name: w.FileName, Reader: rd, Result: result}, nil
}

// restoreStream pipes the one file of a stream snapshot into the
// streamExec command. The restore succeeds only if the command read it
// and exited 0.
func restoreStream(ctx context.Context, o Options, r *kopia.Repo, info kopia.SnapshotInfo, start time.Time) (string, error) {
	f, err := r.OpenStream(ctx, info.ID)
	if err != nil {
		return "", err
	}
	defer f.Close()
	w := o.Spec.Restore.Stream
	// The file is copied into a pipe the exec reads: once the command has
	// ended the pipe is closed, which ends the copy, so the file is never
	// closed under a reader, and n counts what the exec took.
	pr, pw := io.Pipe()
	var n int64
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		var err error
		n, err = io.Copy(pw, f)
		pw.CloseWithError(err)
	}()
	run, err := startExec(ctx, o, w, podexec.Request{Stdin: pr}, func(error) {})
	if err != nil {
		_ = pr.Close()
		<-copied
		return "", err
	}
	err = run.result()
	_ = pr.Close()
	<-copied
	if err != nil {
		return "", &kopia.Error{Class: kopia.ClassCommandFailed, Err: fmt.Errorf("piping %s of kopia snapshot %s: %w", f.Name, info.ID, err)}
	}
	if n != f.Size {
		return "", &kopia.Error{Class: kopia.ClassCommandFailed, Err: fmt.Errorf("the command exited 0 after taking %d of the %d bytes of %s (kopia snapshot %s), so it did not load all of it; a command must read its standard input to the end", n, f.Size, f.Name, info.ID)}
	}
	st := kopia.RestoreStats{Files: 1, Bytes: n, TotalBytes: f.Size}
	res := RestoreResult{Start: start, End: o.Now(), SnapshotID: info.ID, Source: info.Source, Stats: st,
		Message: fmt.Sprintf("piped %s of kopia snapshot %s (%d bytes) into %q in pod %s/%s", f.Name, info.ID, n, strings.Join(w.Command, " "), w.Namespace, w.Pod)}
	if err := o.Reporter.RestoreDone(ctx, res); err != nil {
		return "", fmt.Errorf("report the result: %w", err)
	}
	return res.Message, nil
}

// startExec starts w in the background; end is called with the command's
// outcome (nil for exit 0) when it is over.
func startExec(ctx context.Context, o Options, w *ExecWork, req podexec.Request, end func(error)) (*execRun, error) {
	if o.KubeConfig == nil {
		return nil, &kopia.Error{Class: kopia.ClassInternal, Err: errors.New("the mover has no Kubernetes client configuration to run the workload command with")}
	}
	cfg, err := o.KubeConfig()
	if err != nil {
		return nil, &kopia.Error{Class: kopia.ClassInvalidConfig, Err: fmt.Errorf("the mover cannot reach the API server to run the workload command (its ServiceAccount token is missing?): %w", err)}
	}
	r := &execRun{work: w, done: make(chan struct{}), stderr: tailWriter{max: stderrTail}}
	if w.TimeoutSeconds > 0 {
		ctx, r.cancel = context.WithTimeout(ctx, time.Duration(w.TimeoutSeconds)*time.Second)
	} else {
		ctx, r.cancel = context.WithCancel(ctx)
	}
	req.Namespace, req.Pod, req.Container, req.Command, req.Stderr = w.Namespace, w.Pod, w.Container, w.Command, &r.stderr
	req.NoFallback = true
	go func() {
		defer close(r.done)
		err := podexec.Run(ctx, cfg, req)
		r.err = r.describe(err, ctx.Err())
		end(r.err)
	}()
	return r, nil
}

// result waits for the command and says how it ended.
func (r *execRun) result() error {
	<-r.done
	r.cancel()
	return r.err
}

func (r *execRun) describe(err, ctxErr error) error {
	if err == nil {
		return nil
	}
	what := fmt.Sprintf("%q in pod %s/%s, container %s", strings.Join(r.work.Command, " "), r.work.Namespace, r.work.Pod, r.work.Container)
	var msg string
	if code, ok := podexec.ExitCode(err); ok {
		msg = fmt.Sprintf("%s exited with code %d", what, code)
	} else if errors.Is(ctxErr, context.DeadlineExceeded) {
		msg = fmt.Sprintf("%s did not finish within its timeout of %s", what, time.Duration(r.work.TimeoutSeconds)*time.Second)
	} else {
		msg = fmt.Sprintf("%s could not be run: %v", what, err)
	}
	if t := strings.TrimSpace(r.stderr.String()); t != "" {
		msg += "; stderr: " + t
	}
	return errors.New(msg)
}

// stopOnClose stops the command when the upload stops reading early, and
// records whether it read to the end.
type stopOnClose struct {
	*io.PipeReader
	stop context.CancelFunc
	eof  atomic.Bool
}

func (s *stopOnClose) Read(p []byte) (int, error) {
	n, err := s.PipeReader.Read(p)
	if err == io.EOF {
		s.eof.Store(true)
	}
	return n, err
}

func (s *stopOnClose) Close() error {
	s.stop()
	return s.PipeReader.Close()
}

// tailWriter keeps the last max bytes written to it.
type tailWriter struct {
	mu   sync.Mutex
	max  int
	buf  []byte
	more bool
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf, t.more = append(t.buf[:0], t.buf[over:]...), true
	}
	return len(p), nil
}

func (t *tailWriter) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := string(t.buf)
	if t.more {
		s = "…" + s
	}
	return s
}
