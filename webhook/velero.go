package webhook

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	jsonpatch "gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/mutate"
	"github.com/snapflow/snapflow/internal/policysource"
	"github.com/snapflow/snapflow/internal/volumepolicy"
)

// Velero's own names.
const (
	VeleroGlobalPolicyAnnotation = "velero.io/global-backup-volume-policy-configmap"
	VeleroMutatePath             = "/mutate/velero-backup"
	DefaultVeleroConfig          = "snapflow-velero"
	// LabelVeleroBackup marks a merged-policy ConfigMap; its value is the
	// Backup's name when that fits a label value (at most 63 characters),
	// else empty. AnnotationVeleroBackup always holds the name once known.
	LabelVeleroBackup      = wellknown.SnapflowPrefix + "velero-backup"
	AnnotationVeleroBackup = wellknown.SnapflowPrefix + "velero-backup"
	// AnnotationVeleroOriginalPolicy records the Backup's own resourcePolicy ConfigMap.
	AnnotationVeleroOriginalPolicy = wellknown.SnapflowPrefix + "original-resource-policy"
	// AnnotationVeleroPolicyError says why the policies could not be merged;
	// the Backup then fails Velero's validation (FailedValidation) with it.
	AnnotationVeleroPolicyError = wellknown.SnapflowPrefix + "volume-policies-error"
)

// VeleroBackupGVK is velero.io/v1 Backup.
var VeleroBackupGVK = schema.GroupVersionKind{Group: "velero.io", Version: "v1", Kind: "Backup"}

// VeleroBackups merges the global volume policies into Velero Backups, for
// clusters that run Velero itself: it writes the merged document to a
// ConfigMap next to the Backup, points spec.resourcePolicy at it and sets
// the annotation Velero uses to show the global policy.
type VeleroBackups struct {
	Client   client.Client
	Policies *policysource.Resolver
	Log      logr.Logger
}

var _ admission.Handler = (*VeleroBackups)(nil)

// MergedConfigMapName is the ConfigMap holding a Backup's merged policies.
func MergedConfigMapName(backup string) string {
	name := "snapflow-vp-" + backup
	if len(name) <= 253 {
		return name
	}
	sum := sha256.Sum256([]byte(backup))
	return name[:240] + "-" + hex.EncodeToString(sum[:])[:12]
}

// mergedName names the merged ConfigMap of a Backup being created: its
// name (or generateName prefix, as the API server makes the name up only
// after mutation) and a hash of the admission request. The request makes
// it unique, so a second create of a taken name (refused only after
// admission) can never rewrite the live Backup's ConfigMap; the sweeper
// finds each ConfigMap's Backup by spec.resourcePolicy.
func mergedName(backup *unstructured.Unstructured, request types.UID) string {
	base := backup.GetName()
	if base == "" {
		base = strings.TrimSuffix(backup.GetGenerateName(), "-")
	}
	sum := sha256.Sum256([]byte(request))
	return MergedConfigMapName(base + "-" + hex.EncodeToString(sum[:])[:8])
}

// failedDocument is what a Backup's resourcePolicy points at when its
// policies cannot be merged: Velero's loader refuses its version, so the
// Backup ends FailedValidation with the reason in its validation errors,
// as Velero's design has it, instead of being refused at creation (which
// would lose a Schedule's Backup without a trace) or run without the
// baseline.
func failedDocument(reason string) string {
	why := strings.ReplaceAll(reason, "\n", " ")
	return fmt.Sprintf("# snapflow could not merge the volume policies into this Backup:\n# %s\n# Fix that, then create the Backup again.\nversion: %q\n", why, "invalid: "+why)
}

// Handle merges on CREATE.
func (v *VeleroBackups) Handle(ctx context.Context, req admission.Request) admission.Response {
	start := time.Now()
	resp := v.handle(ctx, req)
	observe("velero.io/Backup", string(req.Operation), "mutate", decisionOf(resp), time.Since(start))
	return resp
}

