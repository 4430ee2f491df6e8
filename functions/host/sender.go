package host

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Sender is who delivered an event, as the API server vouched for its
// bearer token.
type Sender struct {
	User authnv1.UserInfo
	// Trusted says the sender is one of the sources the deployment lists
	// (its kube source, tick source, S3 source, Broker): it may deliver
	// any event type. Anyone else may only send request events, each
	// authorized against the sender's own RBAC.
	Trusted bool
}

type senderKey struct{}

// SenderOf returns the authenticated sender of the event being handled;
// ok is false when the server runs without sender authentication.
func SenderOf(ctx context.Context) (Sender, bool) {
	s, ok := ctx.Value(senderKey{}).(Sender)
	return s, ok
}

// WithSender returns ctx carrying s (the server does this per request).
func WithSender(ctx context.Context, s Sender) context.Context {
	return context.WithValue(ctx, senderKey{}, s)
}

// TokenReviewer is the API server's TokenReview endpoint
// (clientset.AuthenticationV1().TokenReviews()).
type TokenReviewer interface {
	Create(ctx context.Context, tr *authnv1.TokenReview, opts metav1.CreateOptions) (*authnv1.TokenReview, error)
}

// Authenticator checks each request's bearer token with a TokenReview
// scoped to Audience. Kubernetes ServiceAccount tokens (projected with that
// audience) and Knative Eventing's OIDC tokens are both issued by the
// cluster's service-account issuer, so one check serves plain and Knative
// deployments; a token minted for another audience is refused.
type Authenticator struct {
	Reviewer TokenReviewer
	Audience string
	// Trusted lists the senders that may deliver any event: user names,
	// or a prefix ending in "*" (system:serviceaccount:knative-eventing:*).
	Trusted []string
	// Reviews bounds the TokenReviews of tokens not accepted before
	// (DefaultReviewRate when nil): a flood of made-up tokens is answered
	// 429 (which senders retry) instead of being passed on to the API server.
	Reviews *rate.Limiter

	mu    sync.Mutex
	cache map[[32]byte]review
}

// DefaultReviewRate is how many new tokens a function reviews per second,
// with bursts of twice that: far above what its own sources need, since a
// token is reviewed once per reviewTTL.
const DefaultReviewRate = 20

// maxReviews bounds the review cache.
const maxReviews = 4096

type review struct {
	user    authnv1.UserInfo
	ok      bool
	expires time.Time
}

// reviewTTL bounds how long a token's review is reused: a revoked
// ServiceAccount stops being trusted within it.
const reviewTTL = 30 * time.Second

// Authenticate reviews r's bearer token. It returns the sender, or an HTTP
// status (401 or 503) and a reason that never echoes the token.
func (a *Authenticator) Authenticate(ctx context.Context, r *http.Request) (Sender, int, string) {
	h := r.Header.Get("Authorization")
	token, found := strings.CutPrefix(h, "Bearer ")
	if !found || strings.TrimSpace(token) == "" {
		return Sender{}, http.StatusUnauthorized, fmt.Sprintf("no bearer token: send a ServiceAccount token with audience %q in the Authorization header", a.Audience)
	}
	key := sha256.Sum256([]byte(token))
	now := time.Now()
	a.mu.Lock()
	rv, hit := a.cache[key]
	a.mu.Unlock()
	if !hit || now.After(rv.expires) {
		// A token accepted before is re-reviewed outside the budget, so a
		// flood of made-up ones cannot lock out the real senders.
		if !(hit && rv.ok) && !a.limiter().Allow() {
			return Sender{}, http.StatusTooManyRequests, "too many new tokens to review now; retry shortly"
		}
		res, err := a.Reviewer.Create(ctx, &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token, Audiences: []string{a.Audience}}}, metav1.CreateOptions{})
		if err != nil {
			return Sender{}, http.StatusServiceUnavailable, "cannot review the sender's token now: " + err.Error()
		}
		rv = review{user: res.Status.User, ok: res.Status.Authenticated && slices.Contains(res.Status.Audiences, a.Audience), expires: now.Add(reviewTTL)}
		a.mu.Lock()
		a.remember(key, rv, now)
		a.mu.Unlock()
	}
	if !rv.ok {
		return Sender{}, http.StatusUnauthorized, fmt.Sprintf("the bearer token is not valid for audience %q", a.Audience)
	}
	return Sender{User: rv.user, Trusted: Trusts(a.Trusted, rv.user.Username)}, 0, ""
}

