package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/snapflow/snapflow/events"
	"github.com/snapflow/snapflow/test/harness"
)

// tick posts what a PingSource posts every minute to the schedule function.
func tick(ctx context.Context, fns *harness.Functions) error {
	e := cloudevents.NewEvent()
	e.SetID(fmt.Sprintf("demo-tick-%d", time.Now().UnixNano()))
	e.SetType(events.Ping)
	e.SetSource("/apis/v1/namespaces/snapflow-system/pingsources/tick")
	body, err := e.MarshalJSON()
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, fns.Base+"/schedule", strings.NewReader(string(body)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/cloudevents+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("the schedule function answered the tick with %s", resp.Status)
	}
	return nil
}

const restoreManifest = `apiVersion: kopiur.home-operations.com/v1alpha1
kind: Restore
metadata: {name: app-data-back, namespace: kopiur-tryit}
spec:
  source: {fromPolicy: {name: app-data}}
  target: {pvc: {name: app-data-restored, capacity: 1Gi}}
`

const scheduleManifest = `apiVersion: kopiur.home-operations.com/v1alpha1
kind: SnapshotSchedule
metadata: {name: nightly, namespace: kopiur-tryit}
spec:
  policyRef: {name: app-data}
  schedule: {cron: "0 2 * * *", timezone: UTC}
`
