package validate

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
)

func TestMaintenance(t *testing.T) {
	base := func() *snapv1.Maintenance {
		return &snapv1.Maintenance{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "m"},
			Spec: snapv1.MaintenanceSpec{Repository: snapv1.RepositoryRef{Name: "repo"}}}
	}
	tests := []struct {
		name   string
		mutate func(*snapv1.Maintenance)
		want   string // a fragment of the error; "" for none
		warn   string
	}{
		{"minimal", func(*snapv1.Maintenance) {}, "", ""},
		{"another namespace's Repository", func(m *snapv1.Maintenance) { m.Spec.Repository.Namespace = "other" }, "Repository of its own namespace", ""},
		{"bad full cron", func(m *snapv1.Maintenance) {
			m.Spec.Schedule = &snapv1.MaintenanceSchedule{Full: &snapv1.CronSpec{Cron: "every day"}}
		}, "spec.schedule.full.cron", ""},
		{"bad timezone", func(m *snapv1.Maintenance) {
			m.Spec.Schedule = &snapv1.MaintenanceSchedule{Quick: &snapv1.CronSpec{Cron: "0 * * * *", Timezone: "Mars/Olympus"}}
		}, "spec.schedule.quick.timezone", ""},
		{"owner without host", func(m *snapv1.Maintenance) {
			m.Spec.Ownership = &snapv1.MaintenanceOwnership{Owner: "snapflow"}
		}, "spec.ownership.owner", ""},
		{"bad alias", func(m *snapv1.Maintenance) {
			m.Spec.Ownership = &snapv1.MaintenanceOwnership{OwnerAliases: []string{"ok@a", "bad@a:b"}}
		}, "spec.ownership.ownerAliases[1]", ""},
		{"unknown takeover", func(m *snapv1.Maintenance) {
			m.Spec.Ownership = &snapv1.MaintenanceOwnership{TakeoverPolicy: "Sometimes"}
		}, "spec.ownership.takeoverPolicy", ""},
		{"inherited security context", func(m *snapv1.Maintenance) {
			m.Spec.Mover = &snapv1.MoverSpec{InheritSecurityContextFrom: &snapv1.InheritSecurityContextFrom{PvcConsumer: &snapv1.Empty{}}}
		}, "spec.mover.inheritSecurityContextFrom", ""},
		{"run request not a time", func(m *snapv1.Maintenance) {
			m.Annotations = map[string]string{wellknown.AnnotationMaintenanceRunReq: "now"}
		}, "invalid maintenance run annotation", ""},
		{"run mode unknown", func(m *snapv1.Maintenance) {
			m.Annotations = map[string]string{wellknown.AnnotationMaintenanceRunReq: "2026-12-05T10:00:00Z", wellknown.AnnotationMaintenanceRunMode: "deep"}
		}, "neither quick nor full", ""},
		{"safety none warns", func(m *snapv1.Maintenance) {
			m.Annotations = map[string]string{wellknown.AnnotationMaintenanceSafety: "none"}
		}, "", "safe only while nothing else writes"},
		{"safety unknown", func(m *snapv1.Maintenance) {
			m.Annotations = map[string]string{wellknown.AnnotationMaintenanceSafety: "low"}
		}, "is not a safety level", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := base()
			tc.mutate(m)
			r := Maintenance(m, Options{Admission: true})
			got := ""
			if r.Errs != nil {
				got = r.Errs.Error()
			}
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("errors %q, want %q", got, tc.want)
			}
			if tc.warn != "" && !strings.Contains(strings.Join(r.Warnings, "\n"), tc.warn) {
				t.Fatalf("warnings %q, want %q", r.Warnings, tc.warn)
			}
		})
	}
}

type systemLookup struct {
	*Objects
	system string
}

func (s systemLookup) SystemNamespace() string { return s.system }

// A ClusterRepository is maintained only from the namespace it names, or
// snapflow's own: a tenant's Maintenance would delete every tenant's data.
func TestMaintenanceOfAClusterRepository(t *testing.T) {
	ctx := context.Background()
	objs := NewObjects()
	objs.Add(&snapv1.ClusterRepository{ObjectMeta: metav1.ObjectMeta{Name: "shared"}})
	named := &snapv1.ClusterRepository{ObjectMeta: metav1.ObjectMeta{Name: "named"}}
	named.Spec.Maintenance = &snapv1.RepositoryMaintenance{Namespace: "storage-ops"}
	objs.Add(named)
	lk := systemLookup{objs, "snapflow-system"}
	m := func(ns, repo string) *snapv1.Maintenance {
		return &snapv1.Maintenance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "m"},
			Spec: snapv1.MaintenanceSpec{Repository: snapv1.RepositoryRef{Kind: snapv1.KindClusterRepository, Name: repo}}}
	}
	for _, tc := range []struct {
		ns, repo string
		ok       bool
	}{
		{"snapflow-system", "shared", true},
		{"tenant", "shared", false},
		{"storage-ops", "named", true},
		{"snapflow-system", "named", false},
	} {
		r := MaintenanceReferents(ctx, lk, m(tc.ns, tc.repo))
		if r.OK() != tc.ok {
			t.Errorf("%s maintaining %s: ok=%v (%v), want %v", tc.ns, tc.repo, r.OK(), r.Errs, tc.ok)
		}
	}
	// Without snapflow's namespace (offline), only a named one is checked.
	if r := MaintenanceReferents(ctx, objs, m("tenant", "shared")); !r.OK() || len(r.Warnings) == 0 {
		t.Fatalf("offline: %v %v, want a warning", r.Errs, r.Warnings)
	}
}
