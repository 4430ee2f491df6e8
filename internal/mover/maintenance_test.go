package mover

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/kopia"
	"github.com/snapflow/snapflow/internal/scheme"
)

// A maintenance report lands on its Maintenance once, only for the owner
// its work named, and never over a later slot's run.
func TestApplyMaintenanceReport(t *testing.T) {
	ctx := context.Background()
	slot := time.Date(2026, 12, 5, 3, 0, 0, 0, time.UTC)
	newClient := func(phase string, runSlot time.Time) client.Client {
		m := &snapv1.Maintenance{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "repo", UID: "m-uid", Generation: 2},
			Status: snapv1.MaintenanceStatus{Runs: []snapv1.MaintenanceRun{{Mode: "full", Slot: metav1.NewTime(runSlot), Phase: phase}}}}
		return fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(m).WithStatusSubresource(&snapv1.Maintenance{}).Build()
	}
	spec := &WorkSpec{Operation: OpMaintenance, Target: Target{Kind: "Maintenance", Namespace: "ops", Name: "repo", UID: "m-uid"},
		Repository:  Repository{Kind: "Repository", Name: "repo", Backend: kopia.Backend{Filesystem: &kopia.FilesystemBackend{Path: "r"}}},
		Maintenance: &MaintenanceWork{Mode: "full", Slot: slot, Owner: "snapflow@a"}}
	done := Report{Started: slot, Maintained: &MaintenanceReport{At: slot.Add(time.Minute), Message: "full maintenance",
		Result: kopia.MaintainResult{Owner: "snapflow@a", Counted: true, Before: kopia.StorageUsage{Blobs: 9, Bytes: 5000}, After: kopia.StorageUsage{Blobs: 4, Bytes: 1000}, Referenced: ptr(int64(700)), Unreferenced: ptr(int64(250)), Duration: 3 * time.Second}}}
	get := func(c client.Client) *snapv1.Maintenance {
		var m snapv1.Maintenance
		if err := c.Get(ctx, client.ObjectKey{Namespace: "ops", Name: "repo"}, &m); err != nil {
			t.Fatal(err)
		}
		return &m
	}

	c := newClient(MaintenanceRunning, slot)
	if err := done.Apply(ctx, c, spec); err != nil {
		t.Fatal(err)
	}
	m := get(c)
	r := m.Status.Runs[0]
	if r.Phase != MaintenanceSucceeded || *r.ReclaimedBytes != 4000 || *r.BlobsAfter != 4 || *r.DurationSeconds != 3 || r.Safety != "full" ||
		r.ReclaimableBytes == nil || *r.ReclaimableBytes != 250 {
		t.Fatalf("run after the report: %+v", r)
	}
	if m.Status.LastReclaimedBytes == nil || *m.Status.LastReclaimedBytes != 4000 || m.Status.LastFullSucceeded == nil || m.Status.Owner != "snapflow@a" {
		t.Fatalf("status after a full run: %+v", m.Status)
	}
	if !meta.IsStatusConditionTrue(m.Status.Conditions, wellknown.ConditionReady) {
		t.Fatalf("Ready is not True: %+v", m.Status.Conditions)
	}
	// A redelivery changes nothing.
	again := done
	again.Maintained = &MaintenanceReport{At: slot.Add(time.Hour), Result: kopia.MaintainResult{Owner: "snapflow@a"}}
	if err := again.Apply(ctx, c, spec); err != nil {
		t.Fatal(err)
	}
	if got := get(c).Status.Runs[0]; !got.CompletedAt.Equal(r.CompletedAt) {
		t.Fatalf("a second report rewrote the finished run: %+v", got)
	}

	// A report as another owner than the work named is refused whole.
	forged := done
	forged.Maintained = &MaintenanceReport{Result: kopia.MaintainResult{Owner: "snapflow@b"}}
	if err := forged.Apply(ctx, newClient(MaintenanceRunning, slot), spec); !errors.Is(err, ErrReportMismatch) {
		t.Fatalf("forged owner: %v, want ErrReportMismatch", err)
	}

	// A late report of an earlier slot leaves the later run alone.
	c = newClient(MaintenanceRunning, slot.Add(24*time.Hour))
	if err := done.Apply(ctx, c, spec); err != nil {
		t.Fatal(err)
	}
	if got := get(c).Status.Runs[0]; got.Phase != MaintenanceRunning {
		t.Fatalf("an earlier slot's report overwrote the later run: %+v", got)
	}

	// Skipped: another owner holds it; the conditions say who.
	skipped := Report{Started: slot, Maintained: &MaintenanceReport{At: slot, Message: "snapflow@b owns it",
		Result: kopia.MaintainResult{Owner: "snapflow@a", PreviousOwner: "snapflow@b", Skipped: true}}}
	c = newClient(MaintenanceRunning, slot)
	if err := skipped.Apply(ctx, c, spec); err != nil {
		t.Fatal(err)
	}
	m = get(c)
	if m.Status.Runs[0].Phase != MaintenanceSkipped || m.Status.RepositoryOwner != "snapflow@b" ||
		!meta.IsStatusConditionFalse(m.Status.Conditions, wellknown.ConditionMaintenanceOwned) {
		t.Fatalf("skipped: %+v", m.Status)
	}
}

func TestMaintenanceWorkSpec(t *testing.T) {
	base := `{"operation":"maintenance","target":{"kind":"Maintenance","name":"m","uid":"u"},"repository":{"kind":"Repository","name":"r","backend":{"filesystem":{"path":"r"}}%s},"maintenance":%s}`
	for _, tc := range []struct {
		name, create, work, want string
	}{
		{"valid", "", `{"mode":"full","owner":"snapflow@a"}`, ""},
		{"bad mode", "", `{"mode":"deep","owner":"snapflow@a"}`, `maintenance mode "deep"`},
		{"owner without host", "", `{"mode":"quick","owner":"snapflow"}`, "not user@host"},
		{"creates", `,"create":{}`, `{"mode":"quick","owner":"snapflow@a"}`, "never creates a repository"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(fmt.Sprintf(base, tc.create, tc.work)))
			if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("Parse: %v, want %q", err, tc.want)
			}
		})
	}
}
