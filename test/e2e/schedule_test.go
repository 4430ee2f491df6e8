package e2e

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/snapflow/snapflow/cli"
)

// schedule next inherits the repository's scheduleDefaults, as the schedule
// function will, and prints slots with H, timezone and jitter applied.
func TestScheduleNextInheritsRepositoryDefaults(t *testing.T) {
	const ns = "schedule-next"
	ensureNamespace(t, ns, "")
	kubectl(t, []byte(`apiVersion: kopiur.home-operations.com/v1alpha1
kind: Repository
metadata: {name: nas, namespace: schedule-next}
spec:
  backend: {filesystem: {path: /repository, volume: {pvc: {name: repo}}}}
  encryption: {passwordSecretRef: {name: pw}}
  scheduleDefaults: {timezone: Asia/Tokyo, jitter: 5m}
---
apiVersion: kopiur.home-operations.com/v1alpha1
kind: SnapshotPolicy
metadata: {name: p, namespace: schedule-next}
spec:
  repository: {name: nas}
  sources: [{pvc: {name: data}}]
---
apiVersion: kopiur.home-operations.com/v1alpha1
kind: SnapshotSchedule
metadata: {name: nightly, namespace: schedule-next}
spec:
  policyRef: {name: p}
  schedule: {cron: "H 2 * * *"}
`), 0, "apply", "-f", "-")
	var res cli.ScheduleNext
	if err := json.Unmarshal([]byte(snapflowCLI(t, 0, "schedule", "next", "--schedule", "nightly", "-n", ns, "--count", "3", "-o", "json")), &res); err != nil {
		t.Fatal(err)
	}
	if res.Timezone != "Asia/Tokyo" || res.Jitter != "5m" || len(res.Firings) != 3 {
		t.Fatalf("next = %+v", res)
	}
	tokyo, _ := time.LoadLocation("Asia/Tokyo")
	for _, f := range res.Firings {
		if f.Slot.In(tokyo).Hour() != 2 || f.At.Before(f.Slot) || f.At.Sub(f.Slot) >= 5*time.Minute {
			t.Fatalf("firing %+v is not 02:xx Tokyo within 5m jitter", f)
		}
	}
}
