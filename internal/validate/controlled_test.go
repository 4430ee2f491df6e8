package validate_test

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/validate"
)

func TestControllerMetadata(t *testing.T) {
	meta := func(labels, annotations map[string]string) *metav1.ObjectMeta {
		return &metav1.ObjectMeta{Labels: labels, Annotations: annotations}
	}
	pruned := map[string]string{wellknown.AnnotationPrunedBy: wellknown.PrunedByRetention}
	stamp := map[string]string{wellknown.AnnotationVolumePolicies: `{"rules":[]}`}
	for _, tc := range []struct {
		name     string
		old, obj *metav1.ObjectMeta
		want     string // "" = allowed
	}{
		{"plain create", nil, meta(map[string]string{"app": "db"}, nil), ""},
		{"create marked pruned-by", nil, meta(nil, pruned), "may be set only by snapflow's functions"},
		{"annotate pruned-by", meta(nil, nil), meta(nil, pruned), "mass-deletion breaker"},
		{"change pruned-by", meta(nil, pruned), meta(nil, map[string]string{wellknown.AnnotationPrunedBy: wellknown.PrunedByReplacedRun}), "may be changed only"},
		{"keep pruned-by", meta(nil, pruned), meta(map[string]string{"x": "y"}, pruned), ""},
		{"remove schedule label", meta(map[string]string{wellknown.LabelSchedule: "nightly"}, nil), meta(nil, nil), "may be removed only"},
		{"create with schedule uid", nil, meta(map[string]string{wellknown.LabelScheduleUID: "u"}, nil), wellknown.LabelScheduleUID},
		{"forge requested-by", meta(nil, nil), meta(nil, map[string]string{wellknown.AnnotationRequestedBy: "alice"}), "who sent the request"},
		{"volume policies stamped on create", nil, meta(nil, stamp), ""},
		{"volume policies changed later", meta(nil, stamp), meta(nil, map[string]string{wellknown.AnnotationVolumePolicies: `{}`}), "volume policies"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var old metav1.Object
			if tc.old != nil {
				old = tc.old
			}
			r := validate.ControllerMetadata(old, tc.obj)
			if tc.want == "" {
				if !r.OK() {
					t.Fatalf("refused: %v", r.Problems())
				}
				return
			}
			if r.OK() || !strings.Contains(strings.Join(r.Problems(), "\n"), tc.want) {
				t.Fatalf("want a refusal containing %q, got %v", tc.want, r.Problems())
			}
		})
	}
}
