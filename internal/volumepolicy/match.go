package volumepolicy

import (
	"reflect"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
)

// Volume is what a policy is matched against, as in Velero: a bound PVC's
// PV and the PVC, only the PVC while it is unbound, or a pod's volume
// (with its PVC and PV when it names one).
type Volume struct {
	PV        *corev1.PersistentVolume
	PVC       *corev1.PersistentVolumeClaim
	PodVolume *corev1.Volume
}

// facts are the properties conditions look at.
type facts struct {
	capacity     resource.Quantity
	storageClass string
	nfs          *corev1.NFSVolumeSource
	csi          *corev1.CSIPersistentVolumeSource
	volumeType   string
	pvcLabels    map[string]string
	pvcPhase     string
	pvcMode      string
	hasPVCMode   bool
	pvcAccess    []string
	hasPVC       bool
}

func factsOf(v Volume) facts {
	var f facts
	if pv := v.PV; pv != nil {
		f.capacity = pv.Spec.Capacity[corev1.ResourceStorage]
		f.storageClass = pv.Spec.StorageClassName
		f.nfs = pv.Spec.NFS
		f.csi = pv.Spec.CSI
		f.volumeType = pvType(pv.Spec.PersistentVolumeSource)
	}
	if pod := v.PodVolume; pod != nil && v.PV == nil {
		// An inline pod volume has no capacity or storage class, so a
		// storageClass or bounded capacity condition never matches it.
		f.nfs = pod.NFS
		if c := pod.CSI; c != nil {
			f.csi = &corev1.CSIPersistentVolumeSource{Driver: c.Driver, VolumeAttributes: c.VolumeAttributes}
		}
		f.volumeType = podVolumeType(pod.VolumeSource)
	}
	if pvc := v.PVC; pvc != nil {
		f.hasPVC = true
		f.pvcLabels = pvc.Labels
		f.pvcPhase = string(pvc.Status.Phase)
		if pvc.Spec.VolumeMode != nil {
			f.pvcMode, f.hasPVCMode = string(*pvc.Spec.VolumeMode), true
		}
		for _, m := range pvc.Spec.AccessModes {
			f.pvcAccess = append(f.pvcAccess, string(m))
		}
	}
	return f
}

// podVolumeType names an inline pod volume's source, and pvType a PV's,
// as Velero's volumeTypes condition spells them: the JSON name of the one
// source field that is set (storageos is spelt storageOS there).
func podVolumeType(s corev1.VolumeSource) string { return sourceType(s) }

func pvType(s corev1.PersistentVolumeSource) string { return sourceType(s) }

func sourceType(src any) string {
	v := reflect.ValueOf(src)
	for i := 0; i < v.NumField(); i++ {
		if f := v.Field(i); f.Kind() != reflect.Pointer || f.IsNil() {
			continue
		}
		name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
		if name == "storageos" {
			return "storageOS"
		}
		return name
	}
	return ""
}

// Matches reports whether every condition holds for v. The document must
// have passed Validate.
func (c Conditions) Matches(v Volume) bool {
	f := factsOf(v)
	if lo, hi, err := parseCapacity(c.Capacity); err != nil {
		return false
	} else if c.Capacity != "" && (f.capacity.Cmp(lo) < 0 || (!hi.IsZero() && f.capacity.Cmp(hi) > 0)) {
		return false
	}
	if len(c.StorageClass) > 0 && (f.storageClass == "" || !contains(c.StorageClass, f.storageClass)) {
		return false
	}
	if c.NFS != nil {
		if f.nfs == nil || (c.NFS.Server != "" && c.NFS.Server != f.nfs.Server) || (c.NFS.Path != "" && c.NFS.Path != f.nfs.Path) {
			return false
		}
	}
	if c.CSI != nil {
		if f.csi == nil || (c.CSI.Driver != "" && c.CSI.Driver != f.csi.Driver) {
			return false
		}
		for k, want := range c.CSI.VolumeAttributes {
			if got, ok := f.csi.VolumeAttributes[k]; !ok || got != want {
				return false
			}
		}
	}
	if len(c.VolumeTypes) > 0 && !contains(c.VolumeTypes, f.volumeType) {
		return false
	}
	if len(c.PVCLabels) > 0 && (!f.hasPVC || len(f.pvcLabels) == 0 || !labels.SelectorFromSet(c.PVCLabels).Matches(labels.Set(f.pvcLabels))) {
		return false
	}
	if len(c.PVCPhase) > 0 && (f.pvcPhase == "" || !contains(c.PVCPhase, f.pvcPhase)) {
		return false
	}
	if c.PVCVolumeMode != "" && (!f.hasPVCMode || f.pvcMode != c.PVCVolumeMode) {
		return false
	}
	if len(c.PVCAccessModes) > 0 && !sameSet(c.PVCAccessModes, f.pvcAccess) {
		return false
	}
	return true
}

func sameSet(a, b []string) bool {
	x, y := dedupe(a), dedupe(b)
	if len(x) != len(y) {
		return false
	}
	for i := range x {
		if x[i] != y[i] {
			return false
		}
	}
	return true
}

func dedupe(s []string) []string {
	m := map[string]bool{}
	for _, v := range s {
		m[v] = true
	}
	out := make([]string, 0, len(m))
	for v := range m {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}
