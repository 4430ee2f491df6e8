package volumepolicy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// IncludeExclude is the includeExcludePolicy section: resource filters a
// Velero Backup may reuse. snapflow applies none of it (only volume
// policies decide about volumes), but checks it as Velero does, so a
// document Velero would refuse is refused here too.
type IncludeExclude struct {
	IncludedClusterScopedResources   []string `json:"includedClusterScopedResources,omitempty"`
	ExcludedClusterScopedResources   []string `json:"excludedClusterScopedResources,omitempty"`
	IncludedNamespaceScopedResources []string `json:"includedNamespaceScopedResources,omitempty"`
	ExcludedNamespaceScopedResources []string `json:"excludedNamespaceScopedResources,omitempty"`
}

// validateIncludeExclude decodes and checks raw (absent: nothing to check).
func validateIncludeExclude(raw json.RawMessage) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var ie IncludeExclude
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ie); err != nil {
		return fmt.Errorf("includeExcludePolicy: %w; it takes includedClusterScopedResources, excludedClusterScopedResources, includedNamespaceScopedResources and excludedNamespaceScopedResources, each a list of resources", err)
	}
	return errors.Join(
		includeExclude("ClusterScopedResources", ie.IncludedClusterScopedResources, ie.ExcludedClusterScopedResources),
		includeExclude("NamespaceScopedResources", ie.IncludedNamespaceScopedResources, ie.ExcludedNamespaceScopedResources))
}

// includeExclude checks one pair of lists: no wildcard, and nothing both
// included and excluded.
func includeExclude(suffix string, included, excluded []string) error {
	var errs []error
	for _, l := range []struct {
		name  string
		items []string
	}{{"included" + suffix, included}, {"excluded" + suffix, excluded}} {
		if contains(l.items, "*") {
			errs = append(errs, fmt.Errorf("includeExcludePolicy.%s: '*' cannot be used in includes or excludes filters in the policy; list the resources, or leave the list out to take all", l.name))
		}
	}
	for _, r := range excluded {
		if r != "*" && contains(included, r) {
			errs = append(errs, fmt.Errorf("includeExcludePolicy.excluded%s: %q is also in included%s; a resource cannot be both included and excluded", suffix, r, suffix))
		}
	}
	return errors.Join(errs...)
}
