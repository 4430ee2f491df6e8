package maintenance

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
)

func TestDue(t *testing.T) {
	m := &snapv1.Maintenance{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "repo", UID: "u"},
		Spec: snapv1.MaintenanceSpec{Schedule: &snapv1.MaintenanceSchedule{
			Quick: &snapv1.CronSpec{Cron: "15 * * * *"}, Full: &snapv1.CronSpec{Cron: "30 3 * * *"}}}}
	s, err := Resolve(m, &snapv1.RepositorySpec{})
	if err != nil {
		t.Fatal(err)
	}
	created := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	at := func(h, m int) time.Time { return time.Date(2026, 12, 5, h, m, 0, 0, time.UTC) }
	req := at(10, 5)
	tests := []struct {
		name      string
		last      map[string]time.Time
		requested *time.Time
		mode      string
		now       time.Time
		want      Decision
	}{
		{"a new Maintenance waits for its first slot", nil, nil, "", at(10, 10), Decision{}},
		{"the first quick slot", nil, nil, "", at(10, 20), Decision{Due: true, Mode: Quick, Slot: at(10, 15)}},
		{"missed quick slots collapse into the latest", map[string]time.Time{Quick: at(10, 15)}, nil, "", at(13, 20), Decision{Due: true, Mode: Quick, Slot: at(13, 15)}},
		{"full first when both are due", map[string]time.Time{Quick: at(10, 15)}, nil, "", at(10, 0).Add(18 * time.Hour),
			Decision{Due: true, Mode: Full, Slot: time.Date(2026, 12, 6, 3, 30, 0, 0, time.UTC)}},
		{"a request runs its mode at once", nil, &req, Full, at(10, 6), Decision{Due: true, Mode: Full, Slot: req, Requested: true}},
		{"a request already served waits", map[string]time.Time{Full: req}, &req, Full, at(10, 7), Decision{}},
		{"a request in the future waits", nil, &req, Quick, at(10, 4), Decision{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Due(s, tc.last, created, tc.requested, tc.mode, tc.now)
			if err != nil {
				t.Fatal(err)
			}
			got.Reason = ""
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	off := false
	ro := &snapv1.RepositorySpec{Mode: snapv1.ModeReadOnly}
	if Wanted(ro) || Wanted(&snapv1.RepositorySpec{Maintenance: &snapv1.RepositoryMaintenance{Enabled: &off}}) || !Wanted(&snapv1.RepositorySpec{}) {
		t.Fatal("Wanted: read-only and disabled repositories get no default Maintenance, others do")
	}
	spec := &snapv1.RepositorySpec{Maintenance: &snapv1.RepositoryMaintenance{Schedule: &snapv1.MaintenanceSchedule{Full: &snapv1.CronSpec{Cron: "0 2 * * 0"}}}}
	got := DefaultSpec(snapv1.RepositoryRef{Name: "r", Namespace: "apps"}, spec, KopiaCadence)
	if got.Repository != (snapv1.RepositoryRef{Kind: snapv1.KindRepository, Name: "r"}) || got.Schedule.Full.Cron != "0 2 * * 0" || got.Schedule.Quick.Cron != KopiaCadence.Quick {
		t.Fatalf("DefaultSpec: %+v", got)
	}
	if n := DefaultName(snapv1.RepositoryRef{Kind: snapv1.KindClusterRepository, Name: "shared"}); n != "clusterrepository-shared" {
		t.Fatalf("DefaultName = %q", n)
	}
	m := &snapv1.Maintenance{}
	if o := Owner(m, &snapv1.RepositorySpec{}, "0c7e"); o != "snapflow@0c7e" {
		t.Fatalf("Owner = %q", o)
	}
	if o := Owner(m, &snapv1.RepositorySpec{IdentityDefaults: &snapv1.IdentityDefaults{Cluster: "prod"}}, "0c7e"); o != "snapflow@prod" {
		t.Fatalf("Owner with identityDefaults.cluster = %q", o)
	}
	m.Spec.Ownership = &snapv1.MaintenanceOwnership{Owner: "ops@dr"}
	if o := Owner(m, &snapv1.RepositorySpec{}, "0c7e"); o != "ops@dr" {
		t.Fatalf("Owner with ownership.owner = %q", o)
	}
}
