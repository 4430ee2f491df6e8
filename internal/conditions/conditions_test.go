package conditions

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapflow/snapflow/api/wellknown"
)

func TestSettled(t *testing.T) {
	for _, ok := range []bool{true, false} {
		var conds []metav1.Condition
		Settled(&conds, "Done", ok, "m", 3)
		ready := meta.FindStatusCondition(conds, wellknown.ConditionReady)
		rec := meta.FindStatusCondition(conds, wellknown.ConditionReconciling)
		stalled := meta.FindStatusCondition(conds, wellknown.ConditionStalled)
		if ready == nil || rec == nil || stalled == nil {
			t.Fatalf("missing conditions: %+v", conds)
		}
		if (ready.Status == metav1.ConditionTrue) != ok || rec.Status != metav1.ConditionFalse || (stalled.Status == metav1.ConditionTrue) == ok {
			t.Errorf("ok=%v: ready %s reconciling %s stalled %s", ok, ready.Status, rec.Status, stalled.Status)
		}
		if ready.ObservedGeneration != 3 || ready.Reason != "Done" || ready.Message != "m" {
			t.Errorf("ready %+v", ready)
		}
	}
}
