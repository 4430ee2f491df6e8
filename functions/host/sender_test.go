package host

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/go-logr/logr"
	"golang.org/x/time/rate"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapflow/snapflow/events"
)

// tokens stands in for the API server's TokenReview: token -> (user, audience).
type tokens map[string][2]string

func (t tokens) Create(_ context.Context, tr *authnv1.TokenReview, _ metav1.CreateOptions) (*authnv1.TokenReview, error) {
	out := tr.DeepCopy()
	if u, ok := t[tr.Spec.Token]; ok && len(tr.Spec.Audiences) == 1 && tr.Spec.Audiences[0] == u[1] {
		out.Status = authnv1.TokenReviewStatus{Authenticated: true, User: authnv1.UserInfo{Username: u[0]}, Audiences: []string{u[1]}}
	}
	return out, nil
}

// rbac stands in for SubjectAccessReview: the users allowed to create.
type rbac map[string]bool

func (r rbac) Create(_ context.Context, sar *authzv1.SubjectAccessReview, _ metav1.CreateOptions) (*authzv1.SubjectAccessReview, error) {
	out := sar.DeepCopy()
	out.Status.Allowed = r[sar.Spec.User] && sar.Spec.ResourceAttributes.Verb == "create"
	return out, nil
}

func TestSenderAuthentication(t *testing.T) {
	const aud = "snapflow-functions"
	auth := &Authenticator{Audience: aud, Trusted: []string{"system:serviceaccount:snapflow:snapflow-kube-source", "system:serviceaccount:knative-eventing:*"},
		Reviewer: tokens{
			"source":    {"system:serviceaccount:snapflow:snapflow-kube-source", aud},
			"broker":    {"system:serviceaccount:knative-eventing:mt-broker-ingress-oidc", aud},
			"ci":        {"system:serviceaccount:ci:tekton", aud},
			"intruder":  {"system:serviceaccount:tenant:default", aud},
			"other-aud": {"system:serviceaccount:snapflow:snapflow-kube-source", "kubernetes"},
		}}
	access := rbac{"system:serviceaccount:ci:tekton": true}
	var calls atomic.Int32
	handle := func(ctx context.Context, e event.Event) error {
		calls.Add(1)
		if e.Type() == events.SnapshotRequested {
			if _, err := Authorize(ctx, access, authzv1.ResourceAttributes{Verb: "create", Resource: "snapshots", Namespace: "app"}); err != nil {
				return err
			}
		}
		return nil
	}
	url := serveWith(t, Options{Auth: auth, Functions: []Function{{Name: "f", Handle: handle, Requests: []string{events.SnapshotRequested}}}})
	for _, tc := range []struct {
		name, token, typ string
		want             int
		handled          bool
	}{
		{"no token", "", events.Resync, http.StatusUnauthorized, false},
		{"unknown token", "forged", events.Resync, http.StatusUnauthorized, false},
		{"token for another audience", "other-aud", events.Resync, http.StatusUnauthorized, false},
		{"trusted source", "source", events.Resync, http.StatusOK, true},
		{"trusted by prefix", "broker", events.Resync, http.StatusOK, true},
		{"untrusted sender, internal type", "intruder", events.Resync, http.StatusForbidden, false},
		{"untrusted sender, request it may make", "ci", events.SnapshotRequested, http.StatusOK, true},
		{"untrusted sender, request it may not make", "intruder", events.SnapshotRequested, http.StatusForbidden, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := calls.Load()
			code := postAs(t, url, tc.token, tc.typ)
			if code != tc.want {
				t.Fatalf("answered %d, want %d", code, tc.want)
			}
			if got := calls.Load() > before; got != tc.handled {
				t.Fatalf("handler reached = %v, want %v", got, tc.handled)
			}
		})
	}
}

func TestTrusts(t *testing.T) {
	for _, tc := range []struct {
		patterns []string
		user     string
		want     bool
	}{
		{[]string{"a"}, "a", true},
		{[]string{"a"}, "ab", false},
		{[]string{"system:serviceaccount:knative-eventing:*"}, "system:serviceaccount:knative-eventing:x", true},
		{[]string{"system:serviceaccount:knative-eventing:*"}, "system:serviceaccount:knative-eventingx:y", false},
		{[]string{"*"}, "anyone", false}, // a bare "*" is not a way to trust everybody
		{nil, "a", false},
	} {
		if got := Trusts(tc.patterns, tc.user); got != tc.want {
			t.Errorf("Trusts(%v, %q) = %v, want %v", tc.patterns, tc.user, got, tc.want)
		}
	}
}