func (v *VeleroBackups) handle(ctx context.Context, req admission.Request) admission.Response {
	var backup unstructured.Unstructured
	if err := json.Unmarshal(req.Object.Raw, &backup.Object); err != nil {
		return admission.Denied("cannot decode the Backup: " + err.Error())
	}
	switch req.Operation {
	case "CREATE":
	case "UPDATE":
		// The merged policies are set at creation; a Backup still queued
		// must not be pointed elsewhere to run without them. Velero itself
		// never changes spec.resourcePolicy.
		var old unstructured.Unstructured
		if err := json.Unmarshal(req.OldObject.Raw, &old.Object); err != nil {
			return admission.Denied("cannot decode the stored Backup: " + err.Error())
		}
		was, _, _ := unstructured.NestedFieldNoCopy(old.Object, "spec", "resourcePolicy")
		is, _, _ := unstructured.NestedFieldNoCopy(backup.Object, "spec", "resourcePolicy")
		if !equality.Semantic.DeepEqual(was, is) {
			return admission.Denied("spec.resourcePolicy: is set when the Backup is created, with the global backup volume policies merged in, and cannot change; create a new Backup with the policy you want")
		}
		return admission.Allowed("")
	default:
		return admission.Allowed("")
	}
	// Every new Backup is merged, whatever annotations it arrives with: a
	// copied "already merged" marker must not skip the baseline.
	ns := req.Namespace
	cmName := mergedName(&backup, req.UID)
	kind, _, _ := unstructured.NestedString(backup.Object, "spec", "resourcePolicy", "kind")
	ownName, _, _ := unstructured.NestedString(backup.Object, "spec", "resourcePolicy", "name")
	annotations := map[string]string{}
	if ownName != "" {
		annotations[AnnotationVeleroOriginalPolicy] = ownName
	}
	doc, gref, warnings, err := v.merge(ctx, ns, kind, ownName)
	if err != nil {
		doc = failedDocument(err.Error())
		annotations[AnnotationVeleroPolicyError] = err.Error()
		warnings = append(warnings, "this Backup will fail Velero's validation (FailedValidation): "+err.Error())
	} else if doc == "" {
		return admission.Allowed("").WithWarnings(warnings...) // no global policies configured
	} else {
		// Velero's describe prints this as the global policy's name; with
		// the namespace it points at the right ConfigMap even where that is
		// not Velero's install namespace.
		annotations[VeleroGlobalPolicyAnnotation] = v.Policies.Namespace + "/" + v.Policies.GlobalName
	}
	if req.DryRun == nil || !*req.DryRun {
		if err := v.writeMerged(ctx, ns, cmName, backup.GetName(), gref, doc); err != nil {
			return admission.Errored(500, err)
		}
	}
	patches := append([]jsonpatch.Operation{jsonpatch.NewOperation("add", "/spec/resourcePolicy", map[string]string{"kind": "configmap", "name": cmName})},
		mutate.SetAnnotations(backup.GetAnnotations(), annotations)...)
	return admission.Patched("", patches...).WithWarnings(warnings...)
}

// merge reads the global baseline and the Backup's own policies and
// returns the merged document ("" when no baseline is configured), or why
// they cannot be merged.
func (v *VeleroBackups) merge(ctx context.Context, ns, kind, ownName string) (string, *volumepolicy.SourceRef, []string, error) {
	global, gref, ignored, err := v.Policies.Global(ctx)
	if err != nil {
		return "", nil, nil, fmt.Errorf("cannot merge the global backup volume policies into this Backup: %w", err)
	}
	if global == nil {
		return "", nil, nil, nil
	}
	var own *volumepolicy.Document
	var warnings []string
	if len(ignored) > 0 {
		// Said on every Backup, not once at start-up: the global document
		// may have gained such a section since.
		warnings = append(warnings, volumepolicy.IgnoredWarning(gref, ignored))
	}
	if ownName != "" {
		if !strings.EqualFold(kind, "configmap") {
			warnings = append(warnings, fmt.Sprintf("spec.resourcePolicy.kind %q is not configmap, so Velero ignores it; only the global volume policies apply", kind))
		} else {
			var cm corev1.ConfigMap
			if err := v.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ownName}, &cm); err != nil {
				return "", nil, warnings, fmt.Errorf("cannot read the Backup's resourcePolicy ConfigMap %s/%s: %w", ns, ownName, err)
			}
			doc, err := volumepolicy.FromConfigMap(&cm)
			if err == nil {
				_, err = doc.Validate()
			}
			if err != nil {
				return "", nil, warnings, fmt.Errorf("the Backup's resourcePolicy ConfigMap %s/%s is invalid: %w", ns, ownName, err)
			}
			own = doc
		}
	}
	merged, err := yaml.Marshal(volumepolicy.MergeDocuments(own, global))
	if err != nil {
		return "", nil, warnings, fmt.Errorf("encode the merged volume policies: %w", err)
	}
	return string(merged), gref, warnings, nil
}

