// Package backendsrv runs real storage servers in the test process for the
// repository backends that have one in Go: a WebDAV server
// (golang.org/x/net/webdav) over a directory and an SSH server with the
// SFTP subsystem (golang.org/x/crypto/ssh, github.com/pkg/sftp) over an
// in-memory filesystem. Both require credentials and listen on loopback,
// where a mover the local node starts reaches them.
package backendsrv

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/subtle"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
	"golang.org/x/net/webdav"
)

// WebDAV is a WebDAV server with basic authentication.
type WebDAV struct {
	URL string
	srv *httptest.Server
}

// StartWebDAV serves dir over WebDAV to user:password.
func StartWebDAV(dir, user, password string) *WebDAV {
	h := &webdav.Handler{FileSystem: webdav.Dir(dir), LockSystem: webdav.NewMemLS()}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if !ok || !equal(u, user) || !equal(p, password) {
			w.Header().Set("WWW-Authenticate", `Basic realm="snapflow-test"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	return &WebDAV{URL: srv.URL, srv: srv}
}

// Close stops the server.
func (s *WebDAV) Close() { s.srv.Close() }

func equal(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// ClientKey makes an SSH key pair for a client: the public half for
// StartSFTP, the private half PEM-encoded as a Secret would hold it.
func ClientKey() (ssh.PublicKey, string, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, "", err
	}
	authorized, err := ssh.NewPublicKey(pub)
	if err != nil {
		return nil, "", err
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		return nil, "", err
	}
	return authorized, string(pem.EncodeToMemory(block)), nil
}

// SFTP is an SSH server offering only the SFTP subsystem, over an
// in-memory filesystem that lives as long as the server.
type SFTP struct {
	Host string
	Port int
	// KnownHosts is the known_hosts line for this server's host key.
	KnownHosts string
	ln         net.Listener
	handlers   sftp.Handlers
	wg         sync.WaitGroup
}

// StartSFTP accepts user with password, or with the private key whose
// public half is authorized (nil: password only).
func StartSFTP(user, password string, authorized ssh.PublicKey) (*SFTP, error) {
	_, hostKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	signer, err := ssh.NewSignerFromKey(hostKey)
	if err != nil {
		return nil, err
	}
	cfg := &ssh.ServerConfig{
		PasswordCallback: func(c ssh.ConnMetadata, p []byte) (*ssh.Permissions, error) {
			if equal(c.User(), user) && equal(string(p), password) {
				return nil, nil
			}
			return nil, errors.New("wrong password")
		},
		PublicKeyCallback: func(c ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
			if authorized != nil && equal(c.User(), user) && equal(string(k.Marshal()), string(authorized.Marshal())) {
				return nil, nil
			}
			return nil, errors.New("key not authorized")
		},
	}
	cfg.AddHostKey(signer)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().(*net.TCPAddr)
	s := &SFTP{Host: "127.0.0.1", Port: addr.Port, ln: ln, handlers: sftp.InMemHandler(),
		KnownHosts: knownhosts.Line([]string{knownhosts.Normalize(addr.String())}, signer.PublicKey())}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go s.serve(conn, cfg)
		}
	}()
	return s, nil
}

// Close stops accepting connections.
func (s *SFTP) Close() {
	_ = s.ln.Close()
	s.wg.Wait()
}

func (s *SFTP) serve(conn net.Conn, cfg *ssh.ServerConfig) {
	defer conn.Close() //nolint:errcheck // the peer is gone either way
	_, chans, reqs, err := ssh.NewServerConn(conn, cfg)
	if err != nil {
		return
	}
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			_ = nc.Reject(ssh.UnknownChannelType, "only sessions")
			continue
		}
		ch, requests, err := nc.Accept()
		if err != nil {
			return
		}
		go s.session(ch, requests)
	}
}

// session serves the sftp subsystem and refuses shells and commands.
func (s *SFTP) session(ch ssh.Channel, requests <-chan *ssh.Request) {
	defer ch.Close() //nolint:errcheck // the peer is gone either way
	for req := range requests {
		ok := req.Type == "subsystem" && len(req.Payload) > 4 && string(req.Payload[4:]) == "sftp"
		_ = req.Reply(ok, nil)
		if !ok {
			continue
		}
		srv := sftp.NewRequestServer(ch, s.handlers)
		if err := srv.Serve(); err != nil && !errors.Is(err, io.EOF) {
			_, _ = fmt.Fprintf(ch.Stderr(), "sftp: %v\n", err)
		}
		_ = srv.Close()
		return
	}
}
