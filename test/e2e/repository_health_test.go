package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/functions/snapshot"
	"github.com/snapflow/snapflow/internal/health"
	"github.com/snapflow/snapflow/internal/kopia"
)

func setPassword(t *testing.T, ns, password string) {
	t.Helper()
	kubectl(t, []byte(fmt.Sprintf(`
apiVersion: v1
kind: Secret
metadata: {name: kopia-password, namespace: %s}
stringData: {KOPIA_PASSWORD: %s}
`, ns, password)), 0, "apply", "-f", "-")
}

// waitProbe waits until the repository's probe record satisfies ok.
func waitProbe(t *testing.T, ns string, ok func(*snapv1.Repository) error) *snapv1.Repository {
	t.Helper()
	var r snapv1.Repository
	eventually(t, func() error {
		if err := env.Client.Get(testContext(t), clientKey(ns, "primary"), &r); err != nil {
			return err
		}
		return ok(&r)
	})
	return &r
}

// spec.health.probe re-opens a connected repository on its interval: a
// rotated password turns it Degraded at failureThreshold, with the reason
// on Ready and a Warning Event, a backup meanwhile waits instead of
// failing, and once the password is back the next probe makes it Ready
// and the backup runs. The functions' clock moves the intervals along.
func TestRepositoryProbeSeesARotatedPassword(t *testing.T) {
	const ns = "repo-probe"
	backupNamespace(t, ns, 3, "  health: {probe: {interval: 30s, failureThreshold: 2}}\n")
	kubectl(t, policy(ns, "app", "  copyMethod: Direct\n"), 0, "apply", "-f", "-")
	kubectl(t, snapshotOf(ns, "before", "app"), 0, "create", "-f", "-")
	waitSnapshot(t, ns, "before", snapv1.SnapshotSucceeded)
	t.Cleanup(func() { clock.Set(time.Time{}) })

	setPassword(t, ns, "rotated-elsewhere")
	at := time.Now().Add(time.Minute)
	clock.Set(at)
	waitProbe(t, ns, func(r *snapv1.Repository) error {
		if p := r.Status.Probe; p == nil || p.ConsecutiveFailures != 1 {
			return fmt.Errorf("no failed probe yet: %+v", p)
		}
		if r.Status.Phase != snapv1.RepositoryReady {
			return fmt.Errorf("one failure under the threshold of 2 must leave it Ready, it is %s", r.Status.Phase)
		}
		return nil
	})

	at = at.Add(time.Minute)
	clock.Set(at)
	r := waitProbe(t, ns, func(r *snapv1.Repository) error {
		if r.Status.Phase != snapv1.RepositoryDegraded {
			return fmt.Errorf("phase %s, probe %+v", r.Status.Phase, r.Status.Probe)
		}
		return nil
	})
	c := meta.FindStatusCondition(r.Status.Conditions, wellknown.ConditionReady)
	if c == nil || c.Status != "False" || c.Reason != kopia.ClassWrongPassword || !strings.Contains(c.Message, "2 consecutive") {
		t.Fatalf("Ready of a Degraded repository: %+v", c)
	}
	eventually(t, func() error {
		ev := kubectl(t, nil, 0, "-n", ns, "get", "events", "--field-selector", "reason=RepositoryDegraded,type=Warning", "-o", "jsonpath={.items[*].message}").Stdout
		if !strings.Contains(ev, "consecutive") {
			return fmt.Errorf("no RepositoryDegraded event yet: %q", ev)
		}
		return nil
	})

	// A deletion waits too: it would fail, or, on storage that is not the
	// repository any more, find nothing and release the Snapshot.
	kubectl(t, nil, 0, "-n", ns, "delete", "snapshot", "before", "--wait=false")
	eventually(t, func() error {
		var s snapv1.Snapshot
		if err := env.Client.Get(testContext(t), clientKey(ns, "before"), &s); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(s.Status.Conditions, wellknown.ConditionDeletionHeld); c == nil || c.Reason != "RepositoryDegraded" {
			return fmt.Errorf("deletion of a Snapshot in a Degraded repository: %+v", c)
		}
		return nil
	})

	// A backup asked for now waits, saying why, rather than failing.
	kubectl(t, snapshotOf(ns, "while-degraded", "app"), 0, "create", "-f", "-")
	eventually(t, func() error {
		var s snapv1.Snapshot
		if err := env.Client.Get(testContext(t), clientKey(ns, "while-degraded"), &s); err != nil {
			return err
		}
		c := meta.FindStatusCondition(s.Status.Conditions, wellknown.ConditionReady)
		if s.Status.Phase != snapv1.SnapshotPending || c == nil || c.Reason != snapshot.ReasonWaitingForRepository || !strings.Contains(c.Message, "Degraded") {
			return fmt.Errorf("snapshot %s: %+v", s.Status.Phase, c)
		}
		return nil
	})

	setPassword(t, ns, "correct-horse")
	at = at.Add(time.Minute)
	clock.Set(at)
	r = waitProbe(t, ns, func(r *snapv1.Repository) error {
		if r.Status.Phase != snapv1.RepositoryReady {
			return fmt.Errorf("phase %s, probe %+v", r.Status.Phase, r.Status.Probe)
		}
		return nil
	})
	if c := meta.FindStatusCondition(r.Status.Conditions, wellknown.ConditionReady); c.Reason != health.ReasonRecovered || r.Status.Probe.ConsecutiveFailures != 0 ||
		r.Status.LastReverifyAt == nil || r.Status.StorageStats == nil || r.Status.StorageStats.LastObservedAt == nil {
		t.Fatalf("after recovery: ready %+v, status %+v", c, r.Status)
	}
	waitSnapshot(t, ns, "while-degraded", snapv1.SnapshotSucceeded)
	eventually(t, func() error {
		var s snapv1.Snapshot
		if err := env.Client.Get(testContext(t), clientKey(ns, "before"), &s); err == nil {
			return fmt.Errorf("snapshot before is still there after recovery (%s)", s.Status.Phase)
		} else if !apierrors.IsNotFound(err) {
			return err
		}
		return nil
	})
}

