package volumepolicy

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

var (
	actionTypes = []string{Skip, Snapshot, FSBackup, Custom}
	dataMovers  = []string{"", "velero", "velero-fs", "velero-block"}
	pvcPhases   = map[string]bool{"Pending": true, "Bound": true, "Lost": true}
	// SupportedVolumeTypes are the volume types a volumeTypes condition can name.
	SupportedVolumeTypes = []string{"awsAzureDisk", "awsElasticBlockStore", "azureDisk", "azureFile", "cinder", "cephfs", "configMap", "csi",
		"downwardAPI", "emptyDir", "ephemeral", "fc", "flocker", "flexVolume", "gitRepo", "glusterfs", "gcePersistentDisk", "hostPath", "image",
		"iscsi", "local", "nfs", "photonPersistentDisk", "portworxVolume", "projected", "quobyte", "rbd", "scaleIO", "secret", "storageOS", "vsphereVolume"}
)

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// Validate checks the document. Problems are errors naming
// volumePolicies[i] and the condition or parameter; warnings point at rules
// that can never match.
func (d *Document) Validate() (warnings []string, err error) {
	var errs []error
	if d.Version != Version {
		errs = append(errs, fmt.Errorf("version: %q is not supported; set version: v1", d.Version))
	}
	for i, p := range d.VolumePolicies {
		at := fmt.Sprintf("volumePolicies[%d]", i)
		errs = append(errs, p.Action.validate(at+".action"))
		c := p.Conditions
		if _, _, err := parseCapacity(c.Capacity); err != nil {
			errs = append(errs, fmt.Errorf("%s.conditions.capacity: %w", at, err))
		}
		if c.CSI != nil && c.CSI.Driver == "" && len(c.CSI.VolumeAttributes) > 0 {
			errs = append(errs, fmt.Errorf("%s.conditions.csi: the csi driver must be set when filtering by volumeAttributes", at))
		}
		for _, t := range c.VolumeTypes {
			if !contains(SupportedVolumeTypes, t) {
				warnings = append(warnings, fmt.Sprintf("%s.conditions.volumeTypes: %q is not a known volume type (matching is exact and case-sensitive, e.g. emptyDir), so it never matches", at, t))
			}
		}
		for _, ph := range c.PVCPhase {
			if !pvcPhases[ph] {
				warnings = append(warnings, fmt.Sprintf("%s.conditions.pvcPhase: %q is not a PVC phase (Pending, Bound, Lost), so it never matches", at, ph))
			}
		}
	}
	errs = append(errs, validateIncludeExclude(d.IncludeExcludePolicy))
	return warnings, errors.Join(errs...)
}

func (a Action) validate(at string) error {
	var errs []error
	if !contains(actionTypes, a.Type) {
		errs = append(errs, fmt.Errorf("%s.type: %q is not an action type; use one of %s", at, a.Type, strings.Join(actionTypes, ", ")))
	}
	for _, key := range []string{ParamDataMover, ParamSnapshotClass} {
		v, set := a.Parameters[key]
		if !set {
			continue
		}
		if a.Type != Snapshot {
			errs = append(errs, fmt.Errorf("%s.parameters.%s: only supported for the %q action, but the action type is %q", at, key, Snapshot, a.Type))
			continue
		}
		s, ok := v.(string)
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("%s.parameters.%s: must be a string, got %s", at, key, jsonType(v)))
		case key == ParamDataMover && !contains(dataMovers, s):
			errs = append(errs, fmt.Errorf("%s.parameters.%s: %q is not a data mover; use one of %q, velero, velero-fs, velero-block", at, key, s, ""))
		case key == ParamSnapshotClass && s == "":
			errs = append(errs, fmt.Errorf("%s.parameters.%s: must not be empty; name a VolumeSnapshotClass or remove the parameter", at, key))
		}
	}
	return errors.Join(errs...)
}

// parseCapacity reads "lower,upper"; an empty side is 0, and an upper of 0 is unbounded.
func parseCapacity(s string) (lo, hi resource.Quantity, err error) {
	if s == "" {
		return lo, hi, nil
	}
	parts := strings.Split(s, ",")
	if len(parts) != 2 {
		return lo, hi, fmt.Errorf("%q must be \"lower,upper\" (e.g. \"10Gi,100Gi\", \",100Gi\" or \"100Gi,\")", s)
	}
	for i, p := range parts {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		q, perr := resource.ParseQuantity(p)
		if perr != nil {
			return lo, hi, fmt.Errorf("%q: %q is not a quantity (e.g. 10Gi): %v", s, p, perr)
		}
		if i == 0 {
			lo = q
		} else {
			hi = q
		}
	}
	if !hi.IsZero() && lo.Cmp(hi) > 0 {
		return lo, hi, fmt.Errorf("%q: the lower bound exceeds the upper bound", s)
	}
	return lo, hi, nil
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case int64, float64:
		return "a number"
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}
