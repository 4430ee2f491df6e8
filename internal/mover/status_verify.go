package mover

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/validate"
)

func (k *KubeReporter) isPolicy() bool { return k.Target.Kind == "SnapshotPolicy" }

// updatePolicy applies mutate to the live SnapshotPolicy and writes its status.
func (k *KubeReporter) updatePolicy(ctx context.Context, mutate func(*snapv1.SnapshotPolicy) error) error {
	return update(ctx, k, &snapv1.SnapshotPolicy{}, mutate)
}

func (w *VerifyWork) repository() snapv1.RepositoryRef {
	return snapv1.RepositoryRef{Kind: snapv1.RepositoryKind(w.RepositoryKind), Name: w.RepositoryName, Namespace: w.RepositoryNamespace}
}

// runOf finds the status entry of this work's tier and repository.
func runOf(p *snapv1.SnapshotPolicy, w *VerifyWork) *snapv1.VerificationRun {
	key := validate.RepoKey(w.repository(), p.Namespace)
	for i := range p.Status.VerificationRuns {
		r := &p.Status.VerificationRuns[i]
		if r.Tier == w.Tier && validate.RepoKey(r.Repository, p.Namespace) == key {
			return r
		}
	}
	p.Status.VerificationRuns = append(p.Status.VerificationRuns, snapv1.VerificationRun{Tier: w.Tier, Repository: w.repository(), Slot: metav1.NewTime(w.Slot)})
	return &p.Status.VerificationRuns[len(p.Status.VerificationRuns)-1]
}

// superseded says a later run (a later slot) holds the tier's entry: a
// retried pod of an earlier run, which failed and so is retried by its Job,
// must neither rerun nor overwrite it.
func superseded(r *snapv1.VerificationRun, w *VerifyWork) bool {
	return r.Slot.Time.After(w.Slot)
}

// verifyStarted refuses a retried pod of a run that already has a result
// or that a later run superseded.
func (k *KubeReporter) verifyStarted(ctx context.Context) error {
	return k.updatePolicy(ctx, func(p *snapv1.SnapshotPolicy) error {
		r := runOf(p, k.Verify)
		finished := r.Slot.Time.Equal(k.Verify.Slot) && (r.Phase == "Passed" || r.Phase == "Failed")
		if finished || superseded(r, k.Verify) {
			return ErrAlreadyFinished
		}
		return errNoChange
	})
}

// VerifyDone records the outcome on the policy: the run entry, and on a
// pass the repository's lastVerified and the policy's oldest one.
func (k *KubeReporter) VerifyDone(ctx context.Context, v VerifyReport) error {
	err := k.updatePolicy(ctx, func(p *snapv1.SnapshotPolicy) error {
		w := &v.Work
		r := runOf(p, w)
		if superseded(r, w) {
			return errNoChange // a later run owns the entry; this result is history
		}
		at := metav1.NewTime(v.At)
		r.Slot, r.KopiaSnapshotID, r.Message, r.CompletedAt = metav1.NewTime(w.Slot), v.Outcome.SnapshotID, v.Message, &at
		r.Files, r.Bytes, r.Errors = ptr(v.Outcome.Files), ptr(v.Outcome.Bytes), ptr(v.Outcome.Errors)
		r.Phase = "Failed"
		status := metav1.ConditionFalse
		if v.Passed {
			r.Phase, status = "Passed", metav1.ConditionTrue
			markVerified(p, w.repository(), v.At)
		}
		meta.SetStatusCondition(&p.Status.Conditions, metav1.Condition{Type: wellknown.ConditionVerified, Status: status, Reason: "Verification" + r.Phase,
			Message: v.Message, ObservedGeneration: p.Generation})
		return nil
	})
	if errors.Is(err, errNoChange) {
		return nil
	}
	return err
}

// markVerified sets one repository's lastVerified, and the policy's flat
// lastVerified to the oldest across its repositories (unset while any
// repository has never been verified).
func markVerified(p *snapv1.SnapshotPolicy, ref snapv1.RepositoryRef, at time.Time) {
	t := metav1.NewTime(at)
	key := validate.RepoKey(ref, p.Namespace)
	found := false
	for i := range p.Status.Verification {
		if validate.RepoKey(p.Status.Verification[i].Repository, p.Namespace) == key {
			p.Status.Verification[i].LastVerified, found = &t, true
		}
	}
	if !found {
		p.Status.Verification = append(p.Status.Verification, snapv1.RepositoryVerification{Repository: ref, LastVerified: &t})
	}
	if p.Status.VerificationStamps == nil {
		p.Status.VerificationStamps = map[string]string{}
	}
	p.Status.VerificationStamps[key] = at.UTC().Format(time.RFC3339)
	var oldest *metav1.Time
	for _, want := range validate.PolicyRefs(p) {
		var got *metav1.Time
		for _, v := range p.Status.Verification {
			if validate.RepoKey(v.Repository, p.Namespace) == validate.RepoKey(want, p.Namespace) {
				got = v.LastVerified
			}
		}
		if got == nil {
			p.Status.LastVerified = nil
			return
		}
		if oldest == nil || got.Before(oldest) {
			oldest = got
		}
	}
	p.Status.LastVerified = oldest
}

func (k *KubeReporter) verifyFailed(ctx context.Context, f Failure, at time.Time) error {
	return k.updatePolicy(ctx, func(p *snapv1.SnapshotPolicy) error {
		r := runOf(p, k.Verify)
		t := metav1.NewTime(at)
		msg := fmt.Sprintf("%s verification could not run (%s): %s", k.Verify.Tier, f.Class, f.Message)
		if f.Hint != "" {
			msg += "; " + f.Hint
		}
		r.Slot, r.Phase, r.Message, r.CompletedAt = metav1.NewTime(k.Verify.Slot), "Failed", msg, &t
		meta.SetStatusCondition(&p.Status.Conditions, metav1.Condition{Type: wellknown.ConditionVerified, Status: metav1.ConditionFalse, Reason: f.Class,
			Message: msg, ObservedGeneration: p.Generation})
		return nil
	})
}
