package cleanup

import (
	"context"
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/functions/snapshot"
)

// policySettled says reconcilePolicy has nothing to do for p: it is live
// and has the finalizer, or deleted and released already.
func policySettled(p *snapv1.SnapshotPolicy) bool {
	return controllerutil.ContainsFinalizer(p, wellknown.FinalizerPolicyCleanup) == (p.DeletionTimestamp == nil)
}

// reconcilePolicy keeps the policy-cleanup finalizer on a live policy and,
// when the policy is deleted, cascades to its Snapshots: with
// onPolicyDelete Retain (the default) they go with their kopia data kept;
// with Delete their data goes too (external deletions, so the breaker
// applies). The policy is released once its Snapshots are gone.
func (f *Function) reconcilePolicy(ctx context.Context, ns, name string) error {
	var p snapv1.SnapshotPolicy
	if err := f.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &p); err != nil {
		return client.IgnoreNotFound(err)
	}
	if policySettled(&p) {
		return nil
	}
	if p.DeletionTimestamp == nil {
		controllerutil.AddFinalizer(&p, wellknown.FinalizerPolicyCleanup)
		return client.IgnoreNotFound(ignoreConflict(f.Client.Update(ctx, &p)))
	}
	var list snapv1.SnapshotList
	if err := f.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{wellknown.LabelConfig: name}); err != nil {
		return err
	}
	retain := p.Spec.Deletion == nil || p.Spec.Deletion.OnPolicyDelete != snapv1.CascadeDelete
	var errs []error
	for i := range list.Items {
		s := &list.Items[i]
		if s.DeletionTimestamp != nil {
			continue
		}
		if retain {
			errs = append(errs, snapshot.Prune(ctx, f.Client, s, wellknown.PrunedByPolicyCascade))
		} else if err := f.Client.Delete(ctx, s); err != nil && !apierrors.IsNotFound(err) {
			// Delete: an external deletion, so the breaker counts it.
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if len(list.Items) > 0 {
		return nil // released once its Snapshots' finalizers are done
	}
	controllerutil.RemoveFinalizer(&p, wellknown.FinalizerPolicyCleanup)
	return client.IgnoreNotFound(ignoreConflict(f.Client.Update(ctx, &p)))
}

// ignoreConflict drops a lost write race: the next event or resync retries.
func ignoreConflict(err error) error {
	if apierrors.IsConflict(err) {
		return nil
	}
	return err
}