func (v *VeleroBackups) writeMerged(ctx context.Context, ns, name, backup string, global *volumepolicy.SourceRef, doc string) error {
	label := backup
	if len(validation.IsValidLabelValue(backup)) > 0 {
		label = "" // too long for a label value: the annotation names it
	}
	annotations := map[string]string{}
	if backup != "" {
		annotations[AnnotationVeleroBackup] = backup
	}
	if global != nil {
		annotations[wellknown.SnapflowPrefix+"global-volume-policies"] = global.ConfigMap + "@" + global.ResourceVersion
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Labels:      map[string]string{LabelVeleroBackup: label, wellknown.LabelManagedBy: wellknown.ManagedByValue},
			Annotations: annotations},
		Data: map[string]string{"policies.yaml": doc},
	}
	err := v.Client.Create(ctx, cm)
	if apierrors.IsAlreadyExists(err) {
		// The name holds this admission request's hash, so only a retry of
		// the same request finds it: bring the content up to date, unless
		// it is not that (not snapflow's, or already some Backup's).
		var cur corev1.ConfigMap
		if err := v.Client.Get(ctx, client.ObjectKeyFromObject(cm), &cur); err != nil {
			return fmt.Errorf("read merged policies ConfigMap %s/%s: %w", ns, name, err)
		}
		if cur.Labels[wellknown.LabelManagedBy] != wellknown.ManagedByValue || len(cur.OwnerReferences) > 0 {
			return fmt.Errorf("ConfigMap %s/%s already exists and is not this Backup's merged policies; retry the create", ns, name)
		}
		cur.Data, cur.Labels, cur.Annotations = cm.Data, cm.Labels, cm.Annotations
		err = v.Client.Update(ctx, &cur)
	}
	if err != nil {
		return fmt.Errorf("write merged policies ConfigMap %s/%s: %w", ns, name, err)
	}
	return nil
}

// VeleroSweeper ties each merged ConfigMap to its Backup with an owner
// reference (so the cluster's garbage collector removes it with the Backup)
// and deletes any whose Backup is gone or never came to exist, so none leak
// even where no garbage collector runs.
type VeleroSweeper struct {
	Client   client.Client
	Interval time.Duration
	// Grace spares ConfigMaps younger than this: their Backup may still be in admission.
	Grace time.Duration
	Log   logr.Logger
	Now   func() time.Time
}

