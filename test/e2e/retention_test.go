package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/events"
	"github.com/snapflow/snapflow/internal/kopia"
)

// keepLatest 2 over four runs: after the fourth succeeds, retention prunes
// the two oldest, and the cleanup function removes their kopia data. A
// pinned Snapshot is kept however old it is.
func TestRetentionPrunesAndDeletesKopiaData(t *testing.T) {
	const ns = "retention-gfs"
	backupNamespace(t, ns, 2, "")
	kubectl(t, policy(ns, "app", "  copyMethod: Direct\n  retention: {keepLatest: 2}\n"), 0, "apply", "-f", "-")
	ids := map[string]string{}
	for _, n := range []string{"r1", "r2", "r3", "r4"} {
		doc := string(snapshotOf(ns, n, "app"))
		if n == "r1" {
			doc = strings.Replace(doc, "spec: {policyRef: {name: app}}", "spec: {policyRef: {name: app}, pin: true}", 1)
		}
		kubectl(t, []byte(doc), 0, "create", "-f", "-")
		ids[n] = waitSnapshot(t, ns, n, snapv1.SnapshotSucceeded).Status.Snapshot.KopiaSnapshotID
		// Status times have whole seconds, and GFS breaks ties by name:
		// keep the runs in distinct seconds so "oldest" is unambiguous.
		time.Sleep(1100 * time.Millisecond)
	}
	waitGone(t, ns, "r2")
	eventually(t, func() error {
		var list snapv1.SnapshotList
		if err := env.Client.List(testContext(t), &list, client.InNamespace(ns), client.MatchingLabels{wellknown.LabelConfig: "app"}); err != nil {
			return err
		}
		var names []string
		for _, s := range list.Items {
			names = append(names, s.Name)
		}
		if strings.Join(names, ",") != "r1,r3,r4" {
			return fmt.Errorf("left %v, want r1 (pinned), r3, r4", names)
		}
		return nil
	})
	left := kopiaIDs(t, ns)
	if left[ids["r2"]] {
		t.Errorf("the pruned r2 still has its kopia snapshot")
	}
	for _, n := range []string{"r1", "r3", "r4"} {
		if !left[ids[n]] {
			t.Errorf("kept %s lost its kopia snapshot", n)
		}
	}
	var p snapv1.SnapshotPolicy
	if err := env.Client.Get(testContext(t), clientKey(ns, "app"), &p); err != nil {
		t.Fatal(err)
	}
	if r := p.Status.Retention; r == nil || r.LastPruneAt == nil || p.Status.LastSuccessfulSnapshot == nil {
		t.Fatalf("policy status %+v", p.Status)
	}
	if !strings.Contains(strings.Join(env.Functions.Emitted.Types(), "\n"), events.RetentionPruned+" "+ns+"/app") {
		t.Errorf("no %s event among %v", events.RetentionPruned, env.Functions.Emitted.Types())
	}
	// The pruned Snapshot was stamped as snapflow's own prune, so the breaker never counted it.
	ev := kubectl(t, nil, 0, "-n", ns, "get", "events", "--field-selector", "reason=RetentionPruned", "-o", "jsonpath={.items[*].message}").Stdout
	if !strings.Contains(ev, "r2") {
		t.Errorf("the policy should carry a RetentionPruned event naming r2: %q", ev)
	}
}

func TestSpecPinPinsAndUnpinsInKopia(t *testing.T) {
	const ns = "pin-kopia"
	ctx := testContext(t)
	backupNamespace(t, ns, 2, "")
	kubectl(t, policy(ns, "app", ""), 0, "apply", "-f", "-")
	kubectl(t, snapshotOf(ns, "s1", "app"), 0, "apply", "-f", "-")
	s := waitSnapshot(t, ns, "s1", snapv1.SnapshotSucceeded)
	if p := s.Status.Snapshot.Pinned; p == nil || *p {
		t.Fatalf("status.snapshot.pinned = %v, want false", p)
	}
	kopiaPinned := func(id string) bool {
		r, err := kopia.Open(ctx, kopia.OpenOptions{Backend: kopia.Backend{Filesystem: &kopia.FilesystemBackend{
			Path: filepath.Join(env.Functions.Node.PVCDir(ns, "kopia-repo"), "repository")}}, Password: "correct-horse", ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close(ctx)
		info, err := r.Get(ctx, id)
		if err != nil {
			t.Fatalf("kopia snapshot %s: %v", id, err)
		}
		return info.Pinned
	}
	waitPinned := func(want bool) string {
		var id string
		eventually(t, func() error {
			var cur snapv1.Snapshot
			if err := env.Client.Get(ctx, clientKey(ns, "s1"), &cur); err != nil {
				return err
			}
			rec := cur.Status.Snapshot
			if rec.Pinned == nil || *rec.Pinned != want {
				return fmt.Errorf("status.snapshot %+v, want pinned=%v (conditions %+v)", rec, want, cur.Status.Conditions)
			}
			id = rec.KopiaSnapshotID
			return nil
		})
		return id
	}
	for _, want := range []bool{true, false} {
		kubectl(t, nil, 0, "patch", "snapshot", "s1", "-n", ns, "--type=merge", "-p", fmt.Sprintf(`{"spec":{"pin":%v}}`, want))
		id := waitPinned(want)
		if got := kopiaPinned(id); got != want {
			t.Fatalf("kopia snapshot %s pinned=%v after spec.pin=%v", id, got, want)
		}
	}
}
