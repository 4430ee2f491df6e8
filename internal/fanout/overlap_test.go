package fanout

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
)

func selector(k, v string) snapv1.Source {
	return snapv1.Source{PVCSelector: &snapv1.PVCSelector{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{k: v}}}}
}

func claim(name string, labels map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Labels: labels}
}

func TestMatch(t *testing.T) {
	now := metav1.NewTime(time.Now())
	deleting := claim("going", map[string]string{"app": "x"})
	deleting.DeletionTimestamp = &now
	pvcs := []metav1.ObjectMeta{
		claim("b", map[string]string{"app": "x"}),
		claim("a", map[string]string{"app": "x", "tier": "db"}),
		claim("staged", map[string]string{"app": "x", wellknown.LabelSnapshot: "s1"}),
		deleting,
		claim("other", map[string]string{"app": "y"}),
	}
	p := pol([]snapv1.Source{pvcSrc, selector("app", "x"), selector("tier", "db")})
	got, err := Match(p, pvcs)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int][]string{1: {"a", "b"}, 2: {"a"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Match = %v, want %v (staged and deleting claims never match)", got, want)
	}

	bad := pol([]snapv1.Source{{PVCSelector: &snapv1.PVCSelector{LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Bogus"}}}}}})
	if _, err := Match(bad, pvcs); err == nil || !strings.Contains(err.Error(), "spec.sources[0].pvcSelector") {
		t.Fatalf("an invalid selector: %v, want an error naming spec.sources[0].pvcSelector", err)
	}
}

func TestOverlaps(t *testing.T) {
	pvc := func(n string) snapv1.Source { return snapv1.Source{PVC: &snapv1.LocalObjectRef{Name: n}} }
	cases := []struct {
		name     string
		sources  []snapv1.Source
		selected map[int][]string
		want     []Overlap
	}{
		{"one source", []snapv1.Source{pvc("a")}, nil, nil},
		{"distinct pvc sources", []snapv1.Source{pvc("a"), pvc("b")}, nil, nil},
		{"two pvc sources name one claim", []snapv1.Source{pvc("a"), pvc("b"), pvc("a")}, nil, []Overlap{{PVC: "a", Sources: []int{0, 2}}}},
		{"a selector matches a pvc source's claim", []snapv1.Source{pvc("a"), selector("app", "x")}, map[int][]string{1: {"a", "b"}}, []Overlap{{PVC: "a", Sources: []int{0, 1}}}},
		{"two selectors match one claim", []snapv1.Source{selector("app", "x"), selector("tier", "db")}, map[int][]string{0: {"a", "b"}, 1: {"b", "c"}}, []Overlap{{PVC: "b", Sources: []int{0, 1}}}},
		{"disjoint selectors", []snapv1.Source{selector("app", "x"), selector("tier", "db")}, map[int][]string{0: {"a"}, 1: {"b"}}, nil},
		{"a name listed twice by one selector is one source", []snapv1.Source{selector("app", "x")}, map[int][]string{0: {"a", "a"}}, nil},
		{"several claims, sorted", []snapv1.Source{selector("app", "x"), selector("tier", "db"), pvc("z")}, map[int][]string{0: {"z", "m"}, 1: {"m", "z"}},
			[]Overlap{{PVC: "m", Sources: []int{0, 1}}, {PVC: "z", Sources: []int{0, 1, 2}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Overlaps(pol(tc.sources), tc.selected)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Overlaps = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// A firing leaves out a PVC two sources cover, says which sources and
// which claim, and still expands the policy's other PVCs.
func TestChildrenLeavesAnOverlapOut(t *testing.T) {
	p := pol([]snapv1.Source{pvcSrc, selector("app", "x")})
	kids, err := Children(p, "p-manual-1", map[int][]string{1: {"data", "logs"}})
	var ov ErrOverlap
	if !errors.As(err, &ov) {
		t.Fatalf("Children = %v, want ErrOverlap", err)
	}
	for _, want := range []string{`PVC "data" is covered by spec.sources[0] and spec.sources[1]`, "left out of this firing", "Narrow the pvcSelector"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if len(kids) != 1 || kids[0].Source == nil || kids[0].Source.Target.PVC.Name != "logs" {
		t.Fatalf("children %+v, want only logs", kids)
	}
	if kids, err := Children(p, "p-manual-1", map[int][]string{1: {"logs"}}); err != nil || len(kids) != 2 {
		t.Fatalf("without the overlap: %d children, %v", len(kids), err)
	}
}
