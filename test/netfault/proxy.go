// Package netfault injects network faults into tests: a TCP proxy in front
// of a real server that can be cut like an outage and brought back.
package netfault

import (
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
)

// CutProxy forwards TCP to an upstream address. Cut drops every connection
// and refuses new ones until Restore listens again on the same address, so
// a client configured with Addr sees a storage outage and its recovery.
type CutProxy struct {
	// Addr is where clients connect (host:port on loopback).
	Addr     string
	upstream string
	sent     atomic.Int64
	mu       sync.Mutex
	ln       net.Listener
	conns    map[net.Conn]bool
}

// New starts a proxy to upstream on a free loopback port.
func New(upstream string) (*CutProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &CutProxy{Addr: ln.Addr().String(), upstream: upstream, conns: map[net.Conn]bool{}}
	p.serve(ln)
	return p, nil
}

// Sent is how many bytes clients have sent upstream so far.
func (p *CutProxy) Sent() int64 { return p.sent.Load() }

func (p *CutProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", p.upstream)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns[c], p.conns[up] = true, true
			p.mu.Unlock()
			go func() { _, _ = io.Copy(countingWriter{up, &p.sent}, c); up.Close() }()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
}

type countingWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n.Add(int64(n))
	return n, err
}

// Cut drops every connection and stops listening.
func (p *CutProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	p.conns = map[net.Conn]bool{}
}

// Restore listens on Addr again.
func (p *CutProxy) Restore() error {
	ln, err := net.Listen("tcp", p.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s again: %w", p.Addr, err)
	}
	p.serve(ln)
	return nil
}
