package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/events"
)

// A slot whose firing admission refuses for a reason the user can fix is
// held, not spent: Ready says why, and once the namespace is allowed again
// the same slot fires.
func TestRefusedSlotIsHeldAndFiresOnceFixed(t *testing.T) {
	const ns = "schedule-hold"
	ensureNamespace(t, ns, `"hold-tenant":"yes"`)
	kubectl(t, []byte(`
apiVersion: kopiur.home-operations.com/v1alpha1
kind: ClusterRepository
metadata: {name: hold-tenants}
spec:
  backend: {filesystem: {path: /backups/hold}}
  encryption: {passwordSecretRef: {name: pw, namespace: snapflow-system}}
  allowedNamespaces: {selector: {matchLabels: {hold-tenant: "yes"}}}
---
apiVersion: kopiur.home-operations.com/v1alpha1
kind: SnapshotPolicy
metadata: {name: data, namespace: `+ns+`}
spec:
  repository: {kind: ClusterRepository, name: hold-tenants}
  sources: [{pvc: {name: data}}]
`), 0, "apply", "-f", "-")

	// The namespace loses its access before the schedule's first slot.
	kubectl(t, nil, 0, "label", "namespace", ns, "hold-tenant-")
	kubectl(t, []byte(`
apiVersion: kopiur.home-operations.com/v1alpha1
kind: SnapshotSchedule
metadata: {name: nightly, namespace: `+ns+`}
spec:
  policyRef: {name: data}
  schedule: {cron: "0 3 * * *", timezone: UTC, runOnCreate: true}
`), 0, "apply", "-f", "-")
	first := pinned(t, ns, "nightly", "hold-1").Status.NextSchedule.At.Time

	eventually(t, func() error {
		tick(t, "hold-2")
		s := getSchedule(t, ns, "nightly")
		sched := meta.FindStatusCondition(s.Status.Conditions, "Scheduled")
		ready := meta.FindStatusCondition(s.Status.Conditions, wellknown.ConditionReady)
		switch {
		case sched == nil || sched.Reason != "FiringFailed" || !strings.Contains(sched.Message, "allowedNamespaces.selector"):
			return fmt.Errorf("Scheduled condition %+v", sched)
		case ready == nil || ready.Status != metav1.ConditionFalse || !strings.Contains(ready.Message, "retried on each tick until"):
			return fmt.Errorf("Ready condition %+v", ready)
		case s.Status.LastSchedule != nil:
			return fmt.Errorf("the refused slot was spent: lastSchedule %+v", s.Status.LastSchedule)
		case s.Status.NextSchedule == nil || !s.Status.NextSchedule.At.Time.Equal(first):
			return fmt.Errorf("the refused slot %s is no longer pinned: %+v", first, s.Status.NextSchedule)
		}
		return nil
	})
	// A request event admission refuses is answered 400 (a broker must not
	// retry it for ever), and creates nothing either.
	e := event.New()
	e.SetID("hold-request")
	e.SetSource("ops/curl")
	e.SetType(events.SnapshotRequested)
	if err := e.SetData(event.ApplicationJSON, events.SnapshotRequest{Namespace: ns, Policy: "data"}); err != nil {
		t.Fatal(err)
	}
	body, _ := e.MarshalJSON()
	if code := postEvent(t, env.Functions.URL, "application/cloudevents+json", body); code != http.StatusBadRequest {
		t.Fatalf("a request admission refuses answered %d, want 400", code)
	}
	if n := len(policySnapshots(t, ns, "data")); n != 0 {
		t.Fatalf("%d Snapshots were created while admission refused them", n)
	}

	// Fixed: the held slot fires on the next tick.
	kubectl(t, nil, 0, "label", "namespace", ns, "hold-tenant=yes")
	eventually(t, func() error {
		tick(t, "hold-3")
		s := getSchedule(t, ns, "nightly")
		ready := meta.FindStatusCondition(s.Status.Conditions, wellknown.ConditionReady)
		switch {
		case s.Status.LastSchedule == nil || s.Status.LastSchedule.At == nil || !s.Status.LastSchedule.At.Time.Equal(first.Truncate(time.Second)):
			return fmt.Errorf("the held slot %s has not fired: lastSchedule %+v", first, s.Status.LastSchedule)
		case ready == nil || ready.Status != metav1.ConditionTrue:
			return fmt.Errorf("Ready condition %+v", ready)
		}
		return nil
	})
	if n := len(policySnapshots(t, ns, "data")); n != 1 {
		t.Fatalf("the held slot created %d Snapshots, want 1", n)
	}
}
