package snapshot

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/fanout"
	"github.com/snapflow/snapflow/internal/volumegroup"
)

// grouped reports the VolumeGroupSnapshot s shares with its siblings, or
// nil when s is staged on its own.
func grouped(s *snapv1.Snapshot, p *runPlan) *snapv1.SnapshotGroup {
	if p.copyMethod != snapv1.CopySnapshot || s.Spec.Source == nil {
		return nil
	}
	return s.Spec.Source.Group
}

// groupGVK resolves kind to the version of the group snapshot API this
// cluster serves; ok is false when it serves none.
func (f *Function) groupGVK(kind schema.GroupKind) (schema.GroupVersionKind, bool, error) {
	m, err := f.Client.RESTMapper().RESTMapping(kind)
	if meta.IsNoMatchError(err) {
		return schema.GroupVersionKind{}, false, nil
	}
	if err != nil {
		return schema.GroupVersionKind{}, false, err
	}
	return m.GroupVersionKind, true, nil
}

func groupAPIMissing() string {
	return fmt.Sprintf("groupBy: VolumeGroupSnapshot (the default for a pvcSelector matching several PVCs) needs the %s API (CSI external-snapshotter v8.2 or later, with a VolumeGroupSnapshotClass for your driver), which this cluster does not serve; install it, or set groupBy: None to accept independent per-PVC snapshots", volumegroup.Group)
}

// unusable says why s cannot stage from the existing group vgs of its
// firing of policy (nil when it can): one being deleted, or one snapflow
// did not cut for this firing. Staging and the hooks check it alike.
func unusable(vgs *unstructured.Unstructured, s *snapv1.Snapshot, policy string) *gate {
	switch {
	case vgs.GetDeletionTimestamp() != nil:
		return refusedFrom("VolumeGroupSnapshot %s is being deleted, so this PVC cannot be staged from it; cutting it again would back this PVC up from another instant than its siblings. The next firing takes a new group", vgs.GetName()).refused
	case !groupOf(vgs, s, policy):
		return refusedFrom("VolumeGroupSnapshot %s exists but was not cut by snapflow for this firing of SnapshotPolicy %s, so it is not backed up; delete or rename it and create a new Snapshot", vgs.GetName(), policy).refused
	}
	return nil
}

