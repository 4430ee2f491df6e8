package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/internal/fleet"
)

// The on-call view: status summarises a namespace's policies and
// repositories after a real backup, and suspend/resume flip a policy the
// way kubectl patch would, saying what they did.
func TestStatusSuspendAndResume(t *testing.T) {
	const ns = "status-cli"
	backupNamespace(t, ns, 3, "")
	kubectl(t, policy(ns, "app", "  copyMethod: Direct\n"), 0, "apply", "-f", "-")
	kubectl(t, snapshotOf(ns, "first", "app"), 0, "create", "-f", "-")
	waitSnapshot(t, ns, "first", snapv1.SnapshotSucceeded)

	report := func() fleet.Report {
		t.Helper()
		var rep fleet.Report
		if err := json.Unmarshal([]byte(snapflowCLI(t, 0, "status", "-n", ns, "-o", "json")), &rep); err != nil {
			t.Fatal(err)
		}
		if len(rep.Policies) != 1 || len(rep.Repositories) == 0 {
			t.Fatalf("status %+v: want the one policy and its repository", rep)
		}
		return rep
	}
	var rep fleet.Report
	eventually(t, func() error {
		rep = report()
		if p := rep.Policies[0]; p.LastSuccess == nil {
			return fmt.Errorf("policy %+v has no last success yet", p)
		}
		return nil
	})
	if p := rep.Policies[0]; p.State != fleet.Unscheduled || p.FailedSince != 0 || p.Running != 0 {
		t.Fatalf("policy %+v: want Unscheduled (no schedule fires it), no failures, nothing running", p)
	}
	var repo *fleet.Repository
	for i := range rep.Repositories {
		if r := &rep.Repositories[i]; r.Namespace == ns && r.Name == "primary" {
			repo = r
		}
	}
	if repo == nil || repo.Phase != "Ready" {
		t.Fatalf("repositories %+v: want Repository %s/primary Ready", rep.Repositories, ns)
	}
	table := snapflowCLI(t, 0, "status", "-n", ns)
	if !strings.Contains(table, "POLICY") || !strings.Contains(table, "app") || !strings.Contains(table, "Repository/"+ns+"/primary") {
		t.Fatalf("status table:\n%s", table)
	}

	out := snapflowCLI(t, 0, "suspend", "policy", "app", "-n", ns)
	if !strings.Contains(out, "suspended") {
		t.Fatalf("suspend said %q", out)
	}
	if p := report().Policies[0]; p.State != fleet.Suspended {
		t.Fatalf("after suspend: %+v", p)
	}
	if out := snapflowCLI(t, 0, "suspend", "policy", "app", "-n", ns); !strings.Contains(out, "already suspended") {
		t.Fatalf("a second suspend said %q", out)
	}
	snapflowCLI(t, 0, "resume", "policy", "app", "-n", ns)
	if p := report().Policies[0]; p.State == fleet.Suspended {
		t.Fatalf("after resume: %+v", p)
	}
	if out := snapflowCLI(t, 2, "suspend", "backup", "app", "-n", ns); out != "" {
		t.Fatalf("an unknown kind printed %q", out)
	}
}
