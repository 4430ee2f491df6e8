package volumepolicy

import (
	"strings"
	"testing"
)

// includeExcludePolicy is checked as Velero checks it, though snapflow
// applies none of it.
func TestIncludeExcludePolicy(t *testing.T) {
	for _, tc := range []struct {
		name, section, want string
	}{
		{"absent", "", ""},
		{"valid", "{includedNamespaceScopedResources: [pods, configmaps], excludedNamespaceScopedResources: [secrets], excludedClusterScopedResources: [nodes]}", ""},
		{"wildcard include", "{includedClusterScopedResources: ['*']}", "includeExcludePolicy.includedClusterScopedResources: '*' cannot be used"},
		{"wildcard exclude", "{excludedNamespaceScopedResources: ['*']}", "includeExcludePolicy.excludedNamespaceScopedResources: '*' cannot be used"},
		{"both included and excluded", "{includedNamespaceScopedResources: [pods, secrets], excludedNamespaceScopedResources: [secrets]}", `"secrets" is also in includedNamespaceScopedResources`},
		{"the same name in both scopes is fine", "{includedClusterScopedResources: [x], excludedNamespaceScopedResources: [x]}", ""},
		{"unknown field", "{includedResources: [pods]}", `unknown field "includedResources"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := "version: v1\n"
			if tc.section != "" {
				doc += "includeExcludePolicy: " + tc.section + "\n"
			}
			_, err := mustParse(t, doc).Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("want valid, got %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("want an error containing %q, got %v", tc.want, err)
			}
		})
	}
}