func (a *Authenticator) limiter() *rate.Limiter {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.Reviews == nil {
		a.Reviews = rate.NewLimiter(DefaultReviewRate, 2*DefaultReviewRate)
	}
	return a.Reviews
}

// remember caches a review. When full it drops expired reviews first, then
// refused ones, so made-up tokens cannot push out the senders' own.
func (a *Authenticator) remember(key [32]byte, rv review, now time.Time) {
	if a.cache == nil {
		a.cache = map[[32]byte]review{}
	}
	for _, drop := range []func(review) bool{
		func(r review) bool { return now.After(r.expires) },
		func(r review) bool { return !r.ok },
		func(review) bool { return true },
	} {
		if len(a.cache) < maxReviews {
			break
		}
		maps.DeleteFunc(a.cache, func(_ [32]byte, r review) bool { return drop(r) })
	}
	a.cache[key] = rv
}

// Trusts says whether user matches one of patterns (exact, or a prefix
// ending in "*").
func Trusts(patterns []string, user string) bool {
	for _, p := range patterns {
		if pre, wild := strings.CutSuffix(p, "*"); wild && pre != "" && strings.HasPrefix(user, pre) {
			return true
		}
		if p == user {
			return true
		}
	}
	return false
}

// ErrForbidden answers 403: the sender is known but may not do this.
var ErrForbidden = errors.New("forbidden")

// AccessReviewer is the API server's SubjectAccessReview endpoint
// (clientset.AuthorizationV1().SubjectAccessReviews()).
type AccessReviewer interface {
	Create(ctx context.Context, sar *authzv1.SubjectAccessReview, opts metav1.CreateOptions) (*authzv1.SubjectAccessReview, error)
}

// Review asks the API server whether the user in who may do attrs; an
// answer of no is ErrForbidden, naming the user and what was asked.
func Review(ctx context.Context, rev AccessReviewer, who authzv1.SubjectAccessReviewSpec, attrs authzv1.ResourceAttributes) error {
	if rev == nil {
		return fmt.Errorf("%w: this function cannot check %s's rights (no SubjectAccessReview client)", ErrForbidden, who.User)
	}
	who.ResourceAttributes = &attrs
	res, err := rev.Create(ctx, &authzv1.SubjectAccessReview{Spec: who}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("review the rights of %s: %w", who.User, err)
	}
	if !res.Status.Allowed {
		what := attrs.Resource
		if attrs.Subresource != "" {
			what += "/" + attrs.Subresource
		}
		return fmt.Errorf("%w: %s may not %s %s in namespace %q; grant it that in RBAC", ErrForbidden, who.User, attrs.Verb, what, attrs.Namespace)
	}
	return nil
}

// Authorize checks that the event's sender may do attrs itself, so a
// request event never lends the function's rights to its sender. It
// returns the sender's user name to record on what the request creates.
// Without sender authentication (a loopback dev server, or a deployment
// that turned it off) there is nobody to check and the request is allowed
// as "unauthenticated".
func Authorize(ctx context.Context, rev AccessReviewer, attrs authzv1.ResourceAttributes) (string, error) {
	s, ok := SenderOf(ctx)
	if !ok {
		return "unauthenticated", nil
	}
	if rev == nil {
		return "", fmt.Errorf("%w: this function cannot check the sender's rights (no SubjectAccessReview client)", ErrForbidden)
	}
	extra := map[string]authzv1.ExtraValue{}
	for k, v := range s.User.Extra {
		extra[k] = authzv1.ExtraValue(v)
	}
	if err := Review(ctx, rev, authzv1.SubjectAccessReviewSpec{User: s.User.Username, Groups: s.User.Groups, UID: s.User.UID, Extra: extra}, attrs); err != nil {
		return "", err
	}
	return s.User.Username, nil
}
