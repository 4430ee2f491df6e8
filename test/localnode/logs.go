package localnode

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// logPath is where a container's output goes, as a kubelet keeps it under
// /var/log/pods.
func (n *Node) logPath(namespace, pod, container string) string {
	return filepath.Join(n.o.Root, "logs", namespace+"_"+pod+"_"+container+".log")
}

// openLog creates a container's log file; it is written as the container
// runs, so pods/log reads a running container's output as it grows.
func (n *Node) openLog(namespace, pod, container string) (*os.File, error) {
	p := n.logPath(namespace, pod, container)
	f, err := os.Create(p)
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	if n.writing == nil {
		n.writing = map[string]bool{}
	}
	n.writing[p] = true
	n.mu.Unlock()
	return f, nil
}

// bestEffort writes to w and ignores its errors: a log that cannot be
// written must not stop a container, whose output would back up.
type bestEffort struct{ w io.Writer }

func (b bestEffort) Write(p []byte) (int, error) {
	_, _ = b.w.Write(p)
	return len(p), nil
}

// closeLog marks a container's log complete, which ends followers.
func (n *Node) closeLog(f *os.File) {
	_ = f.Close()
	n.mu.Lock()
	delete(n.writing, f.Name())
	n.mu.Unlock()
}

func (n *Node) stillWriting(p string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.writing[p]
}

// serveLogs answers the API server's pods/log requests:
// /containerLogs/<namespace>/<pod>/<container> with tailLines, limitBytes
// and follow, as a kubelet does. Names are single path segments, so a
// request cannot reach outside the logs directory.
func (n *Node) serveLogs(w http.ResponseWriter, req *http.Request) {
	parts := strings.Split(strings.TrimPrefix(req.URL.Path, "/containerLogs/"), "/")
	if len(parts) != 3 || badSegments(parts) {
		http.Error(w, "want /containerLogs/<namespace>/<pod>/<container>", http.StatusNotFound)
		return
	}
	p := n.logPath(parts[0], parts[1], parts[2])
	full, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		http.Error(w, "container "+parts[2]+" of pod "+parts[0]+"/"+parts[1]+" has not started", http.StatusBadRequest)
		return
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	b, q := full, req.URL.Query()
	if v := q.Get("tailLines"); v != "" {
		lines, err := strconv.Atoi(v)
		if err != nil || lines < 0 {
			http.Error(w, "tailLines: "+v+" is not a count", http.StatusBadRequest)
			return
		}
		b = tail(b, lines)
	}
	limit := int64(-1)
	if v := q.Get("limitBytes"); v != "" {
		if limit, err = strconv.ParseInt(v, 10, 64); err != nil || limit < 1 {
			http.Error(w, "limitBytes: "+v+" is not a positive count", http.StatusBadRequest)
			return
		}
	}
	out := io.Writer(w)
	if limit > 0 {
		out = &limitWriter{w: w, left: limit}
	}
	w.Header().Set("Content-Type", "text/plain")
	_, _ = out.Write(b)
	if q.Get("follow") != "true" {
		return
	}
	// Follow: send what is appended until the container ends.
	offset := int64(len(full))
	flusher, _ := w.(http.Flusher)
	for {
		if flusher != nil {
			flusher.Flush()
		}
		done := !n.stillWriting(p)
		f, err := os.Open(p)
		if err != nil {
			return
		}
		_, _ = f.Seek(offset, io.SeekStart)
		m, _ := io.Copy(out, f)
		_ = f.Close()
		offset += m
		if lw, ok := out.(*limitWriter); done || (ok && lw.left <= 0) {
			return
		}
		select {
		case <-req.Context().Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func badSegments(parts []string) bool {
	for _, s := range parts {
		if s == "" || s == "." || s == ".." || strings.ContainsAny(s, `/\`) {
			return true
		}
	}
	return false
}

// tail keeps the last n lines of b.
func tail(b []byte, n int) []byte {
	if n == 0 {
		return nil
	}
	end := len(b)
	if end > 0 && b[end-1] == '\n' {
		end--
	}
	for i := 0; i < n; i++ {
		j := bytes.LastIndexByte(b[:end], '\n')
		if j < 0 {
			return b
		}
		end = j
	}
	return b[end+1:]
}

// limitWriter stops writing after left bytes.
type limitWriter struct {
	w    io.Writer
	left int64
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if l.left <= 0 {
		return len(p), nil
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.w.Write(p)
	l.left -= int64(n)
	return n, err
}
