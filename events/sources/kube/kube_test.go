package kube

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/events"
)

// Only snapflow's Jobs with an active pod are sent again, each tick with
// an id of its own.
func TestProgressEvents(t *testing.T) {
	job := func(name string, managed bool, active int64, op string) unstructured.Unstructured {
		u := unstructured.Unstructured{Object: map[string]any{"apiVersion": "batch/v1", "kind": "Job",
			"metadata": map[string]any{"namespace": "app", "name": name, "uid": "uid-" + name, "resourceVersion": "7"},
			"status":   map[string]any{"active": active}}}
		labels := map[string]string{wellknown.LabelOp: op}
		if managed {
			labels["app.kubernetes.io/managed-by"] = "snapflow"
		}
		u.SetLabels(labels)
		return u
	}
	at := time.Date(2026, 12, 6, 1, 0, 0, 0, time.UTC)
	jobs := []unstructured.Unstructured{job("running", true, 1, "snapshot"), job("done", true, 0, "snapshot"), job("theirs", false, 1, "snapshot"),
		job("hook", true, 1, "hook"), job("verify", true, 1, "verify")}
	first, err := progressEvents(jobs, "https://api", at)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != 1 || first[0].Extensions()["name"] != "running" || first[0].Type() != events.APIServerUpdate {
		t.Fatalf("want one update event, for the running backup mover Job, got %v", first)
	}
	if progressKey(first[0]) == "" {
		t.Fatal("a progress event must coalesce per Job")
	}
	if ev, _ := events.NewAPIServerEvent(events.APIServerUpdate, "https://api", &jobs[0]); progressKey(ev) != "" {
		t.Fatal("a watch event must never coalesce")
	}
	second, _ := progressEvents(jobs, "https://api", at.Add(10*time.Second))
	if len(second) != 1 || second[0].ID() == first[0].ID() || !strings.HasPrefix(first[0].ID(), "uid-running/7/update/progress-") {
		t.Fatalf("ticks must carry ids of their own: %q, %q", first[0].ID(), second[0].ID())
	}
}
