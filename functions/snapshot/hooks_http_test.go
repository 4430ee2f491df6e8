package snapshot

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/internal/egress"
)

// httpRequest hooks against real servers: loopback refused unless the
// operator allows it, a name resolving to loopback refused after DNS,
// snapflow's own Services refused by name, redirects not followed, and the
// receiver's body never copied into the result.
func TestHTTPHookEgress(t *testing.T) {
	var final atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { final.Add(1) }))
	defer target.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/redirect":
			http.Redirect(w, r, target.URL+"/x", http.StatusFound)
		case "/fail":
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte("SECRET-FROM-RECEIVER"))
		default:
			_, _ = w.Write([]byte("SECRET-FROM-RECEIVER"))
		}
	}))
	defer srv.Close()
	loopback := []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	port := srv.URL[strings.LastIndex(srv.URL, ":"):]
	tests := []struct {
		name  string
		url   string
		allow bool
		ok    bool
		want  string
	}{
		{"loopback refused by default", srv.URL + "/ok", false, false, "it is loopback"},
		{"localhost refused by name", "http://localhost" + port + "/ok", true, false, "the node itself"},
		{"metadata endpoint refused", "http://169.254.169.254/latest/meta-data/", true, false, "cloud metadata"},
		{"snapflow's own Service refused", "http://snapflow-functions.snapflow-system.svc:8080/cleanup", true, false, "snapflow's own namespace"},
		{"allowed loopback succeeds, body not reported", srv.URL + "/ok", true, true, "answered 200 OK"},
		{"failure body not reported", srv.URL + "/fail", true, false, "answered 500"},
		{"redirect not followed", srv.URL + "/redirect", true, false, "redirects are not followed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &Function{Namespace: "snapflow-system"}
			if tt.allow {
				f.HookEgress = egress.Policy{Allow: loopback}
			}
			ok, msg := f.httpHook(context.Background(), &snapv1.HTTPRequestHook{URL: tt.url, Timeout: "5s"})
			if ok != tt.ok || !strings.Contains(msg, tt.want) {
				t.Fatalf("ok %v %q, want ok %v naming %q", ok, msg, tt.ok, tt.want)
			}
			if strings.Contains(msg, "SECRET-FROM-RECEIVER") {
				t.Fatalf("the receiver's body reached the result: %q", msg)
			}
		})
	}
	if n := final.Load(); n != 0 {
		t.Fatalf("the redirect target was called %d times", n)
	}
}

// The dialled address is checked on its own, below the name check: what a
// name resolves to (DNS rebinding included) is refused like a literal.
func TestHookClientChecksDialledAddress(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	resp, err := hookClient(egress.Policy{}).Get(srv.URL)
	if err == nil {
		resp.Body.Close()
		t.Fatal("the hook client connected to loopback")
	}
	if !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("err %v, want it to name loopback", err)
	}
}
