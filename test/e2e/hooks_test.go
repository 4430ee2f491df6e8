package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/functions/snapshot"
	"github.com/snapflow/snapflow/test/localnode"
)

// hookServer records the hook calls it receives; /fail answers 500.
type hookServer struct {
	*httptest.Server
	mu    sync.Mutex
	calls []string
}

func newHookServer(t *testing.T) *hookServer {
	h := &hookServer{}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, _ := r.BasicAuth()
		h.mu.Lock()
		h.calls = append(h.calls, fmt.Sprintf("%s %s user=%s:%s ct=%s", r.Method, r.URL.Path, user, pass, r.Header.Get("Content-Type")))
		h.mu.Unlock()
		if strings.HasPrefix(r.URL.Path, "/fail") {
			http.Error(w, "database refused to freeze", http.StatusInternalServerError)
		}
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, "/landed", http.StatusFound)
		}
	}))
	t.Cleanup(h.Close)
	return h
}

// hookedPolicy is the policy "app" with one httpRequest hook before the
// snapshot and one after it.
func hookedPolicy(ns, before, after string) []byte {
	return policy(ns, "app", fmt.Sprintf(`  copyMethod: Direct
  hooks:
    beforeSnapshot:
      - httpRequest: {url: %q}
    afterSnapshot:
      - httpRequest: {url: %q}
`, before, after))
}

func (h *hookServer) got() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.calls...)
}

func TestHooksRunOnceAroundTheBackup(t *testing.T) {
	const ns = "hooks-ok"
	backupNamespace(t, ns, 3, "")
	srv := newHookServer(t)
	base := strings.Replace(srv.URL, "http://", "http://app:s3cret@", 1)
	kubectl(t, policy(ns, "app", fmt.Sprintf(`  copyMethod: Direct
  hooks:
    beforeSnapshot:
      - httpRequest: {url: %q, headers: [{name: Content-Type, value: application/json}], body: '{"op":"freeze"}'}
      - runJob:
          jobSpec:
            template:
              spec:
                restartPolicy: Never
                containers: [{name: sync, image: busybox, command: [sh, -c, "echo flushed"]}]
    afterSnapshot:
      - httpRequest: {url: %q, method: PUT}
`, base+"/freeze", srv.URL+"/thaw")), 0, "apply", "-f", "-")
	kubectl(t, snapshotOf(ns, "hooked", "app"), 0, "create", "-f", "-")
	s := waitSnapshot(t, ns, "hooked", snapv1.SnapshotSucceeded)
	eventually(t, func() error {
		if err := env.Client.Get(testContext(t), clientKey(ns, "hooked"), s); err != nil {
			return err
		}
		if s.Status.Hooks == nil || s.Status.Hooks.PostCompletedAt == nil {
			return fmt.Errorf("afterSnapshot not stamped yet: %+v", s.Status.Hooks)
		}
		return nil
	})
	h := s.Status.Hooks
	if h.PreCompletedAt == nil || len(h.Results) != 3 || !h.Results[0].Succeeded || h.Results[1].Kind != "runJob" || !h.Results[1].Succeeded || h.Results[2].List != snapshot.ListAfter {
		t.Fatalf("hook results %+v", h)
	}
	calls := srv.got()
	if len(calls) != 2 || calls[0] != "POST /freeze user=app:s3cret ct=application/json" || !strings.HasPrefix(calls[1], "PUT /thaw") {
		t.Fatalf("hook calls %q: want one POST /freeze with basic auth and header, then one PUT /thaw", calls)
	}
	// The hook Job ran and belongs to the Snapshot.
	var jobs batchv1.JobList
	if err := env.Client.List(testContext(t), &jobs, client.InNamespace(ns), client.MatchingLabels{wellknown.LabelOp: "hook"}); err != nil || len(jobs.Items) != 1 || jobs.Items[0].OwnerReferences[0].Name != "hooked" {
		t.Fatalf("hook jobs %+v %v", jobs.Items, err)
	}
	// Events after the end run nothing again.
	kubectl(t, nil, 0, "-n", ns, "annotate", "snapshot", "hooked", "nudge=1")
	kubectl(t, nil, 0, "-n", ns, "wait", "--for=jsonpath={.metadata.annotations.nudge}=1", "snapshot/hooked")
	if n := len(srv.got()); n != 2 {
		t.Fatalf("hooks ran again: %d calls", n)
	}
}