// Start sweeps every Interval until ctx ends.
func (s *VeleroSweeper) Start(ctx context.Context) error {
	t := time.NewTicker(s.Interval)
	defer t.Stop()
	for {
		if err := s.Sweep(ctx); err != nil {
			s.Log.Error(err, "sweeping merged Velero policy ConfigMaps failed; retrying")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Sweep makes one pass.
func (s *VeleroSweeper) Sweep(ctx context.Context) error {
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	var list corev1.ConfigMapList
	if err := s.Client.List(ctx, &list, client.HasLabels{LabelVeleroBackup}, client.MatchingLabels{wellknown.LabelManagedBy: wellknown.ManagedByValue}); err != nil {
		return fmt.Errorf("list merged policy ConfigMaps: %w", err)
	}
	referrers := map[string]map[string]*unstructured.Unstructured{} // namespace → ConfigMap name → Backup
	var errs []error
	for i := range list.Items {
		cm := &list.Items[i]
		backup, err := s.backupOf(ctx, cm, referrers)
		switch {
		case err != nil:
			// One ConfigMap must not stop the pass for the others.
			errs = append(errs, err)
		case backup == nil:
			if now().Sub(cm.CreationTimestamp.Time) < s.Grace {
				continue
			}
			// Only as it was judged: a ConfigMap written since is judged again.
			if err := s.Client.Delete(ctx, cm, client.Preconditions{UID: &cm.UID, ResourceVersion: &cm.ResourceVersion}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				errs = append(errs, fmt.Errorf("delete orphaned ConfigMap %s/%s: %w", cm.Namespace, cm.Name, err))
				continue
			}
			s.Log.Info("deleted merged policy ConfigMap of a Backup that is gone", "configmap", cm.Namespace+"/"+cm.Name)
		case !ownedBy(cm, backup.GetUID()):
			cm.OwnerReferences = append(cm.OwnerReferences, metav1.OwnerReference{
				APIVersion: VeleroBackupGVK.GroupVersion().String(), Kind: VeleroBackupGVK.Kind,
				Name: backup.GetName(), UID: backup.GetUID(), BlockOwnerDeletion: ptr.To(false),
			})
			if cm.Annotations == nil {
				cm.Annotations = map[string]string{}
			}
			cm.Annotations[AnnotationVeleroBackup] = backup.GetName()
			if err := s.Client.Update(ctx, cm); err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("set owner of ConfigMap %s/%s: %w", cm.Namespace, cm.Name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// backupOf finds the Backup a merged ConfigMap belongs to (nil when there is
// none): by the name it records, or, for a Backup created with
// generateName (unnamed when its ConfigMap was written), by the Backup
// whose spec.resourcePolicy points at it. referrers caches one list of
// Backups per namespace for a pass.
func (s *VeleroSweeper) backupOf(ctx context.Context, cm *corev1.ConfigMap, referrers map[string]map[string]*unstructured.Unstructured) (*unstructured.Unstructured, error) {
	name := cm.Annotations[AnnotationVeleroBackup]
	if name == "" {
		name = cm.Labels[LabelVeleroBackup] // written before the annotation existed
	}
	if name != "" && len(validation.IsDNS1123Subdomain(name)) > 0 {
		return nil, nil // no Backup can have that name
	}
	if name != "" {
		backup := &unstructured.Unstructured{}
		backup.SetGroupVersionKind(VeleroBackupGVK)
		err := s.Client.Get(ctx, client.ObjectKey{Namespace: cm.Namespace, Name: name}, backup)
		switch {
		case apierrors.IsNotFound(err):
			return nil, nil
		case err != nil:
			return nil, fmt.Errorf("read Backup for ConfigMap %s/%s: %w", cm.Namespace, cm.Name, err)
		}
		if ref, _, _ := unstructured.NestedString(backup.Object, "spec", "resourcePolicy", "name"); ref != cm.Name {
			return nil, nil // a Backup of that name that does not use this ConfigMap
		}
		return backup, nil
	}
	byRef, listed := referrers[cm.Namespace]
	if !listed {
		var backups unstructured.UnstructuredList
		backups.SetGroupVersionKind(VeleroBackupGVK.GroupVersion().WithKind(VeleroBackupGVK.Kind + "List"))
		if err := s.Client.List(ctx, &backups, client.InNamespace(cm.Namespace)); err != nil {
			return nil, fmt.Errorf("list Backups in %s for ConfigMap %s: %w", cm.Namespace, cm.Name, err)
		}
		byRef = map[string]*unstructured.Unstructured{}
		for i := range backups.Items {
			if ref, _, _ := unstructured.NestedString(backups.Items[i].Object, "spec", "resourcePolicy", "name"); ref != "" {
				byRef[ref] = &backups.Items[i]
			}
		}
		referrers[cm.Namespace] = byRef
	}
	return byRef[cm.Name], nil
}

func ownedBy(cm *corev1.ConfigMap, uid types.UID) bool {
	for _, o := range cm.OwnerReferences {
		if o.UID == uid {
			return true
		}
	}
	return false
}
