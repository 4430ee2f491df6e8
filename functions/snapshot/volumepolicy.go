package snapshot

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/internal/policysource"
	"github.com/snapflow/snapflow/internal/volumepolicy"
)

// ReasonSkipped is the Ready reason of a run whose volume a policy skipped.
const ReasonSkipped = "SkippedByVolumePolicy"

// applyVolumePolicies resolves the recipe's and the global volume policies
// afresh (admission may have been bypassed, and either ConfigMap may have
// changed since), decides for the source volume, and adjusts the plan:
// skip backs nothing up, fs-backup reads the live volume, snapshot stages a
// CSI snapshot (with the rule's snapshotClass), custom hands its parameters
// to the mover. A missing or invalid ConfigMap is an error for the caller to
// fail the run with.
func (f *Function) applyVolumePolicies(ctx context.Context, p *runPlan, vol volumepolicy.Volume) error {
	r := policysource.Resolver{Reader: f.Client, Namespace: f.Namespace, GlobalName: f.GlobalVolumePoliciesConfigMap}
	stamp, err := r.Resolve(ctx, p.policy)
	if err != nil {
		return err
	}
	if stamp != nil && len(stamp.Ignored) > 0 {
		p.ignoredGlobal = volumepolicy.IgnoredWarning(stamp.Global, stamp.Ignored)
	}
	d := snapv1.VolumePolicyDecision{PVC: p.pvc, CopyMethod: p.copyMethod}
	if stamp == nil {
		d.Message = "no volume policies apply; the recipe's copyMethod decides"
		p.decision = d
		return nil
	}
	if pvc := vol.PVC; pvc != nil && pvc.Spec.VolumeName != "" {
		var pv corev1.PersistentVolume
		if err := f.Client.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, &pv); err == nil {
			vol.PV = &pv
		} else if !apierrors.IsNotFound(err) {
			return fmt.Errorf("read PersistentVolume %s: %w", pvc.Spec.VolumeName, err)
		}
	}
	dec := volumepolicy.Decide(stamp.Rules, vol)
	if !dec.Matched {
		d.Message = fmt.Sprintf("none of the %d effective volume policy rules matched; the recipe's copyMethod decides", len(stamp.Rules))
		p.decision = d
		return nil
	}
	rule := dec.Rule
	idx := int32(rule.Index)
	d.Action, d.Source, d.RuleIndex = dec.Action, rule.Source, &idx
	ref := stamp.Global
	if rule.Source == volumepolicy.FromRecipe {
		ref = stamp.Recipe
	}
	if ref != nil {
		d.ConfigMap, d.ResourceVersion = ref.ConfigMap, ref.ResourceVersion
	}
	switch dec.Action {
	case volumepolicy.Skip:
		p.skip = true
		d.CopyMethod = ""
		d.Message = fmt.Sprintf("skipped by rule %d of the %s volume policies (%s)", rule.Index, rule.Source, d.ConfigMap)
	case volumepolicy.FSBackup:
		p.copyMethod = snapv1.CopyDirect
		d.Message = "fs-backup: the mover reads the live volume"
	case volumepolicy.Snapshot:
		if p.nfs != nil {
			// Never a silent fallback to reading the export in place.
			return fmt.Errorf("rule %d of the %s volume policies (%s) asks for a CSI snapshot of the nfs source %s:%s, which nothing can snapshot; narrow the rule's conditions so it does not match this export, or give it the fs-backup action", rule.Index, rule.Source, d.ConfigMap, p.nfs.Server, p.nfs.Path)
		}
		p.copyMethod = snapv1.CopySnapshot
		if c := rule.Action.SnapshotClass(); c != "" {
			p.snapshotClass = &c
		}
		d.Message = "snapshot: the mover reads a CSI snapshot of the volume"
	case volumepolicy.Custom:
		p.custom = rule.Action.Parameters
		d.Message = "custom: the rule's parameters are handed to the mover"
	}
	d.CopyMethod = p.copyMethod
	if p.skip {
		d.CopyMethod = ""
	}
	p.decision = d
	return nil
}
