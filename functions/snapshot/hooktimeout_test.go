package snapshot

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/egress"
	"github.com/snapflow/snapflow/internal/scheme"
)

// An httpRequest hook's timeout bounds the call: a receiver that never
// answers fails the hook instead of holding the run (both lists call the
// same code).
func TestHTTPHookHonoursItsTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	f := &Function{Namespace: "snapflow-system", HookEgress: egress.Policy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}}
	done := make(chan struct{})
	var ok bool
	var msg string
	go func() {
		defer close(done)
		ok, msg = f.httpHook(context.Background(), &snapv1.HTTPRequestHook{URL: srv.URL + "/freeze", Timeout: "300ms"})
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		// Only a timeout that was not honoured gets here (the deferred
		// close then lets the receiver answer).
		t.Fatal("the hook ignored its 300ms timeout")
	}
	if ok || !strings.Contains(msg, "timeout") && !strings.Contains(msg, "deadline") {
		t.Fatalf("ok %v %q, want a failure naming the timeout", ok, msg)
	}
}

// continueOnFailure is read from whichever kind the hook is.
func TestContinueOnFailureOfEveryKind(t *testing.T) {
	for _, tc := range []struct {
		name string
		hook snapv1.Hook
		want bool
	}{
		{"workloadExec set", snapv1.Hook{WorkloadExec: &snapv1.WorkloadExecHook{ContinueOnFailure: true}}, true},
		{"workloadExec unset", snapv1.Hook{WorkloadExec: &snapv1.WorkloadExecHook{}}, false},
		{"runJob set", snapv1.Hook{RunJob: &snapv1.RunJobHook{ContinueOnFailure: true}}, true},
		{"runJob unset", snapv1.Hook{RunJob: &snapv1.RunJobHook{}}, false},
		{"httpRequest set", snapv1.Hook{HTTPRequest: &snapv1.HTTPRequestHook{ContinueOnFailure: true}}, true},
		{"no kind", snapv1.Hook{}, false},
	} {
		if got := continueOnFailure(tc.hook); got != tc.want {
			t.Errorf("%s: continueOnFailure = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A runJob hook's timeout becomes its Job's deadline (a deadline of the
// jobSpec's own wins), and a Job still running a minute past it is
// stopped and fails the hook.
func TestRunJobHookTimeout(t *testing.T) {
	ctx := context.Background()
	created := time.Date(2026, 12, 7, 3, 0, 0, 0, time.UTC)
	own := int64(30)
	for _, tc := range []struct {
		name         string
		timeout      string
		ownDeadline  *int64
		wantDeadline int64
		wantLimit    time.Duration
	}{
		{"the default", "", nil, int64(DefaultHookTimeout / time.Second), DefaultHookTimeout},
		{"its timeout", "90s", nil, 90, 90 * time.Second},
		{"the jobSpec's own deadline wins", "90s", &own, 30, 90 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &snapv1.Snapshot{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "s1", UID: "s-uid"}}
			pol := &snapv1.SnapshotPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "db",
				Annotations: map[string]string{wellknown.AnnotationHooksAuthor: `{"username":"ops"}`}}}
			h := &snapv1.RunJobHook{Timeout: tc.timeout, JobSpec: batchv1.JobSpec{ActiveDeadlineSeconds: tc.ownDeadline,
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "h", Image: "busybox"}}}}}}
			c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "app"}}).Build()
			now := created
			f := &Function{Client: c, Namespace: "snapflow-system", Access: &reviewer{allowed: map[string]bool{"ops create jobs app": true}},
				Now: func() time.Time { return now }}
			ok, msg, pending, err := f.jobHook(ctx, s, pol, ListBefore, 0, h)
			if err != nil || ok || !pending {
				t.Fatalf("first call: ok %v %q pending %v err %v, want the Job created and pending", ok, msg, pending, err)
			}
			var j batchv1.Job
			if err := c.Get(ctx, client.ObjectKey{Namespace: "app", Name: hookJobName(s, "pre", 0)}, &j); err != nil {
				t.Fatal(err)
			}
			if d := j.Spec.ActiveDeadlineSeconds; d == nil || *d != tc.wantDeadline {
				t.Fatalf("activeDeadlineSeconds %v, want %d", d, tc.wantDeadline)
			}
			// The fake API server stamps no creation time: the Job's is set
			// here, and the clock moves to just inside, then past, the limit.
			j.CreationTimestamp = metav1.NewTime(created)
			if err := c.Update(ctx, &j); err != nil {
				t.Fatal(err)
			}
			now = created.Add(tc.wantLimit + time.Minute - time.Second)
			if ok, msg, pending, err := f.jobHook(ctx, s, pol, ListBefore, 0, h); err != nil || ok || !pending {
				t.Fatalf("inside the limit: ok %v %q pending %v err %v, want still pending", ok, msg, pending, err)
			}
			now = created.Add(tc.wantLimit + time.Minute + time.Second)
			ok, msg, pending, err = f.jobHook(ctx, s, pol, ListBefore, 0, h)
			if err != nil || ok || pending || !strings.Contains(msg, "did not finish within "+tc.wantLimit.String()) {
				t.Fatalf("past the limit: ok %v %q pending %v err %v, want the hook failed naming %s", ok, msg, pending, err, tc.wantLimit)
			}
			if err := c.Get(ctx, client.ObjectKeyFromObject(&j), &batchv1.Job{}); err == nil {
				t.Fatal("the overrunning hook Job was not deleted")
			}
		})
	}
}
