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

func TestObserved(t *testing.T) {
	for _, c := range []struct {
		ready, stalled                bool
		wantReady, wantStall, wantRec metav1.ConditionStatus
	}{
		{true, false, metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionFalse},
		{false, true, metav1.ConditionFalse, metav1.ConditionTrue, metav1.ConditionFalse},
		// Not ready and not stalled: a retry or a wait, in progress.
		{false, false, metav1.ConditionFalse, metav1.ConditionFalse, metav1.ConditionTrue},
		// Ready is never stalled, whatever the caller says.
		{true, true, metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionFalse},
	} {
		var conds []metav1.Condition
		Observed(&conds, c.ready, c.stalled, "Why", "because", 4)
		ready := meta.FindStatusCondition(conds, wellknown.ConditionReady)
		rec := meta.FindStatusCondition(conds, wellknown.ConditionReconciling)
		stall := meta.FindStatusCondition(conds, wellknown.ConditionStalled)
		if ready.Status != c.wantReady || stall.Status != c.wantStall || rec.Status != c.wantRec || ready.ObservedGeneration != 4 || ready.Reason != "Why" {
			t.Errorf("Observed(%v, %v): Ready %s, Stalled %s, Reconciling %s", c.ready, c.stalled, ready.Status, stall.Status, rec.Status)
		}
	}
}
