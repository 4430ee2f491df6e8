// Package conditions writes the kstatus conditions (Ready, Reconciling,
// Stalled) the way every snapflow object reports a finished run, so
// `kubectl wait` and GitOps health checks read them alike.
package conditions

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapflow/snapflow/api/wellknown"
)

// Settled records a run that ended: Ready says whether it succeeded,
// Reconciling is over, and Stalled is set when it failed (nothing more will
// happen without a change). reason is usually the terminal phase.
func Settled(conds *[]metav1.Condition, reason string, ok bool, msg string, gen int64) {
	ready, stalled := metav1.ConditionTrue, metav1.ConditionFalse
	if !ok {
		ready, stalled = metav1.ConditionFalse, metav1.ConditionTrue
	}
	meta.SetStatusCondition(conds, metav1.Condition{Type: wellknown.ConditionReady, Status: ready, Reason: reason, Message: msg, ObservedGeneration: gen})
	meta.SetStatusCondition(conds, metav1.Condition{Type: wellknown.ConditionReconciling, Status: metav1.ConditionFalse, Reason: reason, Message: msg, ObservedGeneration: gen})
	meta.SetStatusCondition(conds, metav1.Condition{Type: wellknown.ConditionStalled, Status: stalled, Reason: reason, Message: msg, ObservedGeneration: gen})
}

// Observed records the state of an object that is reconciled for as long
// as it exists (a policy, a schedule, a maintenance): Ready as given;
// Stalled when nothing will change without an edit (an invalid spec, a
// missing referent); and Reconciling while it is neither, so a Ready=False
// that resolves by itself (a run to wait for, a retry) reads as in
// progress, not as healthy, to kstatus (Flux, Argo CD).
func Observed(conds *[]metav1.Condition, ready bool, stalled bool, reason, msg string, gen int64) {
	status := func(b bool) metav1.ConditionStatus {
		if b {
			return metav1.ConditionTrue
		}
		return metav1.ConditionFalse
	}
	meta.SetStatusCondition(conds, metav1.Condition{Type: wellknown.ConditionReady, Status: status(ready), Reason: reason, Message: msg, ObservedGeneration: gen})
	meta.SetStatusCondition(conds, metav1.Condition{Type: wellknown.ConditionReconciling, Status: status(!ready && !stalled), Reason: reason, Message: msg, ObservedGeneration: gen})
	meta.SetStatusCondition(conds, metav1.Condition{Type: wellknown.ConditionStalled, Status: status(stalled && !ready), Reason: reason, Message: msg, ObservedGeneration: gen})
}