// memberOf finds the member VolumeSnapshot holding src in the group s
// shares with its siblings, cutting the group when s is the first of them
// to stage: every member of one firing reads the same instant.
func (f *Function) memberOf(ctx context.Context, s *snapv1.Snapshot, p *runPlan, g *snapv1.SnapshotGroup, src *corev1.PersistentVolumeClaim) (snapshotFrom, error) {
	if g.Namespace != "" && g.Namespace != s.Namespace {
		return refusedFrom("spec.source.group.namespace %q is not this Snapshot's namespace %q: a group snapshot covers PVCs of one namespace", g.Namespace, s.Namespace), nil
	}
	gvk, served, err := f.groupGVK(volumegroup.KindGroupSnapshot)
	if err != nil {
		return snapshotFrom{}, err
	}
	if !served {
		return refusedFrom("%s", groupAPIMissing()), nil
	}
	handle, driver, err := f.csiVolume(ctx, src)
	if err != nil {
		return snapshotFrom{}, err
	}
	if driver == "" {
		return refusedFrom("PVC %s is not a CSI volume bound to a PersistentVolume, so it cannot be part of a VolumeGroupSnapshot; set groupBy: None", src.Name), nil
	}
	vgs := &unstructured.Unstructured{}
	vgs.SetGroupVersionKind(gvk)
	err = f.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: g.VolumeGroupSnapshotName}, vgs)
	if apierrors.IsNotFound(err) {
		if refused, err := f.cutGroup(ctx, s, p, g, gvk, driver); err != nil || refused != nil {
			return snapshotFrom{refused: refused}, err
		}
		err = f.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: g.VolumeGroupSnapshotName}, vgs)
	}
	if err != nil {
		return snapshotFrom{}, err
	}
	if refused := unusable(vgs, s, p.policy.Name); refused != nil {
		return snapshotFrom{refused: refused}, nil
	}
	if !ownedByUID(vgs, s.UID) {
		// A member minted after the group was cut holds it from now on.
		vgs.SetOwnerReferences(append(vgs.GetOwnerReferences(), groupOwner(s)))
		if err := f.Client.Update(ctx, vgs); err != nil {
			return snapshotFrom{}, fmt.Errorf("hold VolumeGroupSnapshot %s: %w", vgs.GetName(), err)
		}
	}
	var gm snapshotFrom
	if ready, _, _ := unstructured.NestedBool(vgs.Object, "status", "readyToUse"); !ready {
		gm.waiting = fmt.Sprintf("waiting for VolumeGroupSnapshot %s, shared by this firing's PVCs, to be ready", vgs.GetName())
		if e, ok, _ := unstructured.NestedString(vgs.Object, "status", "error", "message"); ok && e != "" {
			gm.waiting += " (the snapshot controller reports: " + e + ")"
		}
		return gm, nil
	}
	contentName, _, _ := unstructured.NestedString(vgs.Object, "status", "boundVolumeGroupSnapshotContentName")
	cgvk, _, err := f.groupGVK(volumegroup.KindGroupContent)
	if err != nil {
		return snapshotFrom{}, err
	}
	content := &unstructured.Unstructured{}
	content.SetGroupVersionKind(cgvk)
	if err := f.Client.Get(ctx, client.ObjectKey{Name: contentName}, content); err != nil {
		return snapshotFrom{}, fmt.Errorf("read VolumeGroupSnapshotContent %q of group %s: %w", contentName, vgs.GetName(), err)
	}
	// The content must point back at the group, as the API asks consumers to check.
	if !refersTo(content, "volumeGroupSnapshotRef", vgs) {
		return refusedFrom("VolumeGroupSnapshotContent %s is not bound to VolumeGroupSnapshot %s/%s; not backed up", contentName, vgs.GetNamespace(), vgs.GetName()), nil
	}
	members, err := f.groupMembers(ctx, vgs)
	if err != nil {
		return snapshotFrom{}, err
	}
	m, err := volumegroup.Find(vgs.GetName(), volumegroup.SnapshotHandles(content), handle, members)
	switch {
	case errors.Is(err, volumegroup.ErrPending):
		gm.waiting = "waiting for the snapshot controller: " + err.Error()
		return gm, nil
	case err != nil:
		return refusedFrom("PVC %s: %v", src.Name, err), nil
	case !m.Ready:
		gm.waiting = fmt.Sprintf("waiting for VolumeSnapshot %s, this PVC's member of group %s, to be ready", m.Name, vgs.GetName())
		return gm, nil
	}
	gm.snapshot, gm.restoreSize = m.Name, m.RestoreSize
	return gm, nil
}