// A repository whose password Secret does not exist says so on Ready while
// its bootstrap pod waits, as a kubelet keeps such a pod Pending, and
// connects once the Secret is created.
func TestRepositoryWithoutItsPasswordSecretSaysSo(t *testing.T) {
	const ns = "repo-no-secret"
	kubectl(t, []byte(`
apiVersion: v1
kind: Namespace
metadata: {name: `+ns+`}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: kopia-repo, namespace: `+ns+`}
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
---
apiVersion: kopiur.home-operations.com/v1alpha1
kind: Repository
metadata: {name: primary, namespace: `+ns+`}
spec:
  backend: {filesystem: {path: /repository, volume: {pvc: {name: kopia-repo}}}}
  encryption: {passwordSecretRef: {name: not-yet, key: KOPIA_PASSWORD}}
  create: {enabled: true}
`), 0, "apply", "-f", "-")
	waitProbe(t, ns, func(r *snapv1.Repository) error {
		c := meta.FindStatusCondition(r.Status.Conditions, wellknown.ConditionReady)
		if c == nil || c.Reason != snapshot.ReasonMoverCannotStart || !strings.Contains(c.Message, `"not-yet"`) || !strings.Contains(c.Message, "CreateContainerConfigError") {
			return fmt.Errorf("Ready says %+v", c)
		}
		return nil
	})
	kubectl(t, []byte(`
apiVersion: v1
kind: Secret
metadata: {name: not-yet, namespace: `+ns+`}
stringData: {KOPIA_PASSWORD: late-but-fine}
`), 0, "apply", "-f", "-")
	waitRepository(t, ns, "primary", snapv1.RepositoryReady)
}

// A policy that fans out to a repository not created yet says which on its
// RepositoriesFound condition, and stops once it exists.
func TestFanoutPolicySaysWhichRepositoriesAreMissing(t *testing.T) {
	const ns = "fanout-missing"
	repoNamespace(t, ns, "/repository", "  create: {enabled: true}\n")
	kubectl(t, []byte(`
apiVersion: kopiur.home-operations.com/v1alpha1
kind: SnapshotPolicy
metadata: {name: both, namespace: `+ns+`}
spec:
  repositories: [{name: primary}, {name: offsite}]
  copyMethod: Direct
  sources: [{pvc: {name: app-data}}]
`), 0, "apply", "-f", "-")
	found := func(want metav1.ConditionStatus, says string) {
		t.Helper()
		eventually(t, func() error {
			var p snapv1.SnapshotPolicy
			if err := env.Client.Get(testContext(t), clientKey(ns, "both"), &p); err != nil {
				return err
			}
			c := meta.FindStatusCondition(p.Status.Conditions, wellknown.ConditionRepositoriesFound)
			if c == nil || c.Status != want || !strings.Contains(c.Message, says) {
				return fmt.Errorf("RepositoriesFound: %+v", c)
			}
			return nil
		})
	}
	found(metav1.ConditionFalse, "Repository/offsite named by the policy")
	kubectl(t, []byte(`
apiVersion: kopiur.home-operations.com/v1alpha1
kind: Repository
metadata: {name: offsite, namespace: `+ns+`}
spec:
  backend: {filesystem: {path: /offsite, volume: {pvc: {name: kopia-repo}}}}
  encryption: {passwordSecretRef: {name: kopia-password, key: KOPIA_PASSWORD}}
  create: {enabled: true}
`), 0, "apply", "-f", "-")
	found(metav1.ConditionTrue, "exists")
}
