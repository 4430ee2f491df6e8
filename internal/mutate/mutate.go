// Package mutate computes the changes snapflow's mutating webhook makes to an
// object on admission, as minimal JSON patches: only what is missing is
// added, nothing the user wrote is replaced.
package mutate

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	jsonpatch "gomodules.xyz/jsonpatch/v2"

	snapv1 "github.com/snapflow/snapflow/api/v1alpha1"
	"github.com/snapflow/snapflow/api/wellknown"
	"github.com/snapflow/snapflow/internal/validate"
)

// Create and Update are the operations that mutate.
type Operation string

const (
	Create Operation = "CREATE"
	Update Operation = "UPDATE"
)

// EscapeKey makes a map key usable as a JSON pointer segment.
func EscapeKey(key string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(key)
}

// Snapshot defaults a Snapshot. policyDefault is the recipe's
// defaultDeletionPolicy when it could be read ("" otherwise).
func Snapshot(s *snapv1.Snapshot, op Operation, policyDefault snapv1.DeletionPolicy) []jsonpatch.Operation {
	origin, known := validate.Origin(s)
	if !known {
		return nil // held inert: an object this build cannot classify is not touched
	}
	var ops []jsonpatch.Operation
	if s.Spec.DeletionPolicy == "" {
		dp := snapv1.DeletionDelete
		switch {
		case origin == snapv1.OriginDiscovered:
			dp = snapv1.DeletionRetain // never delete what snapflow did not create
		case policyDefault != "":
			dp = policyDefault
		}
		ops = append(ops, jsonpatch.NewOperation("add", "/spec/deletionPolicy", string(dp)))
	}
	// Never re-add the finalizer to an object being deleted: that would undo
	// the cleanup function's release and make the Snapshot undeletable.
	if s.DeletionTimestamp == nil && !contains(s.Finalizers, wellknown.FinalizerSnapshotCleanup) {
		if len(s.Finalizers) == 0 {
			ops = append(ops, jsonpatch.NewOperation("add", "/metadata/finalizers", []string{wellknown.FinalizerSnapshotCleanup}))
		} else {
			ops = append(ops, jsonpatch.NewOperation("add", "/metadata/finalizers/-", wellknown.FinalizerSnapshotCleanup))
		}
	}
	// The config label puts a Snapshot under its policy's retention and
	// cascade. Only new objects get it: labelling an old one would make it
	// prunable behind its owner's back.
	if op == Create && s.Spec.PolicyRef != nil && s.Spec.PolicyRef.Name != "" &&
		(s.Spec.PolicyRef.Namespace == "" || s.Spec.PolicyRef.Namespace == s.Namespace) &&
		(origin == snapv1.OriginManual || origin == snapv1.OriginScheduled || origin == snapv1.OriginAdopted) {
		if _, has := s.Labels[wellknown.LabelConfig]; !has {
			if s.Labels == nil {
				ops = append(ops, jsonpatch.NewOperation("add", "/metadata/labels", map[string]string{wellknown.LabelConfig: s.Spec.PolicyRef.Name}))
			} else {
				ops = append(ops, jsonpatch.NewOperation("add", "/metadata/labels/"+EscapeKey(wellknown.LabelConfig), s.Spec.PolicyRef.Name))
			}
		}
	}
	return ops
}

// SnapshotPolicy fills in the default ignore rules when files is omitted:
// the schema default cannot, because nested defaults do not materialise
// under an absent parent. An explicit list, including [], is kept as is.
func SnapshotPolicy(p *snapv1.SnapshotPolicy) []jsonpatch.Operation {
	switch {
	case p.Spec.Files == nil:
		return []jsonpatch.Operation{jsonpatch.NewOperation("add", "/spec/files", map[string]any{"ignoreRules": wellknown.DefaultIgnoreRules})}
	case p.Spec.Files.IgnoreRules == nil:
		return []jsonpatch.Operation{jsonpatch.NewOperation("add", "/spec/files/ignoreRules", wellknown.DefaultIgnoreRules)}
	}
	return nil
}

// Annotate sets one annotation to v as JSON, creating the map if needed.
func Annotate(existing map[string]string, key string, v any) (jsonpatch.Operation, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return jsonpatch.Operation{}, fmt.Errorf("encode annotation %s: %w", key, err)
	}
	return SetAnnotations(existing, map[string]string{key: string(b)})[0], nil
}

// EnsureAnnotation makes annotation key hold v, or removes it when v is
// empty; nothing when it already does.
func EnsureAnnotation(existing map[string]string, key, v string) []jsonpatch.Operation {
	cur, has := existing[key]
	switch {
	case v == "" && has:
		return []jsonpatch.Operation{jsonpatch.NewOperation("remove", "/metadata/annotations/"+EscapeKey(key), nil)}
	case v == "" || (has && cur == v):
		return nil
	}
	return SetAnnotations(existing, map[string]string{key: v})
}

// SetAnnotations sets annotations, creating the map if needed. "add" on an
// existing member replaces it: what admission computed wins over anything
// the user wrote there.
func SetAnnotations(existing, set map[string]string) []jsonpatch.Operation {
	if existing == nil {
		return []jsonpatch.Operation{jsonpatch.NewOperation("add", "/metadata/annotations", set)}
	}
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	ops := make([]jsonpatch.Operation, 0, len(keys))
	for _, k := range keys {
		ops = append(ops, jsonpatch.NewOperation("add", "/metadata/annotations/"+EscapeKey(k), set[k]))
	}
	return ops
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