// cutGroup creates the group of s's firing, held by every unfinished
// member minted so far (a later one holds it when it stages), so it
// outlives the first member's run until the last one has staged. A group
// cut once is never cut again: a second cut would be a second instant.
func (f *Function) cutGroup(ctx context.Context, s *snapv1.Snapshot, p *runPlan, g *snapv1.SnapshotGroup, gvk schema.GroupVersionKind, driver string) (*gate, error) {
	if h := s.Status.Hooks; h != nil && h.GroupMember != "" {
		// This run skipped its hooks for a group that is gone: a new cut now
		// would be an instant no freeze covered.
		g := gate{cond: wellknown.ConditionReady, reason: ReasonInvalidSpec, fatal: true,
			message: fmt.Sprintf("VolumeGroupSnapshot %s, cut by Snapshot %s under its hooks, is gone before this PVC was staged; cutting it again would take an instant no hook quiesced, so this run fails. The next firing takes a new group", g.VolumeGroupSnapshotName, h.GroupMember)}
		return &g, nil
	}
	siblings, err := f.siblings(ctx, s, g.VolumeGroupSnapshotName, p.policy.Name)
	if err != nil {
		return nil, err
	}
	owners := []metav1.OwnerReference{groupOwner(s)}
	for i := range siblings {
		sib := &siblings[i]
		if st := sib.Status.Staged; st != nil && st.VolumeGroupSnapshotName == g.VolumeGroupSnapshotName {
			g := gate{cond: wellknown.ConditionReady, reason: ReasonInvalidSpec, fatal: true,
				message: fmt.Sprintf("VolumeGroupSnapshot %s was cut for this firing and deleted before this PVC was staged; cutting it again would back this PVC up from another instant than its siblings, so this run fails. The next firing takes a new group", g.VolumeGroupSnapshotName)}
			return &g, nil
		}
		if needsGroup(sib, s) {
			owners = append(owners, groupOwner(sib))
		}
	}
	if refused, err := f.labelMembers(ctx, s, p, g, driver); err != nil || refused != nil {
		return refused, err
	}
	// The snapshot controller reads only matchLabels, so the group selects
	// the label labelMembers put on exactly this firing's volumes, never
	// the policy's selector (whose matchExpressions it would drop, taking
	// every PVC of the namespace).
	selector := map[string]any{"matchLabels": map[string]any{wellknown.MemberPrefix + g.VolumeGroupSnapshotName: wellknown.MemberValue}}
	vgs := &unstructured.Unstructured{}
	vgs.SetGroupVersionKind(gvk)
	vgs.SetNamespace(s.Namespace)
	vgs.SetName(g.VolumeGroupSnapshotName)
	vgs.SetOwnerReferences(owners)
	vgs.SetLabels(map[string]string{wellknown.LabelManagedBy: wellknown.ManagedByValue, wellknown.LabelVolumeGroup: g.VolumeGroupSnapshotName, wellknown.LabelConfig: p.policy.Name})
	vgs.SetAnnotations(map[string]string{wellknown.AnnotationCutBy: s.Name})
	spec := map[string]any{"source": map[string]any{"selector": selector}}
	if class := p.policy.Annotations[wellknown.AnnotationVolumeGroupSnapshotClass]; class != "" {
		spec["volumeGroupSnapshotClassName"] = class
	}
	vgs.Object["spec"] = spec
	if err := f.Client.Create(ctx, vgs); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create VolumeGroupSnapshot %s: %w", g.VolumeGroupSnapshotName, err)
	}
	return nil, nil
}

// labelMembers marks the PVCs the group is cut over (volumegroup.Members:
// the source's selection the firing minted members for, bound, CSI
// volumes of driver) with the group's own label key, so two groups cut at
// once over the same PVCs never take each other's members. A PVC left out
// fails its own member, saying why. A patch the cluster refuses (a policy
// engine, a missing grant) fails the run with the reason.
func (f *Function) labelMembers(ctx context.Context, s *snapv1.Snapshot, p *runPlan, g *snapv1.SnapshotGroup, driver string) (*gate, error) {
	// One list serves the selection and each member's phase and volume.
	var list corev1.PersistentVolumeClaimList
	if err := f.Client.List(ctx, &list, client.InNamespace(s.Namespace)); err != nil {
		return nil, err
	}
	metas := make([]metav1.ObjectMeta, len(list.Items))
	byName := map[string]*corev1.PersistentVolumeClaim{}
	for i := range list.Items {
		metas[i], byName[list.Items[i].Name] = list.Items[i].ObjectMeta, &list.Items[i]
	}
	selected, err := fanout.Match(p.policy, metas)
	if err != nil {
		return nil, err
	}
	contested := map[string]bool{}
	for _, o := range fanout.Overlaps(p.policy, selected) {
		contested[o.PVC] = true
	}
	names := selected[int(s.Spec.Source.SourceIndex)]
	volumes := map[string]volumegroup.Volume{}
	for _, name := range names {
		pvc := byName[name]
		v := volumegroup.Volume{Bound: pvc.Status.Phase == corev1.ClaimBound && pvc.DeletionTimestamp == nil}
		if v.Bound {
			if _, v.Driver, err = f.csiVolume(ctx, pvc); err != nil {
				return nil, err
			}
		}
		volumes[name] = v
	}
	key := wellknown.MemberPrefix + g.VolumeGroupSnapshotName
	for _, name := range volumegroup.Members(names, contested, volumes, driver) {
		pvc := byName[name]
		if pvc.Labels[key] == wellknown.MemberValue {
			continue
		}
		patch := client.MergeFrom(pvc.DeepCopy())
		if pvc.Labels == nil {
			pvc.Labels = map[string]string{}
		}
		pvc.Labels[key] = wellknown.MemberValue
		err := f.Client.Patch(ctx, pvc, patch)
		switch {
		case err == nil, apierrors.IsNotFound(err):
		case apierrors.IsForbidden(err), apierrors.IsInvalid(err):
			return &gate{cond: wellknown.ConditionReady, reason: ReasonInvalidSpec, fatal: true,
				message: fmt.Sprintf("the cluster refused the label %s on PVC %s, which marks it as a member of VolumeGroupSnapshot %s: %v; allow it, or set groupBy: None", key, name, g.VolumeGroupSnapshotName, err)}, nil
		default:
			return nil, fmt.Errorf("label PVC %s for VolumeGroupSnapshot %s: %w", name, g.VolumeGroupSnapshotName, err)
		}
	}
	return nil, nil
}

