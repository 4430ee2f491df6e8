package webhook

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	jsonpatch "gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
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
	// LabelVeleroBackup marks a merged-policy ConfigMap with the Backup it belongs to.
	LabelVeleroBackup = wellknown.SnapflowPrefix + "velero-backup"
	// AnnotationVeleroOriginalPolicy records the Backup's own resourcePolicy ConfigMap.
	AnnotationVeleroOriginalPolicy = wellknown.SnapflowPrefix + "original-resource-policy"
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

// Handle merges on CREATE.
func (v *VeleroBackups) Handle(ctx context.Context, req admission.Request) admission.Response {
	start := time.Now()
	resp := v.handle(ctx, req)
	observe("velero.io/Backup", string(req.Operation), "mutate", decisionOf(resp), time.Since(start))
	return resp
}

func (v *VeleroBackups) handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != "CREATE" {
		return admission.Allowed("")
	}
	var backup unstructured.Unstructured
	if err := json.Unmarshal(req.Object.Raw, &backup.Object); err != nil {
		return admission.Denied("cannot decode the Backup: " + err.Error())
	}
	if _, done := backup.GetAnnotations()[VeleroGlobalPolicyAnnotation]; done {
		return admission.Allowed("") // already merged (webhook reinvocation)
	}
	global, gref, _, err := v.Policies.Global(ctx)
	if err != nil {
		return admission.Denied("cannot merge the global backup volume policies into this Backup: " + err.Error())
	}
	if global == nil {
		return admission.Allowed("")
	}
	ns := req.Namespace
	var own *volumepolicy.Document
	var warnings []string
	kind, _, _ := unstructured.NestedString(backup.Object, "spec", "resourcePolicy", "kind")
	ownName, _, _ := unstructured.NestedString(backup.Object, "spec", "resourcePolicy", "name")
	if ownName != "" {
		if !strings.EqualFold(kind, "configmap") {
			warnings = append(warnings, fmt.Sprintf("spec.resourcePolicy.kind %q is not configmap, so Velero ignores it; only the global volume policies apply", kind))
		} else {
			var cm corev1.ConfigMap
			if err := v.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ownName}, &cm); err != nil {
				return admission.Denied(fmt.Sprintf("cannot read the Backup's resourcePolicy ConfigMap %s/%s: %v", ns, ownName, err))
			}
			doc, err := volumepolicy.FromConfigMap(&cm)
			if err == nil {
				_, err = doc.Validate()
			}
			if err != nil {
				return admission.Denied(fmt.Sprintf("the Backup's resourcePolicy ConfigMap %s/%s is invalid: %v", ns, ownName, err))
			}
			own = doc
		}
	}
	merged, err := yaml.Marshal(volumepolicy.MergeDocuments(own, global))
	if err != nil {
		return admission.Errored(500, err)
	}
	backupName := backup.GetName()
	if backupName == "" {
		return admission.Denied("a Backup merged with global volume policies needs a name (generateName is not supported): the merged ConfigMap is named after it")
	}
	cmName := MergedConfigMapName(backupName)
	if req.DryRun == nil || !*req.DryRun {
		if err := v.writeMerged(ctx, ns, cmName, backupName, gref, string(merged)); err != nil {
			return admission.Errored(500, err)
		}
	}
	annotations := map[string]string{VeleroGlobalPolicyAnnotation: v.Policies.GlobalName}
	if ownName != "" {
		annotations[AnnotationVeleroOriginalPolicy] = ownName
	}
	patches := append([]jsonpatch.Operation{jsonpatch.NewOperation("add", "/spec/resourcePolicy", map[string]string{"kind": "configmap", "name": cmName})},
		mutate.SetAnnotations(backup.GetAnnotations(), annotations)...)
	return admission.Patched("", patches...).WithWarnings(warnings...)
}

func (v *VeleroBackups) writeMerged(ctx context.Context, ns, name, backup string, global *volumepolicy.SourceRef, doc string) error {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Labels:      map[string]string{LabelVeleroBackup: backup, wellknown.LabelManagedBy: wellknown.ManagedByValue},
			Annotations: map[string]string{wellknown.SnapflowPrefix + "global-volume-policies": global.ConfigMap + "@" + global.ResourceVersion}},
		Data: map[string]string{"policies.yaml": doc},
	}
	err := v.Client.Create(ctx, cm)
	if apierrors.IsAlreadyExists(err) {
		// A retried admission of the same Backup: bring the content up to date.
		var cur corev1.ConfigMap
		if err := v.Client.Get(ctx, client.ObjectKeyFromObject(cm), &cur); err != nil {
			return fmt.Errorf("read merged policies ConfigMap %s/%s: %w", ns, name, err)
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
	if err := s.Client.List(ctx, &list, client.HasLabels{LabelVeleroBackup}); err != nil {
		return fmt.Errorf("list merged policy ConfigMaps: %w", err)
	}
	for i := range list.Items {
		cm := &list.Items[i]
		backup := &unstructured.Unstructured{}
		backup.SetGroupVersionKind(VeleroBackupGVK)
		err := s.Client.Get(ctx, client.ObjectKey{Namespace: cm.Namespace, Name: cm.Labels[LabelVeleroBackup]}, backup)
		switch {
		case apierrors.IsNotFound(err):
			if now().Sub(cm.CreationTimestamp.Time) < s.Grace {
				continue
			}
			if err := s.Client.Delete(ctx, cm); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("delete orphaned ConfigMap %s/%s: %w", cm.Namespace, cm.Name, err)
			}
			s.Log.Info("deleted merged policy ConfigMap of a Backup that is gone", "configmap", cm.Namespace+"/"+cm.Name)
		case err != nil:
			return fmt.Errorf("read Backup for ConfigMap %s/%s: %w", cm.Namespace, cm.Name, err)
		case !ownedBy(cm, backup.GetUID()):
			cm.OwnerReferences = append(cm.OwnerReferences, metav1.OwnerReference{
				APIVersion: VeleroBackupGVK.GroupVersion().String(), Kind: VeleroBackupGVK.Kind,
				Name: backup.GetName(), UID: backup.GetUID(), BlockOwnerDeletion: ptr.To(false),
			})
			if err := s.Client.Update(ctx, cm); err != nil {
				return fmt.Errorf("set owner of ConfigMap %s/%s: %w", cm.Namespace, cm.Name, err)
			}
		}
	}
	return nil
}

func ownedBy(cm *corev1.ConfigMap, uid types.UID) bool {
	for _, o := range cm.OwnerReferences {
		if o.UID == uid {
			return true
		}
	}
	return false
}
