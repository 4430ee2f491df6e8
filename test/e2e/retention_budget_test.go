package e2e

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
)

// Lowering keepLatest from 4 to 1 under a repository threshold of 1: the
// retention function prunes only the oldest, keeps the other two with a
// MassDeletionHeld condition that prints the exact acknowledgement, keeps
// them through a resync, and prunes them (kopia data too) once the owner
// runs that command.
func TestRetentionBudgetHoldsAMassPruneUntilAcknowledged(t *testing.T) {
	const ns = "retention-budget"
	ctx := testContext(t)
	backupNamespace(t, ns, 2, "  deletionProtection: {threshold: 1}\n")
	kubectl(t, policy(ns, "app", "  copyMethod: Direct\n  retention: {keepLatest: 4}\n"), 0, "apply", "-f", "-")
	ids := map[string]string{}
	for _, n := range []string{"b1", "b2", "b3", "b4"} {
		kubectl(t, snapshotOf(ns, n, "app"), 0, "create", "-f", "-")
		ids[n] = waitSnapshot(t, ns, n, snapv1.SnapshotSucceeded).Status.Snapshot.KopiaSnapshotID
		time.Sleep(1100 * time.Millisecond) // distinct end seconds: "oldest" is unambiguous
	}
	names := func() string {
		var list snapv1.SnapshotList
		if err := env.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{wellknown.LabelConfig: "app"}); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, s := range list.Items {
			if s.DeletionTimestamp == nil {
				out = append(out, s.Name)
			}
		}
		sort.Strings(out)
		return strings.Join(out, ",")
	}

	kubectl(t, nil, 0, "-n", ns, "patch", "snapshotpolicy", "app", "--type", "merge", "-p", `{"spec":{"retention":{"keepLatest":1}}}`)
	var p snapv1.SnapshotPolicy
	eventually(t, func() error {
		if err := env.Client.Get(ctx, clientKey(ns, "app"), &p); err != nil {
			return err
		}
		c := meta.FindStatusCondition(p.Status.Conditions, wellknown.ConditionMassDeletionHeld)
		if c == nil || c.Status != "True" {
			return fmt.Errorf("no MassDeletionHeld condition yet: %+v", p.Status.Conditions)
		}
		if got := names(); got != "b2,b3,b4" {
			return fmt.Errorf("left %s, want b2,b3,b4 (only the oldest pruned)", got)
		}
		return nil
	})
	c := meta.FindStatusCondition(p.Status.Conditions, wellknown.ConditionMassDeletionHeld)
	br := p.Status.Retention.Breaker
	if br == nil || br.HeldSince == nil || strings.Join(br.Held, ",") != "b2,b3" || br.Threshold != 1 {
		t.Fatalf("status.retention.breaker = %+v, want b2,b3 held under threshold 1", br)
	}
	ack := "kubectl annotate --overwrite snapshotpolicy/app -n " + ns + " " + wellknown.AnnotationAllowMassDeletion + "=" + br.HeldSince.UTC().Format(time.RFC3339)
	if !strings.Contains(c.Message, ack) {
		t.Fatalf("condition message %q does not print the acknowledgement %q", c.Message, ack)
	}
	ev := kubectl(t, nil, 0, "-n", ns, "get", "events", "--field-selector", "reason=RetentionBudgetExceeded", "-o", "jsonpath={.items[*].message}").Stdout
	if !strings.Contains(ev, "b2, b3") {
		t.Errorf("no RetentionBudgetExceeded event naming the held Snapshots: %q", ev)
	}

	// A resync (as the PingSource sends) changes nothing: the hold is not a race.
	resync(t, "retention")
	if got := names(); got != "b2,b3,b4" {
		t.Fatalf("after a resync left %s, want b2,b3,b4", got)
	}
	waitGone(t, ns, "b1") // the cleanup function has removed b1's kopia data
	if left := kopiaIDs(t, ns); !left[ids["b2"]] || !left[ids["b3"]] || left[ids["b1"]] {
		t.Fatalf("kopia snapshots after the hold: %v (b1 %s should be gone, b2 and b3 kept)", left, ids["b1"])
	}

	// The owner runs the printed command: the held Snapshots go, and so does their data.
	args := strings.Fields(strings.TrimPrefix(ack, "kubectl "))
	kubectl(t, nil, 0, args...)
	eventually(t, func() error {
		if got := names(); got != "b4" {
			return fmt.Errorf("left %s after the acknowledgement, want b4", got)
		}
		if err := env.Client.Get(ctx, clientKey(ns, "app"), &p); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(p.Status.Conditions, wellknown.ConditionMassDeletionHeld); c != nil {
			return fmt.Errorf("MassDeletionHeld still set: %+v", c)
		}
		left := kopiaIDs(t, ns)
		if left[ids["b2"]] || left[ids["b3"]] || !left[ids["b4"]] {
			return fmt.Errorf("kopia snapshots %v: want only b4's %s", left, ids["b4"])
		}
		return nil
	})
}