// unlabelMembers takes a released group's label off its PVCs.
func (f *Function) unlabelMembers(ctx context.Context, ns, group string) error {
	key := wellknown.MemberPrefix + group
	var list corev1.PersistentVolumeClaimList
	if err := f.Client.List(ctx, &list, client.InNamespace(ns), client.HasLabels{key}); err != nil {
		return err
	}
	for i := range list.Items {
		pvc := &list.Items[i]
		patch := client.MergeFrom(pvc.DeepCopy())
		delete(pvc.Labels, key)
		if err := f.Client.Patch(ctx, pvc, patch); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("take the label of VolumeGroupSnapshot %s off PVC %s: %w", group, pvc.Name, err)
		}
	}
	return nil
}

// siblings lists the members of group g of policy in s's namespace (s
// among them): the Snapshots the fan-out labelled for the group whose spec
// names it too.
func (f *Function) siblings(ctx context.Context, s *snapv1.Snapshot, g, policy string) ([]snapv1.Snapshot, error) {
	var list snapv1.SnapshotList
	if err := f.Client.List(ctx, &list, client.InNamespace(s.Namespace), client.MatchingLabels{wellknown.LabelVolumeGroup: g}); err != nil {
		return nil, err
	}
	return slices.DeleteFunc(list.Items, func(sib snapv1.Snapshot) bool {
		return sib.Spec.Source == nil || sib.Spec.Source.Group == nil || sib.Spec.Source.Group.VolumeGroupSnapshotName != g ||
			sib.Spec.PolicyRef == nil || sib.Spec.PolicyRef.Name != policy
	}), nil
}

// needsGroup says whether sibling sib, other than s, still needs the
// group: its run has not ended and it is not being deleted.
func needsGroup(sib, s *snapv1.Snapshot) bool {
	return sib.UID != s.UID && sib.DeletionTimestamp == nil && !sib.Status.Phase.IsTerminal()
}

// groupOwner makes s an owner of its group that holds it, not controls it:
// the group is deleted by its last member, or by the garbage collector.
func groupOwner(s *snapv1.Snapshot) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: snapv1.GroupVersion.String(), Kind: "Snapshot", Name: s.Name, UID: s.UID}
}

// groupOf says whether vgs is the group snapflow cut for s's firing of
// policy: its labels name the group and the policy, as cutGroup wrote them.
func groupOf(vgs *unstructured.Unstructured, s *snapv1.Snapshot, policy string) bool {
	l := vgs.GetLabels()
	return l[wellknown.LabelManagedBy] == wellknown.ManagedByValue && l[wellknown.LabelConfig] == policy &&
		s.Spec.Source != nil && s.Spec.Source.Group != nil && l[wellknown.LabelVolumeGroup] == s.Spec.Source.Group.VolumeGroupSnapshotName
}

