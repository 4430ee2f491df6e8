package coverage

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/volumepolicy"
)

func pvc(ns, name string, lbl map[string]string, class string) corev1.PersistentVolumeClaim {
	c := corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbl}}
	if class != "" {
		c.Spec.StorageClassName = ptr.To(class)
	}
	return c
}

func pol(ns, name string, edit func(*snapv1.SnapshotPolicy)) snapv1.SnapshotPolicy {
	p := snapv1.SnapshotPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"tier": "gold"}}}
	edit(&p)
	return p
}

func byName(ns, name string) func(*snapv1.SnapshotPolicy) {
	return func(p *snapv1.SnapshotPolicy) {
		p.Spec.Sources = append(p.Spec.Sources, snapv1.Source{PVC: &snapv1.LocalObjectRef{Name: name}})
	}
}

func TestVerdicts(t *testing.T) {
	next := metav1.NewTime(time.Date(2026, 12, 7, 2, 0, 0, 0, time.UTC))
	last := metav1.NewTime(time.Date(2026, 12, 6, 2, 0, 0, 0, time.UTC))
	global := &volumepolicy.Document{Version: "v1", VolumePolicies: []volumepolicy.Policy{
		{Conditions: volumepolicy.Conditions{StorageClass: []string{"scratch"}}, Action: volumepolicy.Action{Type: "skip"}}}}
	recipe := &volumepolicy.Document{Version: "v1", VolumePolicies: []volumepolicy.Policy{
		{Conditions: volumepolicy.Conditions{PVCLabels: map[string]string{"cache": "true"}}, Action: volumepolicy.Action{Type: "skip"}}}}
	in := Input{
		PVCs: []corev1.PersistentVolumeClaim{
			pvc("apps", "db", map[string]string{"app": "db"}, "fast"),
			pvc("apps", "cache", map[string]string{"app": "db", "cache": "true"}, "fast"),
			pvc("apps", "tmp", nil, "scratch"),
			pvc("apps", "orphan", nil, "fast"),
			pvc("apps", "manual", nil, "fast"),
			pvc("apps", "paused", nil, "fast"),
			pvc("apps", "opted-out", nil, "fast"),
			pvc("lab", "notebook", nil, "fast"),
			pvc("apps", "staged", map[string]string{wellknown.LabelSnapshot: "s1"}, "fast"),
			pvc("apps", "mover-cache", map[string]string{"app.kubernetes.io/managed-by": "snapflow"}, "fast"),
			pvc("apps", "stuck", nil, "fast"),
			pvc("apps", "twice", map[string]string{"dup": "yes"}, "fast"),
			pvc("apps", "ruled", nil, "fast"),
		},
		Policies: []snapv1.SnapshotPolicy{
			pol("apps", "db", func(p *snapv1.SnapshotPolicy) {
				p.Spec.Sources = []snapv1.Source{{PVCSelector: &snapv1.PVCSelector{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}}}
				p.Spec.ResourcePolicy = &snapv1.ResourcePolicyRef{Name: "db-rules"}
				p.Status.LastSuccessfulSnapshot = &last
			}),
			pol("apps", "adhoc", byName("apps", "manual")),
			pol("apps", "held", func(p *snapv1.SnapshotPolicy) { byName("apps", "paused")(p); p.Spec.Suspend = true }),
			pol("apps", "lost", func(p *snapv1.SnapshotPolicy) {
				byName("apps", "stuck")(p)
				p.Status.Conditions = []metav1.Condition{
					{Type: wellknown.ConditionReady, Status: metav1.ConditionFalse, Reason: "RepositoryNotFound", Message: "Repository/gone does not exist"},
					{Type: wellknown.ConditionStalled, Status: metav1.ConditionTrue, Reason: "RepositoryNotFound"}}
			}),
			pol("apps", "dup", func(p *snapv1.SnapshotPolicy) {
				byName("apps", "twice")(p)
				p.Spec.Sources = append(p.Spec.Sources, snapv1.Source{PVCSelector: &snapv1.PVCSelector{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"dup": "yes"}}}})
			}),
			pol("apps", "broken", func(p *snapv1.SnapshotPolicy) {
				byName("apps", "ruled")(p)
				p.Spec.ResourcePolicy = &snapv1.ResourcePolicyRef{Name: "gone"}
			}),
		},
		Schedules: []snapv1.SnapshotSchedule{{
			ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "nightly"},
			Spec:       snapv1.SnapshotScheduleSpec{PolicySelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gold"}}},
			Status:     snapv1.SnapshotScheduleStatus{NextSchedule: &snapv1.ScheduleRef{At: &next}},
		}},
		Namespaces: []corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: "lab", Annotations: map[string]string{wellknown.AnnotationBackupNotRequired: "scratch notebooks"}}}},
		Global:     global, GlobalName: "snapflow-system/global-policies",
		Recipes:      map[string]*volumepolicy.Document{"apps/db-rules": recipe},
		RecipeErrors: map[string]string{"apps/gone": "resourcePolicy ConfigMap apps/gone does not exist; create it or fix the reference"},
	}
	// Going away: not listed.
	terminating := pvc("apps", "leaving", nil, "fast")
	terminating.DeletionTimestamp = &last
	in.PVCs = append(in.PVCs, terminating)
	in.PVCs[6].Annotations = map[string]string{wellknown.AnnotationBackupNotRequired: "\x1b[2Jtrue\t"}
	// Volume policies look at the bound volume, as Velero's do.
	in.PVCs[2].Spec.VolumeName = "pv-tmp"
	in.PVs = map[string]*corev1.PersistentVolume{"pv-tmp": {ObjectMeta: metav1.ObjectMeta{Name: "pv-tmp"}, Spec: corev1.PersistentVolumeSpec{StorageClassName: "scratch"}}}
	// adhoc is fired by no schedule: take it out of the selector's reach.
	in.Policies[1].Labels = nil

	want := map[string]struct {
		state  State
		reason string
	}{
		"apps/db":        {Protected, "backed up by db"},
		"apps/cache":     {Excluded, "policy db skips it: skipped by rule 0 of ConfigMap apps/db-rules"},
		"apps/tmp":       {Excluded, "skipped by rule 0 of the global ConfigMap snapflow-system/global-policies"},
		"apps/orphan":    {Unprotected, "no SnapshotPolicy covers it"},
		"apps/manual":    {Unscheduled, "policy adhoc covers it but no SnapshotSchedule fires it"},
		"apps/paused":    {Suspended, "policy held covers it but is suspended"},
		"apps/opted-out": {Excluded, "the PVC is annotated snapflow.dev/backup-not-required"},
		"lab/notebook":   {Excluded, "namespace lab is annotated snapflow.dev/backup-not-required: scratch notebooks"},
		"apps/stuck":     {Failing, "policy lost covers it but cannot back it up: Repository/gone does not exist"},
		"apps/twice":     {Failing, "policy dup covers it but cannot back it up: two of its sources cover this PVC"},
		"apps/ruled":     {Failing, "policy broken covers it but cannot back it up: its resourcePolicy ConfigMap apps/gone does not exist; create it or fix the reference"},
	}
	got := Verdicts(in)
	if len(got) != len(want) {
		t.Fatalf("%d verdicts, want %d (the staged claim is not a user's volume): %+v", len(got), len(want), got)
	}
	for _, v := range got {
		w, ok := want[v.Namespace+"/"+v.PVC]
		if !ok || v.State != w.state || !strings.HasPrefix(v.Reason, w.reason) {
			t.Errorf("%s/%s: %s %q, want %s %q", v.Namespace, v.PVC, v.State, v.Reason, w.state, w.reason)
		}
		if strings.ContainsAny(v.Reason, "\x1b\t") {
			t.Errorf("%s: a control character reaches the reason %q", v.PVC, v.Reason)
		}
		if v.PVC == "db" && (v.LastSuccess == nil || !v.LastSuccess.Equal(&last) || v.NextFiring == nil || !v.NextFiring.Equal(&next)) {
			t.Errorf("db: last %v next %v", v.LastSuccess, v.NextFiring)
		}
	}
	c := Counts(got)
	if c[Protected] != 1 || c[Excluded] != 4 || c[Failing] != 3 || c[Unprotected] != 1 || c[Unscheduled] != 1 || c[Suspended] != 1 {
		t.Errorf("counts %v", c)
	}

	// Once its schedule is suspended, the protected volume is not.
	in.Schedules[0].Spec.Schedule.Suspend = true
	for _, v := range Verdicts(in) {
		if v.PVC == "db" && (v.State != Suspended || !strings.Contains(v.Reason, "every schedule firing it is suspended")) {
			t.Errorf("db with its schedule suspended: %s %q", v.State, v.Reason)
		}
	}
}