func serveWith(t *testing.T, o Options) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	listening := make(chan string, 1)
	done := make(chan error, 1)
	o.Addr, o.Log, o.Listening = "127.0.0.1:0", logr.Discard(), listening
	go func() { done <- Serve(ctx, o) }()
	var addr string
	select {
	case addr = <-listening:
	case err := <-done:
		t.Fatalf("serve: %v", err)
	}
	t.Cleanup(func() { cancel(); <-done })
	return "http://" + addr + "/"
}

func postAs(t *testing.T, url, token, typ string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"Ce-Specversion": "1.0", "Ce-Id": "1", "Ce-Source": "test", "Ce-Type": typ, "Content-Type": "application/json"} {
		req.Header.Set(k, v)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return resp.StatusCode
}

// A function's emitted events carry its token, so a sink that checks
// senders (the retention function, without Knative) admits them.
func TestSinkEmitterSendsItsToken(t *testing.T) {
	var got atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Header.Get("Authorization"))
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("snapshot-fn"), 0o600); err != nil {
		t.Fatal(err)
	}
	late := &LateSink{TokenFile: file}
	if err := late.Set(srv.URL); err != nil {
		t.Fatal(err)
	}
	e := event.New()
	e.SetID("1")
	e.SetSource("test")
	e.SetType(events.SnapshotSucceeded)
	if err := late.Emit(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	if h, _ := got.Load().(string); h != "Bearer snapshot-fn" {
		t.Fatalf("Authorization %q, want the function's token", h)
	}
	if err := (&LateSink{TokenFile: filepath.Join(t.TempDir(), "missing")}).Set(srv.URL); err == nil {
		t.Fatal("a missing token file must be an error, not a sink without a token")
	}
}

// countingTokens counts the TokenReviews that reach the API server.
type countingTokens struct {
	tokens
	n atomic.Int32
}

func (c *countingTokens) Create(ctx context.Context, tr *authnv1.TokenReview, o metav1.CreateOptions) (*authnv1.TokenReview, error) {
	c.n.Add(1)
	return c.tokens.Create(ctx, tr, o)
}

// A flood of made-up tokens costs the API server a bounded number of
// TokenReviews and is answered 429; a sender reviewed before the flood
// keeps working, and refused tokens never push it out of the cache.
func TestTokenReviewsAreRateLimited(t *testing.T) {
	const aud = "snapflow-functions"
	rev := &countingTokens{tokens: tokens{"source": {"system:serviceaccount:snapflow:snapflow-kube-source", aud}}}
	auth := &Authenticator{Audience: aud, Reviewer: rev, Reviews: rate.NewLimiter(rate.Limit(1), 5)}
	req := func(token string) int {
		r := httptest.NewRequest(http.MethodPost, "/", nil)
		r.Header.Set("Authorization", "Bearer "+token)
		_, code, _ := auth.Authenticate(context.Background(), r)
		return code
	}
	if code := req("source"); code != 0 {
		t.Fatalf("the source: %d", code)
	}
	limited := 0
	for i := range 200 {
		switch code := req(fmt.Sprintf("forged-%d", i)); code {
		case http.StatusTooManyRequests:
			limited++
		case http.StatusUnauthorized:
		default:
			t.Fatalf("a forged token answered %d", code)
		}
	}
	if n := rev.n.Load(); n > 7 || limited < 190 {
		t.Fatalf("%d reviews reached the API server and %d were limited: want the burst only", n, limited)
	}
	if code := req("source"); code != 0 {
		t.Fatalf("the source during the flood: %d", code)
	}
	// Its review expires while the budget is spent: it is re-reviewed
	// anyway, since it was accepted before.
	auth.mu.Lock()
	for k, rv := range auth.cache {
		rv.expires = time.Now().Add(-time.Second)
		auth.cache[k] = rv
	}
	auth.mu.Unlock()
	for auth.Reviews.Allow() { // spend whatever the limiter refilled
	}
	if code := req("source"); code != 0 {
		t.Fatalf("the source after its review expired during the flood: %d", code)
	}

	// A full cache drops refused reviews before a sender's own.
	auth.mu.Lock()
	now := time.Now()
	for i := range maxReviews {
		auth.remember([32]byte{byte(i), byte(i >> 8), 1}, review{expires: now.Add(time.Minute)}, now)
	}
	auth.mu.Unlock()
	if n := len(auth.cache); n > maxReviews {
		t.Fatalf("cache grew to %d", n)
	}
	if code := req("source"); code != 0 {
		t.Fatalf("the source after the cache filled: %d", code)
	}
}
