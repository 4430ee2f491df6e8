package moverjob

import (
	"errors"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
)

func claimWith(modes ...corev1.PersistentVolumeAccessMode) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "app"}, Spec: corev1.PersistentVolumeClaimSpec{AccessModes: modes}}
}

func podOn(name, node, claim string, phase corev1.PodPhase, labels map[string]string, tols ...corev1.Toleration) corev1.Pod {
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: corev1.PodSpec{NodeName: node, Tolerations: tols, Volumes: []corev1.Volume{{Name: "v",
			VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}},
		Status: corev1.PodStatus{Phase: phase}}
}

func TestDirectPlacement(t *testing.T) {
	gpu := corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "db", Effect: corev1.TaintEffectNoSchedule}
	rwo := claimWith(corev1.ReadWriteOnce)
	deleting := podOn("going", "n1", "data", corev1.PodRunning, nil)
	deleting.DeletionTimestamp = &metav1.Time{}
	cases := []struct {
		name  string
		claim *corev1.PersistentVolumeClaim
		pods  []corev1.Pod
		want  *Placement
		inUse bool
	}{
		{"no pod uses the claim", rwo, []corev1.Pod{podOn("web", "n1", "other", corev1.PodRunning, nil)}, nil, false},
		{"the workload's node and tolerations", rwo, []corev1.Pod{podOn("db-0", "n2", "data", corev1.PodRunning, nil, gpu)},
			&Placement{Node: "n2", Pod: "db-0", Tolerations: []corev1.Toleration{gpu}}, false},
		{"pods no kubelet runs do not count", rwo, []corev1.Pod{podOn("bound", "n3", "data", corev1.PodPending, nil), podOn("done", "n1", "data", corev1.PodSucceeded, nil), podOn("failed", "n1", "data", corev1.PodFailed, nil), podOn("unscheduled", "", "data", corev1.PodPending, nil), deleting}, nil, false},
		{"wildcard and system tolerations are not followed", rwo, []corev1.Pod{podOn("db-0", "n2", "data", corev1.PodRunning, nil, gpu, corev1.Toleration{Operator: corev1.TolerationOpExists}, corev1.Toleration{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists}, corev1.Toleration{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute})},
			&Placement{Node: "n2", Pod: "db-0", Tolerations: []corev1.Toleration{gpu}}, false},
		{"running users on two nodes are refused", rwo, []corev1.Pod{podOn("a", "n1", "data", corev1.PodRunning, nil), podOn("b", "n2", "data", corev1.PodRunning, nil)}, nil, true},
		{"running users on one node", rwo, []corev1.Pod{podOn("b", "n1", "data", corev1.PodRunning, nil), podOn("a", "n1", "data", corev1.PodRunning, nil)}, &Placement{Node: "n1", Pod: "a"}, false},
		{"another run's mover is not the workload", rwo, []corev1.Pod{podOn("mover", "n1", "data", corev1.PodRunning, map[string]string{wellknown.LabelOp: "snapshot"})}, nil, false},
		{"ReadWriteMany attaches anywhere", claimWith(corev1.ReadWriteMany), []corev1.Pod{podOn("db-0", "n2", "data", corev1.PodRunning, nil)}, nil, false},
		{"ReadOnlyMany attaches anywhere", claimWith(corev1.ReadWriteOnce, corev1.ReadOnlyMany), []corev1.Pod{podOn("db-0", "n2", "data", corev1.PodRunning, nil)}, nil, false},
		{"ReadWriteOncePod in use cannot be mounted", claimWith(corev1.ReadWriteOncePod), []corev1.Pod{podOn("db-0", "n2", "data", corev1.PodRunning, nil)}, nil, true},
		{"ReadWriteOncePod unused is free", claimWith(corev1.ReadWriteOncePod), nil, nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DirectPlacement(tc.claim, tc.pods)
			if tc.inUse != errors.Is(err, ErrSourceInUse) || (!tc.inUse && err != nil) {
				t.Fatalf("error %v, want in use: %v", err, tc.inUse)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("placement %+v, want %+v", got, tc.want)
			}
		})
	}
}

// The pin joins every node-affinity term the repository's defaults give
// (terms are ORed) and adds the workload's tolerations once.
func TestPlaceKeepsTheDefaults(t *testing.T) {
	own := corev1.Toleration{Key: "backup", Operator: corev1.TolerationOpExists}
	wl := corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "db", Effect: corev1.TaintEffectNoSchedule}
	zone := corev1.NodeSelectorRequirement{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}
	defaults := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{zone}}, {MatchExpressions: []corev1.NodeSelectorRequirement{zone}}}}}}
	spec := corev1.PodSpec{Affinity: defaults, Tolerations: []corev1.Toleration{own}}
	place(&spec, &Placement{Node: "n2", Tolerations: []corev1.Toleration{wl, own}})

	terms := spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	for i, term := range terms {
		if len(term.MatchFields) != 1 || term.MatchFields[0].Key != "metadata.name" || term.MatchFields[0].Values[0] != "n2" || len(term.MatchExpressions) != 1 {
			t.Fatalf("term %d = %+v, want the zone and the node", i, term)
		}
	}
	if !reflect.DeepEqual(spec.Tolerations, []corev1.Toleration{own, wl}) {
		t.Fatalf("tolerations %+v", spec.Tolerations)
	}
	if len(defaults.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchFields) != 0 {
		t.Fatal("the repository's defaults were changed in place")
	}

	bare := corev1.PodSpec{}
	place(&bare, &Placement{Node: "n1"})
	if terms := bare.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms; len(terms) != 1 || terms[0].MatchFields[0].Values[0] != "n1" {
		t.Fatalf("no defaults: %+v", bare.Affinity)
	}
	none := corev1.PodSpec{}
	place(&none, nil)
	if none.Affinity != nil {
		t.Fatal("no placement set an affinity")
	}
}

func TestColocates(t *testing.T) {
	for _, tc := range []struct {
		d    *snapv1.MoverDefaults
		want bool
	}{
		{nil, true},
		{&snapv1.MoverDefaults{}, true},
		{&snapv1.MoverDefaults{SourceColocation: &snapv1.SourceColocation{Mode: "Auto"}}, true},
		{&snapv1.MoverDefaults{SourceColocation: &snapv1.SourceColocation{Mode: "Disabled"}}, false},
	} {
		if got := Colocates(tc.d); got != tc.want {
			t.Errorf("Colocates(%+v) = %v, want %v", tc.d, got, tc.want)
		}
	}
}