func TestFailingHookAbortsTheBackupButStillThaws(t *testing.T) {
	const ns = "hooks-fail"
	backupNamespace(t, ns, 3, "")
	srv := newHookServer(t)
	kubectl(t, hookedPolicy(ns, srv.URL+"/fail", srv.URL+"/thaw"), 0, "apply", "-f", "-")
	kubectl(t, snapshotOf(ns, "aborted", "app"), 0, "create", "-f", "-")
	s := waitSnapshot(t, ns, "aborted", snapv1.SnapshotFailed)
	if s.Status.Failure == nil || s.Status.Failure.Class != "HookFailed" || !strings.Contains(s.Status.Failure.Message, "500") {
		t.Fatalf("failure %+v", s.Status.Failure)
	}
	c := meta.FindStatusCondition(s.Status.Conditions, wellknown.ConditionHooksSucceeded)
	if c == nil || c.Status != "False" || !strings.Contains(c.Message, "beforeSnapshot[0]") || !strings.Contains(c.Message, "500") {
		t.Fatalf("HooksSucceeded %+v should name the hook and the cause", c)
	}
	if strings.Contains(c.Message, "database refused to freeze") || strings.Contains(s.Status.Failure.Message, "database refused to freeze") {
		t.Fatalf("the receiver's response body reached the status: %+v / %+v", c, s.Status.Failure)
	}
	if s.Status.Job != nil {
		t.Fatalf("an aborted backup never creates its mover job: %+v", s.Status.Job)
	}
	eventually(t, func() error {
		for _, c := range srv.got() {
			if strings.HasPrefix(c, "POST /thaw") {
				return nil
			}
		}
		return fmt.Errorf("afterSnapshot did not run after the failure: %q", srv.got())
	})
}

// An httpRequest hook runs from snapflow's namespace: it may not follow a
// redirect (the receiver behind it is never called) nor reach the cloud
// metadata endpoint, and both say why in the hook results.
func TestHTTPHookEgressIsRefused(t *testing.T) {
	const ns = "hooks-egress"
	backupNamespace(t, ns, 1, "")
	srv := newHookServer(t)
	// The cluster's own networks are discovered, not only listed by the
	// operator: the API server's Service address and a pod on the node.
	var cidrs networkingv1.ServiceCIDRList
	if err := env.Client.List(testContext(t), &cidrs); err != nil || len(cidrs.Items) == 0 || len(cidrs.Items[0].Spec.CIDRs) == 0 {
		t.Fatalf("the control plane should have a ServiceCIDR: %d (%v)", len(cidrs.Items), err)
	}
	svcRange := netip.MustParsePrefix(cidrs.Items[0].Spec.CIDRs[0])
	apiServer := svcRange.Addr().Next()
	podAddr := netip.MustParsePrefix(localnode.PodCIDR).Addr().Next().Next()
	kubectl(t, policy(ns, "app", fmt.Sprintf(`  copyMethod: Direct
  hooks:
    beforeSnapshot:
      - httpRequest: {url: %q, continueOnFailure: true}
      - httpRequest: {url: "https://%s:443/api", continueOnFailure: true}
      - httpRequest: {url: "http://%s:8080/", continueOnFailure: true}
      - httpRequest: {url: "http://169.254.169.254/latest/meta-data/iam/security-credentials/"}
`, srv.URL+"/redirect", apiServer, podAddr)), 0, "apply", "-f", "-")
	kubectl(t, snapshotOf(ns, "egress", "app"), 0, "create", "-f", "-")
	s := waitSnapshot(t, ns, "egress", snapv1.SnapshotFailed)
	if s.Status.Failure == nil || s.Status.Failure.Class != "HookFailed" {
		t.Fatalf("failure %+v, want HookFailed", s.Status.Failure)
	}
	res := map[int32]snapv1.HookResult{}
	for _, r := range s.Status.Hooks.Results {
		if r.List == snapshot.ListBefore {
			res[r.Index] = r
		}
	}
	if r := res[0]; r.Succeeded || !strings.Contains(r.Message, "redirects are not followed") {
		t.Errorf("redirect hook result %+v", r)
	}
	if r := res[1]; r.Succeeded || !strings.Contains(r.Message, svcRange.String()) {
		t.Errorf("API server address hook result %+v, want it refused naming %s", r, svcRange)
	}
	if r := res[2]; r.Succeeded || !strings.Contains(r.Message, localnode.PodCIDR) {
		t.Errorf("pod address hook result %+v, want it refused naming %s", r, localnode.PodCIDR)
	}
	if r := res[3]; r.Succeeded || !strings.Contains(r.Message, "cloud metadata") {
		t.Errorf("metadata hook result %+v", r)
	}
	for _, c := range srv.got() {
		if strings.Contains(c, "/landed") {
			t.Fatalf("the redirect was followed: %q", srv.got())
		}
	}
}

