// Package volumepolicy implements Velero's ResourcePolicies volume policies
// (document version v1) for snapflow: strict decoding, validation that names
// the policy and condition, first-match evaluation against a PV and PVC, and
// the global baseline merge (recipe policies first, then global ones, so a
// recipe can override the baseline for a volume and inherit the rest).
package volumepolicy

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// Version is the only document version there is.
const Version = "v1"

// Action types.
const (
	Skip     = "skip"
	Snapshot = "snapshot"
	FSBackup = "fs-backup"
	Custom   = "custom"
)

// Snapshot-only action parameters.
const (
	ParamDataMover     = "dataMover"
	ParamSnapshotClass = "snapshotClass"
)

// Document is a ResourcePolicies document. Only volumePolicies mean anything
// to snapflow, which backs up volumes rather than API resources; the other
// sections are kept so that Velero documents decode, and are reported.
type Document struct {
	Version                   string          `json:"version"`
	VolumePolicies            []Policy        `json:"volumePolicies,omitempty"`
	IncludeExcludePolicy      json.RawMessage `json:"includeExcludePolicy,omitempty"`
	ClusterScopedFilterPolicy json.RawMessage `json:"clusterScopedFilterPolicy,omitempty"`
	NamespacedFilterPolicies  json.RawMessage `json:"namespacedFilterPolicies,omitempty"`
}

// Policy is one rule: when every condition holds, take the action.
type Policy struct {
	Conditions Conditions `json:"conditions"`
	Action     Action     `json:"action"`
}

// Conditions are ANDed; an absent condition always holds.
type Conditions struct {
	// Capacity is "lower,upper", inclusive; an empty side is unbounded.
	Capacity       string            `json:"capacity,omitempty"`
	StorageClass   []string          `json:"storageClass,omitempty"`
	NFS            *NFSCondition     `json:"nfs,omitempty"`
	CSI            *CSICondition     `json:"csi,omitempty"`
	VolumeTypes    []string          `json:"volumeTypes,omitempty"`
	PVCLabels      map[string]string `json:"pvcLabels,omitempty"`
	PVCPhase       []string          `json:"pvcPhase,omitempty"`
	PVCVolumeMode  string            `json:"pvcVolumeMode,omitempty"`
	PVCAccessModes []string          `json:"pvcAccessModes,omitempty"`
}

// NFSCondition matches NFS volumes; empty fields match any value.
type NFSCondition struct {
	Server string `json:"server,omitempty"`
	Path   string `json:"path,omitempty"`
}

// CSICondition matches CSI volumes by driver and a subset of attributes.
type CSICondition struct {
	Driver           string            `json:"driver,omitempty"`
	VolumeAttributes map[string]string `json:"volumeAttributes,omitempty"`
}

// Action is what happens to a matching volume.
type Action struct {
	Type       string         `json:"type"`
	Parameters map[string]any `json:"parameters,omitempty"`
}

// SnapshotClass is the VolumeSnapshotClass a snapshot action names, or "".
func (a Action) SnapshotClass() string {
	s, _ := a.Parameters[ParamSnapshotClass].(string)
	return s
}

// Parse decodes a YAML or JSON document strictly: a key the schema does not
// know is an error naming where it is.
func Parse(data []byte) (*Document, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("not YAML or JSON: %w", err)
	}
	var doc Document
	strict, err := sigsjson.UnmarshalStrict(js, &doc)
	if err != nil {
		return nil, fmt.Errorf("cannot decode resource policies: %w", err)
	}
	if len(strict) > 0 {
		msgs := make([]string, len(strict))
		for i, e := range strict {
			msgs[i] = e.Error()
		}
		return nil, fmt.Errorf("cannot decode resource policies: %s", strings.Join(msgs, "; "))
	}
	return &doc, nil
}

// FromConfigMap reads the document a ConfigMap holds under its one data key.
func FromConfigMap(cm *corev1.ConfigMap) (*Document, error) {
	if len(cm.Data) != 1 {
		keys := make([]string, 0, len(cm.Data))
		for k := range cm.Data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		return nil, fmt.Errorf("ConfigMap %s/%s must hold the ResourcePolicies document under exactly one data key (found %d: %s)", cm.Namespace, cm.Name, len(cm.Data), strings.Join(keys, ", "))
	}
	for _, v := range cm.Data {
		doc, err := Parse([]byte(v))
		if err != nil {
			return nil, fmt.Errorf("ConfigMap %s/%s: %w", cm.Namespace, cm.Name, err)
		}
		return doc, nil
	}
	return nil, nil
}

// OtherSections names the non-volume sections a document carries.
func (d *Document) OtherSections() []string {
	var out []string
	if len(d.IncludeExcludePolicy) > 0 {
		out = append(out, "includeExcludePolicy")
	}
	if len(d.ClusterScopedFilterPolicy) > 0 {
		out = append(out, "clusterScopedFilterPolicy")
	}
	if len(d.NamespacedFilterPolicies) > 0 {
		out = append(out, "namespacedFilterPolicies")
	}
	return out
}