// csiVolume is the CSI handle and driver of the volume bound to pvc
// ("" for both when it is not a CSI volume bound to it).
func (f *Function) csiVolume(ctx context.Context, pvc *corev1.PersistentVolumeClaim) (handle, driver string, err error) {
	if pvc.Spec.VolumeName == "" {
		return "", "", nil
	}
	var pv corev1.PersistentVolume
	if err := f.Client.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, &pv); err != nil {
		if apierrors.IsNotFound(err) {
			return "", "", nil
		}
		return "", "", fmt.Errorf("read PersistentVolume %s of PVC %s: %w", pvc.Spec.VolumeName, pvc.Name, err)
	}
	if pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != pvc.UID || pv.Spec.CSI == nil {
		return "", "", nil
	}
	return pv.Spec.CSI.VolumeHandle, pv.Spec.CSI.Driver, nil
}

// groupMembers lists the VolumeSnapshots the snapshot controller made for
// vgs, each with the snapshot handle of a content bound back to it.
func (f *Function) groupMembers(ctx context.Context, vgs *unstructured.Unstructured) ([]volumegroup.Member, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(volumegroup.SnapshotListGVK)
	if err := f.Client.List(ctx, list, client.InNamespace(vgs.GetNamespace())); err != nil {
		return nil, fmt.Errorf("list the VolumeSnapshots of group %s: %w", vgs.GetName(), err)
	}
	var out []volumegroup.Member
	for i := range list.Items {
		vs := &list.Items[i]
		if group, _, _ := unstructured.NestedString(vs.Object, "status", "volumeGroupSnapshotName"); group != vgs.GetName() && !ownedByUID(vs, vgs.GetUID()) {
			continue
		}
		bound, _, _ := unstructured.NestedString(vs.Object, "status", "boundVolumeSnapshotContentName")
		if bound == "" {
			continue
		}
		content := &unstructured.Unstructured{}
		content.SetGroupVersionKind(volumegroup.SnapshotContentGVK)
		if err := f.Client.Get(ctx, client.ObjectKey{Name: bound}, content); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, fmt.Errorf("read VolumeSnapshotContent %s: %w", bound, err)
		}
		// Bi-directional binding, as the snapshot API asks consumers to check.
		if !refersTo(content, "volumeSnapshotRef", vs) {
			continue
		}
		handle, _, _ := unstructured.NestedString(content.Object, "status", "snapshotHandle")
		ready, _, _ := unstructured.NestedBool(vs.Object, "status", "readyToUse")
		size, _, _ := unstructured.NestedString(vs.Object, "status", "restoreSize")
		out = append(out, volumegroup.Member{Name: vs.GetName(), SnapshotHandle: handle, Ready: ready, RestoreSize: size})
	}
	return out, nil
}

// refersTo says whether content's spec.<field> (an object reference)
// names obj: name and namespace, and its uid when the reference has one.
func refersTo(content *unstructured.Unstructured, field string, obj metav1.Object) bool {
	ref, _, _ := unstructured.NestedStringMap(content.Object, "spec", field)
	return ref["name"] == obj.GetName() && ref["namespace"] == obj.GetNamespace() && (ref["uid"] == "" || ref["uid"] == string(obj.GetUID()))
}

func ownedByUID(obj metav1.Object, uid types.UID) bool {
	for _, o := range obj.GetOwnerReferences() {
		if o.UID == uid {
			return true
		}
	}
	return false
}