// A run asked to stop (as a schedule's Replace asks, or a person with
// kubectl annotate) loses its mover and ends Failed, and its afterSnapshot
// hook still runs: a workload quiesced for it is resumed.
func TestCancellingARunThawsTheWorkload(t *testing.T) {
	const ns = "hooks-cancel"
	// 4 MiB at 256 KiB/s: still uploading when the cancel comes.
	backupNamespace(t, ns, 1, "  moverDefaults: {throttle: {uploadBytesPerSecond: 262144}}\n")
	writeRandom(t, filepath.Join(env.Functions.Node.PVCDir(ns, "app-data"), "big"), 4<<20)
	srv := newHookServer(t)
	kubectl(t, hookedPolicy(ns, srv.URL+"/freeze", srv.URL+"/thaw"), 0, "apply", "-f", "-")
	kubectl(t, snapshotOf(ns, "long", "app"), 0, "create", "-f", "-")
	var job string
	eventually(t, func() error {
		var s snapv1.Snapshot
		if err := env.Client.Get(testContext(t), clientKey(ns, "long"), &s); err != nil {
			return err
		}
		if s.Status.Job == nil || s.Status.Phase != snapv1.SnapshotRunning {
			return fmt.Errorf("not running yet: %s", s.Status.Phase)
		}
		job = s.Status.Job.Name
		return nil
	})
	kubectl(t, nil, 0, "-n", ns, "annotate", "snapshot", "long", wellknown.AnnotationCancelRequested+"=on-call stopped it")
	s := waitSnapshot(t, ns, "long", snapv1.SnapshotFailed)
	if f := s.Status.Failure; f == nil || f.Class != snapshot.ReasonCancelled || !strings.Contains(f.Message, "on-call stopped it") {
		t.Fatalf("failure %+v: want class %s with the reason given", s.Status.Failure, snapshot.ReasonCancelled)
	}
	eventually(t, func() error {
		if err := env.Client.Get(testContext(t), clientKey(ns, "long"), s); err != nil {
			return err
		}
		if s.Status.Hooks == nil || s.Status.Hooks.PostCompletedAt == nil {
			return fmt.Errorf("afterSnapshot hooks not run yet: %+v", s.Status.Hooks)
		}
		return nil
	})
	if calls := srv.got(); len(calls) != 2 || !strings.HasPrefix(calls[0], "POST /freeze") || !strings.HasPrefix(calls[1], "POST /thaw") {
		t.Fatalf("hook calls %q: want the freeze, then the thaw", calls)
	}
	eventually(t, func() error {
		var j batchv1.Job
		if err := env.Client.Get(testContext(t), clientKey(ns, job), &j); err == nil && j.DeletionTimestamp == nil {
			return fmt.Errorf("the cancelled run's mover Job %s is still there", job)
		}
		return nil
	})
}
