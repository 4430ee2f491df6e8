package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
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