// releaseGroup drops s from its group's owners once its run is over, and
// deletes the group when no unfinished member of the firing still needs
// it, even if s never staged: a group with no owner left is never
// collected. Only a group snapflow cut for s's firing is touched.
func (f *Function) releaseGroup(ctx context.Context, s *snapv1.Snapshot) error {
	if s.Spec.Source == nil || s.Spec.Source.Group == nil {
		return nil
	}
	gvk, served, err := f.groupGVK(volumegroup.KindGroupSnapshot)
	if err != nil || !served {
		return err
	}
	vgs := &unstructured.Unstructured{}
	vgs.SetGroupVersionKind(gvk)
	if err := f.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: s.Spec.Source.Group.VolumeGroupSnapshotName}, vgs); err != nil {
		return client.IgnoreNotFound(err)
	}
	if s.Spec.PolicyRef == nil || !groupOf(vgs, s, s.Spec.PolicyRef.Name) {
		return nil
	}
	var rest []metav1.OwnerReference
	for _, o := range vgs.GetOwnerReferences() {
		if o.UID != s.UID {
			rest = append(rest, o)
		}
	}
	// Every member of the firing is a sibling, including one that has not
	// staged (and so does not hold the group) yet.
	siblings, err := f.siblings(ctx, s, s.Spec.Source.Group.VolumeGroupSnapshotName, s.Spec.PolicyRef.Name)
	if err != nil {
		return err
	}
	needed := false
	for i := range siblings {
		sib := &siblings[i]
		if !needsGroup(sib, s) {
			continue
		}
		needed = true
		// Every member that still needs the group holds it, so it is
		// collected with the last of them even if none stages.
		if !slices.ContainsFunc(rest, func(o metav1.OwnerReference) bool { return o.UID == sib.UID }) {
			rest = append(rest, groupOwner(sib))
		}
	}
	if needed {
		if slices.Equal(rest, vgs.GetOwnerReferences()) {
			return nil // nothing changes
		}
		vgs.SetOwnerReferences(rest)
		// The read's resourceVersion makes two members releasing at once retry, not overwrite.
		return client.IgnoreNotFound(f.Client.Update(ctx, vgs))
	}
	if err := f.unlabelMembers(ctx, s.Namespace, vgs.GetName()); err != nil {
		return err
	}
	uid := vgs.GetUID()
	if err := f.Client.Delete(ctx, vgs, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete VolumeGroupSnapshot %s: %w", vgs.GetName(), err)
	}
	return nil
}

// groupCut reports, before any hook runs, the member whose hooks quiesced
// the workload for the group s shares, when the group is cut: "" when it
// is not cut yet or its cutter cannot be trusted, and then s runs its own
// hooks. A cutter is trusted only when it is a sibling (same policy, same
// group) that ran its hooks itself and made the group while they held the
// workload quiesced; the annotation alone could be written by anyone who
// may create the group. A group s
// would refuse to stage from is refused here, before the freeze.
func (f *Function) groupCut(ctx context.Context, s *snapv1.Snapshot, p *runPlan, g *snapv1.SnapshotGroup) (cutBy string, refused *gate, err error) {
	gvk, served, err := f.groupGVK(volumegroup.KindGroupSnapshot)
	if err != nil {
		return "", nil, err
	}
	if !served {
		return "", refusedFrom("%s", groupAPIMissing()).refused, nil
	}
	vgs := &unstructured.Unstructured{}
	vgs.SetGroupVersionKind(gvk)
	err = f.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: g.VolumeGroupSnapshotName}, vgs)
	if apierrors.IsNotFound(err) {
		return "", nil, nil
	}
	if err != nil {
		return "", nil, err
	}
	if refused := unusable(vgs, s, p.policy.Name); refused != nil {
		return "", refused, nil
	}
	name := vgs.GetAnnotations()[wellknown.AnnotationCutBy]
	if name == "" || name == s.Name {
		return name, nil, nil
	}
	var cutter snapv1.Snapshot
	if err := f.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: name}, &cutter); err != nil {
		return "", nil, client.IgnoreNotFound(err)
	}
	// The group must have been made while the cutter held the workload
	// quiesced: after its beforeSnapshot hooks, before its afterSnapshot
	// ones. (A cutter that finished no longer holds the group.)
	h, made := cutter.Status.Hooks, vgs.GetCreationTimestamp()
	trusted := cutter.Spec.PolicyRef != nil && s.Spec.PolicyRef != nil && cutter.Spec.PolicyRef.Name == s.Spec.PolicyRef.Name &&
		cutter.Spec.Source != nil && cutter.Spec.Source.Group != nil && cutter.Spec.Source.Group.VolumeGroupSnapshotName == g.VolumeGroupSnapshotName &&
		h != nil && h.PreCompletedAt != nil && h.GroupMember == "" && !made.Before(h.PreCompletedAt) &&
		(h.PostCompletedAt == nil || !h.PostCompletedAt.Before(&made))
	if !trusted {
		return "", nil, nil
	}
	return name, nil, nil
}
