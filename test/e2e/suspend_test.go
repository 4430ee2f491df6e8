package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
)

// spec.suspend on a SnapshotPolicy skips the recipe entirely, as the guide
// says: its schedules' slots pass without minting Snapshots, and retention
// prunes nothing even when the policy now keeps fewer.
func TestSuspendedPolicyIsSkippedBySchedulesAndRetention(t *testing.T) {
	const ns = "policy-suspend"
	backupNamespace(t, ns, 1, "")
	kubectl(t, policy(ns, "app", "  copyMethod: Direct\n  retention: {keepLatest: 3}\n"), 0, "apply", "-f", "-")
	for _, name := range []string{"s1", "s2"} {
		kubectl(t, snapshotOf(ns, name, "app"), 0, "create", "-f", "-")
		waitSnapshot(t, ns, name, snapv1.SnapshotSucceeded)
	}
	kubectl(t, policy(ns, "app", "  copyMethod: Direct\n  suspend: true\n  retention: {keepLatest: 1}\n"), 0, "apply", "-f", "-")
	resync(t, "retention")
	hourlySchedule(t, ns, "hourly", "app")
	t.Cleanup(func() { clock.Set(time.Time{}) })
	next := pinned(t, ns, "hourly", "ps1").Status.NextSchedule
	clock.Set(next.At.Add(5 * time.Second))
	tick(t, "ps2")
	eventually(t, func() error {
		ev := kubectl(t, nil, 0, "-n", ns, "get", "events", "--field-selector", "reason=PolicySuspended", "-o", "jsonpath={.items[*].message}").Stdout
		if !strings.Contains(ev, "suspended SnapshotPolicy app") {
			return fmt.Errorf("no PolicySuspended event yet: %q", ev)
		}
		return nil
	})
	if kids := scheduleSnapshots(t, ns, "hourly"); len(kids) != 0 {
		t.Fatalf("a suspended policy's slot minted %v", names(kids))
	}
	if s := getSchedule(t, ns, "hourly"); !s.Status.NextSchedule.At.Time.Equal(next.At.Add(time.Hour)) {
		t.Fatalf("the slot should pass, not queue: next %s", s.Status.NextSchedule.At)
	}
	resync(t, "retention")
	for _, name := range []string{"s1", "s2"} {
		if s := waitSnapshot(t, ns, name, snapv1.SnapshotSucceeded); s.DeletionTimestamp != nil {
			t.Fatalf("retention pruned %s of a suspended policy", name)
		}
	}
}

// spec.suspend on a Repository leaves its data alone: new runs wait for
// the resume, retention prunes nothing, and deletions are held with the
// reason; once resumed, all of it goes on.
func TestSuspendedRepositoryIsLeftAlone(t *testing.T) {
	const ns = "repo-suspend"
	backupNamespace(t, ns, 1, "")
	kubectl(t, policy(ns, "app", "  copyMethod: Direct\n  retention: {keepLatest: 3}\n"), 0, "apply", "-f", "-")
	ids := backups(t, ns, "app", "s1", "s2")
	kubectl(t, nil, 0, "-n", ns, "patch", "repository", "primary", "--type=merge", "-p", `{"spec":{"suspend":true}}`)
	kubectl(t, policy(ns, "app", "  copyMethod: Direct\n  retention: {keepLatest: 1}\n"), 0, "apply", "-f", "-")

	kubectl(t, snapshotOf(ns, "s3", "app"), 0, "create", "-f", "-")
	eventually(t, func() error {
		s := getSnapshot(t, ns, "s3")
		c := meta.FindStatusCondition(s.Status.Conditions, wellknown.ConditionReady)
		if s.Status.Phase != snapv1.SnapshotPending || c == nil || c.Reason != "RepositorySuspended" || !strings.Contains(c.Message, "resumed") {
			return fmt.Errorf("s3 is %q with %+v, want Pending: RepositorySuspended", s.Status.Phase, c)
		}
		return nil
	})
	kubectl(t, nil, 0, "-n", ns, "delete", "snapshot", "s1", "--wait=false")
	eventually(t, func() error {
		s := getSnapshot(t, ns, "s1")
		c := meta.FindStatusCondition(s.Status.Conditions, wellknown.ConditionDeletionHeld)
		if c == nil || c.Reason != "RepositorySuspended" {
			return fmt.Errorf("s1 deletion: %+v, want it held as RepositorySuspended", c)
		}
		return nil
	})
	resync(t, "retention")
	if s := getSnapshot(t, ns, "s2"); s.DeletionTimestamp != nil {
		t.Fatal("retention pruned s2 from a suspended repository")
	}
	if left := kopiaIDs(t, ns); !left[ids["s1"]] || !left[ids["s2"]] {
		t.Fatalf("a suspended repository lost data: had %v, left %v", ids, left)
	}

	kubectl(t, nil, 0, "-n", ns, "patch", "repository", "primary", "--type=merge", "-p", `{"spec":{"suspend":false}}`)
	waitSnapshot(t, ns, "s3", snapv1.SnapshotSucceeded)
	waitGone(t, ns, "s1")
	resync(t, "retention")
	waitGone(t, ns, "s2")
	if left := kopiaIDs(t, ns); left[ids["s1"]] {
		t.Fatalf("s1's kopia snapshot %s outlived its deletion after the resume", ids["s1"])
	}
}
