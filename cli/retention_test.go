package cli

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestRetentionPreviewOffline(t *testing.T) {
	dir := t.TempDir()
	policy := write(t, dir, "policy.yaml", `apiVersion: kopiur.home-operations.com/v1alpha1
kind: SnapshotPolicy
metadata: {name: app-data, namespace: kopiur-tryit}
spec:
  repository: {name: primary}
  sources: [{pvc: {name: app-data}}]
  retention: {keepLatest: 1, keepDaily: 2}
`)
	var items []string
	for i, day := range []string{"01", "02", "03", "03"} {
		items = append(items, fmt.Sprintf(`{"apiVersion":"kopiur.home-operations.com/v1alpha1","kind":"Snapshot","metadata":{"name":"s%d","namespace":"kopiur-tryit","creationTimestamp":"2026-01-%sT0%d:00:00Z"},"spec":{"policyRef":{"name":"app-data"}},"status":{"phase":"Succeeded","snapshot":{"kopiaSnapshotID":"k%d"}}}`, i, day, i, i))
	}
	items = append(items,
		`{"apiVersion":"kopiur.home-operations.com/v1alpha1","kind":"Snapshot","metadata":{"name":"failed","namespace":"kopiur-tryit","creationTimestamp":"2025-01-01T00:00:00Z"},"status":{"phase":"Failed"}}`,
		`{"apiVersion":"kopiur.home-operations.com/v1alpha1","kind":"Snapshot","metadata":{"name":"pinned","namespace":"kopiur-tryit","creationTimestamp":"2025-06-01T00:00:00Z"},"spec":{"pin":true},"status":{"phase":"Succeeded","snapshot":{"kopiaSnapshotID":"kp"}}}`)
	snaps := write(t, dir, "snaps.json", `{"apiVersion":"v1","kind":"List","items":[`+strings.Join(items, ",")+`]}`)

	out, errOut, code := run(t, "retention", "preview", "--retention", policy, "--snapshots", snaps)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"NAME", "s3 ", "keep    latest,daily", "s1 ", "prune", "failed", "ignore   phase Failed", "pinned", "keep    pinned", "3 kept, 2 would be pruned, 1 not decided on (nothing was deleted)"} {
		if !strings.Contains(strings.Join(strings.Fields(out), " "), strings.Join(strings.Fields(want), " ")) {
			t.Errorf("output misses %q:\n%s", want, out)
		}
	}
	out, _, _ = run(t, "retention", "preview", "--retention", policy, "--snapshots", snaps, "-o", "json")
	var res RetentionPreview
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	// The two newest days are 01-03 (s3, the newer of two) and 01-02 (s1);
	// s2 loses 01-03 to s3, and s0 is outside the window.
	if strings.Join(res.Prune, ",") != "s2,s0" || res.Keep != 3 || res.Ignored != 1 {
		t.Fatalf("prune = %v keep = %d ignored = %d", res.Prune, res.Keep, res.Ignored)
	}
	// Strict input: another kind, or a misspelt field, is refused naming
	// the document, never left out of the preview.
	for _, tc := range []struct{ doc, want string }{
		{`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}`, `document 0 is a "ConfigMap", not a Snapshot`},
		{`{"apiVersion":"kopiur.home-operations.com/v1alpha1","kind":"Snapshot","metadata":{"name":"x"},"spec":{"pinned":true}}`, `unknown field "spec.pinned"`},
		{`{"apiVersion":"v1","kind":"List","items":[` + items[0] + `,{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}]}`, `document 0 item 1: a "Pod", not a Snapshot`},
	} {
		bad := write(t, dir, "bad.json", tc.doc)
		if _, errOut, code := run(t, "retention", "preview", "--retention", policy, "--snapshots", bad); code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%s: exit %d, %q; want an error containing %q", tc.doc, code, errOut, tc.want)
		}
	}
	help, _, _ := run(t, "retention", "preview", "--help")
	if !strings.Contains(help, "--snapshots FILE") || !strings.Contains(help, "--retention FILE") {
		t.Errorf("help placeholders:\n%s", help)
	}
	if _, errOut, code := run(t, "retention", "preview"); code != ExitUsage || !strings.Contains(errOut, "--policy NAME") {
		t.Fatalf("no input: %d %q", code, errOut)
	}
}

func TestScheduleNextOffline(t *testing.T) {
	out, errOut, code := run(t, "schedule", "next", "--cron", "0 */6 * * *", "--count", "4", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var res ScheduleNext
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if res.Timezone != "UTC" || len(res.Firings) != 4 {
		t.Fatalf("next = %+v", res)
	}
	for i, f := range res.Firings {
		if f.Slot.UTC().Hour()%6 != 0 || f.Slot.Minute() != 0 || !f.At.Equal(f.Slot) {
			t.Fatalf("firing %d = %+v", i, f)
		}
		if i > 0 && f.Slot.Sub(res.Firings[i-1].Slot) != 6*time.Hour {
			t.Fatalf("firings are not 6h apart: %+v", res.Firings)
		}
	}
	if _, errOut, code := run(t, "schedule", "next", "--cron", "0 2 * *"); code != 1 || !strings.Contains(errOut, "want 5 fields") {
		t.Fatalf("bad cron: %d %q", code, errOut)
	}
}
